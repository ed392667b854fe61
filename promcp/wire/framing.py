"""Stream framing as bytes arrive: Server-Sent Events (OpenAI, Anthropic) and NDJSON (Ollama).

Both decoders take chunks of any size (a proxy forwards bytes as they come and feeds the same bytes here) and return
the complete frames each chunk finished; a frame split across chunks is kept until its end arrives. Memory is
bounded by ``max_frame`` (a frame larger than that is dropped and counted in ``dropped``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promcp.wire.json_bounds import loads

__all__ = ["NDJSONDecoder", "SSEDecoder", "SSEEvent"]

DEFAULT_MAX_FRAME = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str  # "message" when the frame names none
    data: str
    id: str | None = None

    def json(self) -> Any:
        """``data`` decoded as JSON (``None`` for OpenAI's ``[DONE]`` sentinel or a data line that is not JSON)."""
        try:
            return loads(self.data)
        except ValueError:
            return None


class SSEDecoder:
    """Incremental ``text/event-stream`` decoder (the WHATWG rules: ``data:`` lines joined by newlines, a blank
    line ends an event, ``:`` lines are comments, CR, LF and CRLF all end a line).

    Linear in the bytes fed, whatever the chunking: a 50 MB event arriving in 64 KB chunks is scanned once (bytes
    already searched for a line end are not searched again, and the partial line grows in place)."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no line end
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._size = 0
        self._max = max_frame
        self.dropped = 0

    @property
    def idle(self) -> bool:
        """No event in progress (no partial line, no data line waiting for its blank line)."""
        return not self._buffer and not self._data

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        buf = self._buffer
        buf += chunk
        events: list[SSEEvent] = []
        pos = 0
        scan = self._scanned
        while True:
            cut = _line_end(buf, scan)
            if cut is None:
                break
            end, skip = cut
            line = buf[pos:end].decode("utf-8", "replace")
            pos = scan = end + skip
            event = self._line(line)
            if event is not None:
                events.append(event)
        if pos:
            del buf[:pos]
        # a CR at the very end may be the first half of a CRLF: look at it again with the next chunk
        self._scanned = len(buf) - 1 if buf.endswith(b"\r") else len(buf)
        if len(buf) > self._max:  # one endless line: drop it rather than grow without bound
            buf.clear()
            self._scanned, self.dropped = 0, self.dropped + 1
        return events

    def close(self) -> list[SSEEvent]:
        """The last event when the stream ended without its blank line."""
        events = self.feed(b"\n") if self._buffer else []
        event = self._line("")
        return events + ([event] if event is not None else [])

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._size = "", [], 0
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._size += len(value)
            if self._size > self._max:
                self._data, self._size, self.dropped = [], 0, self.dropped + 1
            else:
                self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


def _line_end(buffer: bytearray, start: int) -> tuple[int, int] | None:
    """(index, separator length) of the first line end at or after ``start``, or None. A CR at the very end may be
    the start of CRLF. Only the bytes before the first LF are searched for a CR (linear over many lines)."""
    lf = buffer.find(b"\n", start)
    cr = buffer.find(b"\r", start, lf if lf != -1 else len(buffer))
    if cr == -1:
        return None if lf == -1 else (lf, 1)
    if cr + 1 == len(buffer):
        return None
    return (cr, 2) if buffer[cr + 1 : cr + 2] == b"\n" else (cr, 1)


class NDJSONDecoder:
    """Incremental newline-delimited JSON (Ollama's streams): one decoded value per complete line; a line that is
    not JSON is counted in ``bad_lines`` and skipped."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._buffer = b""
        self._max = max_frame
        self.bad_lines = 0
        self.dropped = 0

    def feed(self, chunk: bytes) -> list[Any]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > self._max:
            self._buffer, self.dropped = b"", self.dropped + 1
        return [v for line in lines if (v := self._decode(line)) is not None]

    def close(self) -> list[Any]:
        rest, self._buffer = self._buffer, b""
        value = self._decode(rest)
        return [] if value is None else [value]

    def _decode(self, line: bytes) -> Any:
        if not line.strip():
            return None
        try:
            return loads(line)
        except ValueError:
            self.bad_lines += 1
            return None
