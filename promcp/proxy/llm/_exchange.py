"""What the LLM proxy keeps of one exchange while it streams: the hot path, so nothing here parses a whole body.

:func:`api_of` tells the provider API from the request path. :class:`LLMExchange` is the core's observer: it keeps
the request (bytes as received), the response head, the instants that matter (request received, response head,
first body byte, end), and the response body — a streamed one (SSE, NDJSON) decoded frame by frame into the wire
format's stream accumulator as the bytes pass, a plain one kept as bytes (bounded) to be parsed later. A stream's
recording is bounded however long it runs: its first :data:`HEAD_BYTES` of frames are read, then only the last
:data:`TAIL_FRAMES` (at most :data:`TAIL_BYTES`) are kept and read when it ends — where the usage and the stop
reason are — and the frames in between are counted (``skipped_frames`` / ``skipped_bytes``), not held. When the
exchange ends, the finished :class:`LLMExchange` goes to ``done`` (the recorder's queue), where the request is
parsed, tokens are counted and events are built, off the proxy's event loop.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any

from promcp.proxy._bounded import HEAD_BYTES, TAIL_BYTES, TAIL_FRAMES, HeadTail
from promcp.proxy._http import ExchangeObserver, Outcome, ProxyRequest, ProxyResponse
from promcp.stages.clock import Instant
from promcp.wire import Accumulator, stream_accumulator
from promcp.wire.framing import NDJSONDecoder, SSEDecoder, SSEEvent
from promcp.wire.openai import DONE

__all__ = ["COUNT_TOKENS", "MAX_BODY_BYTES", "LLMExchange", "api_of"]

#: the Anthropic token-counting endpoint: forwarded, not an LLM call
COUNT_TOKENS = "anthropic-count-tokens"
#: a non-streamed response body larger than this is forwarded but not kept (recorded as unparsed)
MAX_BODY_BYTES = 64 * 1024 * 1024


def api_of(method: str, path: str) -> str | None:
    """The wire format of an LLM API request path (``None``: forwarded without recording)."""
    if method != "POST":
        return None
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith((":streamGenerateContent", ":generateContent")) and "/models/" in path:
        return "gemini"
    if path.endswith("/messages/count_tokens"):
        return COUNT_TOKENS
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/api/chat"):
        return "ollama"
    return None


class LLMExchange(ExchangeObserver):
    """One LLM API exchange as it passes through the proxy."""

    def __init__(
        self,
        api: str,
        request: ProxyRequest,
        done: Callable[[LLMExchange], None],
        on_forward: Callable[[LLMExchange, Instant], None] | None = None,
    ) -> None:
        self.api = api
        self.request = request
        self.response_head: ProxyResponse | None = None
        self.first_byte: Instant | None = None
        self.last_byte: Instant | None = None  # the last body chunk was handed to the client
        self.outcome: Outcome | None = None
        self.body = bytearray()  # a non-streamed response body (bounded)
        self.body_dropped = False
        self.stream: Accumulator | None = None
        self.frames = 0
        self.bad_frames = 0
        self.decode_error: str | None = None
        self._decoder: SSEDecoder | NDJSONDecoder | None = None
        self._inflate: Any = None
        self._done = done
        self._on_forward = on_forward
        #: the request row journaled when the request was forwarded (settled by the call's final rows)
        self.in_flight: Any = None
        self._bounds: HeadTail[Any] = HeadTail(HEAD_BYTES, TAIL_FRAMES, TAIL_BYTES)
        self.rewritten: Any = (
            None  # what --strategy forwarded instead (a _rewrite.Rewrite), set before forwarding
        )

    @property
    def skipped_frames(self) -> int:
        """Frames between the head and the tail: counted, not read."""
        return self._bounds.skipped_frames

    @property
    def skipped_bytes(self) -> int:
        return self._bounds.skipped_bytes

    @property
    def streamed(self) -> bool:
        return self.stream is not None

    def delivered_whole(self) -> bool:
        """Every byte of a whole response reached the client: a stream whose own end marker was handed over, or a
        kept body that parses as one JSON document. Whoever then closes first (a client that hangs up as soon as
        it has read ``response.completed``, before the chunked body's terminator), nothing of the call is lost."""
        if self.decode_error is not None:
            return False
        if self.stream is not None:
            return self.stream.complete
        if self.body_dropped or not self.body:
            return False
        try:
            json.loads(bytes(self.body))
        except ValueError:
            return False
        return True

    def forwarded(self, at: Instant) -> None:
        """The request reached the upstream: its request row is journaled now, the call is in flight (once: a retry
        on a fresh connection is the same call)."""
        on_forward, self._on_forward = self._on_forward, None
        if on_forward is not None:
            on_forward(self, at)

    def response(self, response: ProxyResponse) -> None:
        self.response_head = response
        kind = (response.header("content-type") or "").split(";")[0].strip().lower()
        if response.status < 300 and kind in ("text/event-stream", "application/x-ndjson"):
            self.stream = stream_accumulator(self.api)
            self._decoder = SSEDecoder() if kind == "text/event-stream" else NDJSONDecoder()
        encoding = (response.header("content-encoding") or "identity").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS)
        elif encoding != "identity":
            self.decode_error = f"response body encoded with {encoding!r}: not read"

    def chunk(self, data: bytes, at: Instant) -> None:
        if self.first_byte is None:
            self.first_byte = at
        self.last_byte = at
        if self.decode_error is not None:
            return
        if self._inflate is not None:
            try:
                data = self._inflate.decompress(data)
            except zlib.error as exc:
                self.decode_error = f"response body does not inflate: {exc}"
                return
        if self._decoder is None:
            if len(self.body) + len(data) > MAX_BODY_BYTES:
                self.body_dropped = True
                self.body.clear()
            elif not self.body_dropped:
                self.body += data
            return
        assert self.stream is not None
        for frame in self._decoder.feed(data):
            self._take(frame)

    def _take(self, frame: Any) -> None:
        """Read a frame now (the head), or keep it among the last ones (the tail): :mod:`promcp.proxy._bounded`."""
        size = len(frame.data) if isinstance(frame, SSEEvent) else 64  # NDJSON lines arrive decoded
        for ready in self._bounds.take(frame, size):
            self._feed(ready)

    def _feed(self, frame: Any) -> None:
        assert self.stream is not None
        event = frame.json() if isinstance(self._decoder, SSEDecoder) else frame
        if event is None:  # OpenAI's [DONE], or a data line that is not JSON
            if getattr(frame, "data", "") == DONE:
                self.stream.feed(DONE)  # the stream's end marker
            else:
                self.bad_frames += 1
            return
        self.frames += 1
        try:
            self.stream.feed(event)
        except (TypeError, ValueError, AttributeError):  # a frame of an unexpected shape: counted, skipped
            self.bad_frames += 1

    def end(self, outcome: Outcome) -> None:
        self.outcome = outcome
        if self._decoder is not None and self.decode_error is None:
            for frame in self._decoder.close():
                self._take(frame)
            for frame in self._bounds.rest():
                self._feed(frame)
        self._done(self)
