"""The proxy's upstream side: a small pool of keep-alive HTTP/1.1 connections to one origin, on asyncio streams
with llhttp parsing (:mod:`promcp.proxy._h1`; TLS through the certifi roots for ``https``).

Why not ``httpx2``: measured on the proxy's hot path (docs/proxy-llm.md, "Choosing the stack"), an
``httpx2.AsyncClient`` request costs 2-3x this pool's (its anyio-based transport, request and response models: ~0.8
vs ~0.35 ms here), and with it the proxy added ~1.1 ms to a response's first byte, over its 1 ms budget.
:mod:`promcp.proxy._h1` does the HTTP parsing and framing; this module only opens, reuses and closes connections.

A pooled connection the upstream closed while idle is detected before reuse (EOF on its socket) and, if the
upstream closes it as the request is sent, the request is sent again once on a fresh connection — only when not a
byte of the response had arrived, as HTTP clients do for a stale keep-alive connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from promcp.proxy import _h1
from promcp.stages.clock import SYSTEM_CLOCK, Clock, Instant

__all__ = [
    "UpstreamBroken",
    "UpstreamError",
    "UpstreamPool",
    "UpstreamResponse",
    "UpstreamTimeout",
    "UpstreamUnreachable",
]

_READ_SIZE = 64 * 1024


class UpstreamError(Exception):
    """The upstream could not be used for this request. ``sent``: when the request had been handed to the upstream
    in full (None: it never was)."""

    sent: Instant | None = None


class UpstreamUnreachable(UpstreamError):
    """No connection could be opened (refused, DNS, TLS handshake, connect timeout)."""


class UpstreamTimeout(UpstreamError):
    """The upstream stayed silent past the read timeout."""


class UpstreamBroken(UpstreamError):
    """The upstream closed the connection or spoke invalid HTTP."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.parser = _h1.Reader(response=True)
        self.received = 0  # response bytes read for the request in flight
        self.keep_alive = True  # the last response allows another request on this connection

    def stale(self) -> bool:
        return self.reader.at_eof() or self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


@dataclass
class UpstreamResponse:
    """A response head; iterate :meth:`chunks` for the body as it arrives, then :meth:`aclose`."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]  # as received (lower-case names)
    sent: Instant  # the request's last byte was handed to the upstream connection
    _pool: UpstreamPool
    _conn: _Conn
    length: int | None = None  # Content-Length, when the upstream gave one
    chunked: bool = False  # the upstream's body is chunked on the wire
    #: the whole body has been read: set before :meth:`chunks` yields the last piece, so that the piece and the end
    #: of the message can be written together
    done: bool = False

    async def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as the upstream sends them; raises UpstreamBroken / UpstreamTimeout when it breaks off.

        Each read from the socket is handed on at once; the body pieces one read holds (several SSE events the
        upstream wrote back to back) come as one chunk — nothing waits for more data."""
        conn = self._conn
        pool = self._pool
        while True:
            event = pool._event(conn)
            if isinstance(event, _h1.Data):
                self.done = conn.parser.take_end()
                yield event.data
                if self.done:
                    return
                continue
            if event is _h1.END:
                self.done = True
                return
            if event is not _h1.NEED_DATA:
                raise UpstreamBroken(f"unexpected {type(event).__name__} in the response body")
            await pool._read(conn)

    async def aclose(self) -> None:
        """Give the connection back to the pool when the response was read whole, else close it."""
        self._pool._release(self._conn, reusable=self.done)


