"""Newline-delimited JSON-RPC frames (MCP's stdio transport) cut from the bytes a relay has just forwarded.

:class:`LineFrames` is fed every chunk after it was relayed, with the monotonic instants it arrived and left
(``time.perf_counter_ns``), and returns the frames the chunk completed. It keeps only the frame in progress, and at
most ``max_frame`` bytes of it: a longer frame is still counted (size, instants) but handed out without its bytes,
so memory stays bounded whatever a peer writes. Nothing here imports more than the standard library: the relay
runs it before the rest of promcp is loaded.
"""

from __future__ import annotations

TYPE_CHECKING = False  # no ``typing`` at run time: the relay imports only what a line copier would
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["DEFAULT_MAX_FRAME", "Frame", "LineFrames", "json_decoder"]

#: frames up to this size are kept and decoded (a 50 MB tool result is read; a runaway line is not)
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
#: bytes kept from each end of an oversize frame
EDGE = 512


class Frame:
    """One line: its bytes (``None`` when longer than the limit), its size with the newline, and the monotonic
    instants (ns) its first byte arrived, its last byte arrived and its last byte was forwarded. An oversize
    frame keeps its first and last :data:`EDGE` bytes (``edges``), where a JSON-RPC id is found. (A plain class,
    not a dataclass: ``dataclasses`` imports ``inspect``, milliseconds of every wrapped server's start.)"""

    __slots__ = ("data", "edges", "first_ns", "forwarded_ns", "last_ns", "size")

    def __init__(
        self,
        data: bytes | None,
        size: int,
        first_ns: int,
        last_ns: int,
        forwarded_ns: int,
        edges: bytes = b"",
    ) -> None:
        self.data, self.size, self.edges = data, size, edges
        self.first_ns, self.last_ns, self.forwarded_ns = first_ns, last_ns, forwarded_ns

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Frame(size={self.size}, first_ns={self.first_ns}, last_ns={self.last_ns}, data={self.data!r:.60})"


class LineFrames:
    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._parts: list[bytes] = []
        self._kept = 0
        self._size = 0
        self._first = 0
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes, read_ns: int, forwarded_ns: int) -> list[Frame]:
        frames: list[Frame] = []
        start = 0
        end = len(chunk)
        while start < end:
            if self._size == 0:
                self._first = read_ns
            cut = chunk.find(b"\n", start)
            piece_end = end if cut == -1 else cut + 1
            self._take(chunk, start, piece_end)
            start = piece_end
            if cut == -1:
                break
            frames.append(self._frame(read_ns, forwarded_ns))
        return frames

    def skip(self, n: int, tail: bytes) -> None:
        """``n`` more bytes of an oversize frame that were not kept (only their last ``tail`` bytes): counted, and
        its last bytes kept. The stdio relay journals the middle of such a frame this way."""
        self._size += n
        self._parts, self._kept = [], self.max_frame + 1
        self._tail = (self._tail + tail)[-EDGE:]

    def close(self, read_ns: int, forwarded_ns: int) -> list[Frame]:
        """The last frame when the stream ended without its newline."""
        return [self._frame(read_ns, forwarded_ns)] if self._size else []

    @property
    def pending(self) -> int:
        """Bytes of the frame in progress."""
        return self._size

    def _take(self, chunk: bytes, start: int, stop: int) -> None:
        n = stop - start
        if len(self._head) < EDGE:
            self._head += chunk[start : min(stop, start + EDGE - len(self._head))]
        self._tail = (self._tail + chunk[max(start, stop - EDGE) : stop])[-EDGE:]
        self._size += n
        if self._kept + n <= self.max_frame:
            self._parts.append(chunk if (start, stop) == (0, len(chunk)) else chunk[start:stop])
            self._kept += n
        else:  # over the limit: drop what was kept, keep counting (kept > max_frame marks it)
            self._parts, self._kept = [], self.max_frame + 1

    def _frame(self, read_ns: int, forwarded_ns: int) -> Frame:
        data = b"".join(self._parts) if self._kept <= self.max_frame else None
        edges = b"" if data is not None else self._head + b"\n" + self._tail
        frame = Frame(data, self._size, self._first, read_ns, forwarded_ns, edges)
        self._parts, self._kept, self._size, self._head, self._tail = [], 0, 0, b"", b""
        return frame


def json_decoder() -> Callable[[bytes | str], Any]:
    """A strict JSON decoder for JSON-RPC messages (msgspec, imported on first call) raising ValueError."""
    import msgspec

    decode = msgspec.json.decode

    def strict(data: bytes | str) -> Any:
        try:
            return decode(data)
        except msgspec.DecodeError as exc:
            raise ValueError(str(exc)) from None

    return strict
