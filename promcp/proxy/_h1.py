"""HTTP/1.1 on the wire for the proxy core: incremental parsing with ``httptools`` (llhttp, the C parser uvicorn
uses) and the few byte layouts the proxy writes itself.

Why not ``h11``: measured on the proxy's hot path (tests/perf/bench_proxy.py, docs/proxy.md "Overhead"), h11's pure
Python state machine and per-header validation were the largest part of the CPU the HTTP core spent per exchange,
and on 2 shared cores that CPU is what the proxy adds to a response's first byte. llhttp parses in C; the proxy
only re-frames: it forwards the heads it parsed (names lower-cased) and body bytes, so what it writes is built from
what llhttp already validated (no CR/LF in names or values) plus its own constant headers.

A :class:`Reader` turns fed bytes into a queue of events, one message after another (pipelined requests, an
upstream's informational responses): :class:`Head`, :class:`Data`, :data:`END`. :data:`NEED_DATA` means it needs
more bytes. A head over ``max_head_bytes`` or bytes llhttp rejects raise :class:`ProtocolError`. A request head
that asks for a protocol upgrade (``Connection: upgrade``, ``Upgrade: websocket``) is queued, then nothing more is
parsed and :attr:`Reader.upgrade` is set: the proxy refuses the upgrade (promcp/proxy/_http.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import httptools

__all__ = [
    "CONTINUE",
    "END",
    "LAST_CHUNK",
    "NEED_DATA",
    "Data",
    "Head",
    "ProtocolError",
    "Reader",
    "chunk",
    "request_head",
    "response_head",
]

DEFAULT_MAX_HEAD_BYTES = 256 * 1024
LAST_CHUNK = b"0\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class ProtocolError(Exception):
    """The peer's bytes are not HTTP/1.1 the proxy can forward."""


@dataclass(slots=True)
class Head:
    """A request or response head as received (header names lower-cased, values as sent)."""

    method: bytes  # requests: the method; responses: b""
    target: bytes  # requests: path and query; responses: b""
    status: int  # responses: the status code; requests: 0
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    http10: bool  # the peer spoke HTTP/1.0
    keep_alive: bool  # the connection may carry another message after this one
    chunked: bool  # the body is chunked on the wire
    length: int | None  # Content-Length, when given


@dataclass(slots=True)
class Data:
    data: bytes


class _End:
    def __repr__(self) -> str:
        return "END"


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


END = _End()
NEED_DATA = _NeedData()
Event = Head | Data | _End | _NeedData


class Reader:
    """Incremental parser of one connection's messages (``response=True``: an upstream's responses).

    ``bodiless()`` — set by the user before feeding a response to a ``HEAD`` request: its head ends the message
    (llhttp cannot be told so; the connection is then not reused, see :attr:`reusable`)."""

    def __init__(self, *, response: bool, max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES) -> None:
        self.response = response
        self.max_head_bytes = max_head_bytes
        self._parser: httptools.HttpRequestParser | httptools.HttpResponseParser = (
            httptools.HttpResponseParser(self) if response else httptools.HttpRequestParser(self)
        )
        self.events: deque[Head | Data | _End] = deque()
        self.queued = 0  # body bytes in ``events``
        self._in_head = False
        self._head_bytes = 0
        self._url = b""
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._head: Head | None = None  # the message in progress
        self._skip_body = False
        self.broken = (
            False  # llhttp rejected the bytes or the peer closed mid-message; nothing more is parsed
        )
        self.reusable = True  # false after a HEAD response (the parser's state no longer matches the wire)
        self.upgrade = (
            False  # the last head asked for a protocol upgrade (WebSocket); nothing after it is parsed
        )

    # -- httptools callbacks --------------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._url, self._reason, self._headers = b"", b"", []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_status(self, status: bytes) -> None:
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._parser
        headers = self._headers
        length: int | None = None
        chunked = False
        for name, value in headers:
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if self.response:
            assert isinstance(parser, httptools.HttpResponseParser)
            method, status = b"", parser.get_status_code()
        else:
            assert isinstance(parser, httptools.HttpRequestParser)
            method, status = parser.get_method(), 0
        head = Head(
            method=method,
            target=self._url,
            status=status,
            reason=self._reason,
            headers=headers,
            http10=parser.get_http_version() == "1.0",
            keep_alive=parser.should_keep_alive(),
            chunked=chunked,
            length=length,
        )
        self._head = head
        self.events.append(head)
        if self._skip_body and not 100 <= status < 200:
            self._skip_body = False
            self.reusable = False
            self._head = None
            self.events.append(END)

    def on_body(self, body: bytes) -> None:
        if self._head is None:  # the body of a HEAD response's message, which has none
            return
        self.queued += len(body)
        last = self.events[-1] if self.events else None
        if isinstance(last, Data):
            last.data += body
        else:
            self.events.append(Data(body))

    def on_message_complete(self) -> None:
        if self._head is not None:
            self._head = None
            self.events.append(END)

    # -- use ------------------------------------------------------------------------------------------------------

    def bodiless(self) -> None:
        """The next response answers a HEAD request: it has no body whatever its headers say."""
        self._skip_body = True

    def feed(self, data: bytes) -> None:
        """Parse ``data``; ``b""``: the peer closed (ends a body delimited by the connection's close)."""
        if self.broken:
            return
        if not data:
            self.broken = True
            head = self._head
            if head is not None and head.length is None and not head.chunked and self.response:
                self._head = None
                self.events.append(END)  # a body delimited by the close ends here
            return
        try:
            self._parser.feed_data(data)
        except (
            httptools.HttpParserUpgrade
        ):  # the head (queued) asks to switch protocols: what follows is not HTTP
            self.broken = True
            self.upgrade = True
        except (httptools.HttpParserError, ValueError) as exc:
            self.broken = True
            raise ProtocolError(str(exc) or type(exc).__name__) from None
        if self._in_head:  # a head still incomplete after this read: bound what llhttp holds of it
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                self.broken = True
                raise ProtocolError(f"message head over {self.max_head_bytes} bytes")

    def next_event(self) -> Event:
        """The next parsed event, or :data:`NEED_DATA`."""
        if not self.events:
            return NEED_DATA
        event = self.events.popleft()
        if isinstance(event, Data):
            self.queued -= len(event.data)
        return event

    def take_end(self) -> bool:
        """Whether the message ends next (its :data:`END` is then taken): lets a body's last piece leave with it."""
        if self.events and self.events[0] is END:
            self.events.popleft()
            return True
        return False

    @property
    def mid_message(self) -> bool:
        """A message has begun and not ended."""
        return self._in_head or self._head is not None


def _headers(headers: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers)


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    return b"%s %s HTTP/1.1\r\n%s\r\n" % (method, target, _headers(headers))


def response_head(status: int, reason: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    return b"HTTP/1.1 %d %s\r\n%s\r\n" % (status, reason, _headers(headers))


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)