class UpstreamPool:
    """Keep-alive connections to ``origin`` (``http(s)://host[:port]``)."""

    def __init__(
        self,
        origin: str,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int = 64,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        parts = urlsplit(origin)
        self.host = parts.hostname or ""
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self.clock = clock
        self._idle: list[_Conn] = []

    async def _connect(self) -> _Conn:
        context: ssl.SSLContext | None = None
        if self.tls:
            if self.ssl_context is None:
                import httpx2  # only for its TLS context: the certifi roots, as the host's backends use

                self.ssl_context = httpx2.create_ssl_context()
            context = self.ssl_context
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=self.host if context else None,
                    limit=_READ_SIZE,
                )
        except TimeoutError:
            raise UpstreamUnreachable(f"connect timeout after {self.connect_timeout_s:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamUnreachable(str(exc) or type(exc).__name__) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer)

    def _take_idle(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.stale():
                return conn
            conn.close()
        return None

    def _release(self, conn: _Conn, *, reusable: bool) -> None:
        if (
            reusable
            and conn.keep_alive
            and conn.parser.reusable
            and not conn.parser.mid_message
            and not conn.parser.events
            and len(self._idle) < self.max_idle
            and not conn.stale()
        ):
            self._idle.append(conn)
        else:
            conn.close()

    def _event(self, conn: _Conn) -> object:
        """The next event parsed from what was read (``_h1.NEED_DATA`` when it needs more)."""
        event = conn.parser.next_event()
        if event is _h1.NEED_DATA and conn.parser.broken:
            raise UpstreamBroken("the upstream closed the connection")
        return event

    async def _read(self, conn: _Conn) -> None:
        try:
            async with asyncio.timeout(self.read_timeout_s):
                data = await conn.reader.read(_READ_SIZE)
        except TimeoutError:
            raise UpstreamTimeout(f"no data for {self.read_timeout_s:g} s") from None
        except OSError as exc:
            raise UpstreamBroken(str(exc) or type(exc).__name__) from None
        conn.received += len(data)
        try:
            conn.parser.feed(data)  # b"": the upstream closed (ends a body delimited by the close)
        except _h1.ProtocolError as exc:
            raise UpstreamBroken(f"the upstream spoke invalid HTTP: {exc}") from None

    async def _next_event(self, conn: _Conn) -> object:
        while True:
            event = self._event(conn)
            if event is not _h1.NEED_DATA:
                return event
            await self._read(conn)

    async def request(
        self,
        method: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        on_sent: Callable[[Instant], None] | None = None,
    ) -> UpstreamResponse:
        """Send one request (a head the caller built from one :mod:`promcp.proxy._h1` parsed) and wait for the
        response head. ``on_sent`` is told when the request was handed to the upstream in full (before its answer
        began; it must be cheap and never raise)."""
        conn = self._take_idle()
        reused = conn is not None
        while True:
            if conn is None:
                conn = await self._connect()
            try:
                return await self._send(conn, method, target, headers, body, on_sent)
            except UpstreamBroken:
                conn.close()
                if not reused or conn.received:
                    raise
                reused, conn = False, None  # a stale keep-alive connection: once more on a fresh one
            except BaseException:
                conn.close()
                raise

    async def _send(
        self,
        conn: _Conn,
        method: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        on_sent: Callable[[Instant], None] | None = None,
    ) -> UpstreamResponse:
        conn.received = 0
        if method == b"HEAD":
            conn.parser.bodiless()
        data = _h1.request_head(method, target, headers)
        if body:
            data += body
        try:
            conn.writer.write(data)
            await conn.writer.drain()
        except OSError as exc:
            raise UpstreamBroken(str(exc) or type(exc).__name__) from None
        sent = self.clock.now()
        if on_sent is not None:
            on_sent(sent)
        try:
            while True:
                event = await self._next_event(conn)
                if not isinstance(event, _h1.Head):
                    raise UpstreamBroken(f"unexpected {type(event).__name__} instead of a response")
                if 100 <= event.status < 200 and event.status != 101:  # informational: its END follows
                    await self._next_event(conn)
                    continue
                conn.keep_alive = event.keep_alive
                return UpstreamResponse(
                    status=event.status,
                    reason=event.reason,
                    headers=event.headers,  # names lower-cased
                    sent=sent,
                    _pool=self,
                    _conn=conn,
                    length=event.length,
                    chunked=event.chunked,
                )
        except UpstreamError as exc:
            exc.sent = sent
            raise

    async def aclose(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
