"""The HTTP reverse-proxy core shared by the LLM proxy and the streamable-HTTP MCP proxy.

One :class:`ReverseProxy` listens on a loopback port and forwards every request to one upstream origin:

* **unchanged**: method, path and query, headers (hop-by-hop ones aside: ``Connection`` and the headers it names,
  ``Keep-Alive``, ``Proxy-*``, ``TE``, ``Trailer``, ``Transfer-Encoding``, ``Upgrade``, ``Expect``; ``Host`` names
  the upstream) and body go up; status, headers and body bytes come back as the upstream sent them (compressed
  bodies stay compressed). Upstream errors and status codes reach the client unchanged.
* **streamed**: each chunk of a response body is written to the client as soon as it arrives from the upstream
  (an SSE event is never held back waiting for the next one). A request body is read whole first (bounded by
  ``max_request_bytes``; past it the client gets 413).
* **failures of its own** are clear: bytes that are not HTTP/1.1 (or a head over 256 KiB) → 400 and the
  connection closed; upstream unreachable → 502, upstream silent past the timeout before answering
  → 504, each with a JSON body ``{"type": "error", "error": {"type": "proxy_error", "message": "promcp proxy: …"}}``
  (both the Anthropic and the OpenAI SDKs read its message). An upstream that breaks off mid-body makes the proxy
  break off the client's response too (the client sees a truncated body, as it would have without the proxy); a
  client that goes away mid-stream makes the proxy close the upstream response at once.
* **no protocol upgrades**: a request asking to switch protocols (a WebSocket) gets ``426 Upgrade Required`` — what
  an upstream without WebSocket answers — and the connection is closed; clients that try a WebSocket first (Codex's
  Responses WebSocket) fall back to plain HTTP at once, which is forwarded and recorded.
* **loopback only** unless ``allow_remote=True`` (the CLI's explicit ``--allow-remote`` flag).
* **Host / Origin** (``hosts=``, a :class:`~promcp.proxy._hosts.HostPolicy`; the MCP proxy's): a request whose
  ``Host`` is not a loopback name or whose ``Origin`` is not a loopback origin (unless allowed) gets 403 before its
  body is read, with one log line; an allowed foreign ``Host`` is sent on unchanged so that the upstream's own check
  still sees it.

Observation: ``observe(request)`` is called once per request when its body is complete, before it is forwarded,
and returns an :class:`ExchangeObserver` (or ``None`` to only forward). Its hooks run on the proxy's event loop
*after* the bytes they describe were handed to the client socket, so they never delay them — but they must stay
cheap (a few microseconds: keep bytes, feed an incremental decoder) and hand anything heavier (JSON parsing of a
whole body, token counting, journaling) to another thread. A ``response`` / ``chunk`` hook that raises is logged and gets no
more calls; the exchange goes on. :meth:`ExchangeObserver.end` is called exactly once per observed exchange, whatever happened.

Rewriting: an observer may set :attr:`ExchangeObserver.rewrite` in its ``response`` hook to change a streamed
response body on its way to the client (the MCP proxy points a legacy SSE server's absolute ``endpoint`` URL back
at itself). It is used only for a response without ``Content-Length``, and must be cheap and never raise.
An observer may also set :attr:`ExchangeObserver.prepare` (in ``observe``) to change the request on its way up
(``promcp proxy llm --strategy``): it gets the body and returns the body and headers to forward instead; it runs in
a worker thread (the event loop goes on serving other exchanges), and one that raises forwards the request as the
client sent it, with one log line.

Secrets: observers only ever see :attr:`ProxyRequest.headers` / :attr:`ProxyResponse.headers` through
:func:`safe_headers`: ``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie`` and every header whose
name looks like a credential (key, token, secret, auth, password, credential, signature) are removed, so nothing
built on this core can record them.

Stack (measured, tests/perf/bench_proxy.py, tests/perf/bench_proxy_llm.py and docs/proxy.md): both sides are
asyncio streams with llhttp parsing and the proxy's own framing (:mod:`promcp.proxy._h1`); the upstream side is a
small keep-alive pool (:mod:`promcp.proxy._upstream`; TLS through the certifi roots; no environment proxies or
``.netrc`` credentials: nothing is added to what the client sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from promcp.errors import ConfigError
from promcp.proxy import _h1
from promcp.proxy._hosts import HostPolicy
from promcp.proxy._observed import (
    ExchangeObserver,
    Guarded,
    Observe,
    Outcome,
    ProxyRequest,
    ProxyResponse,
    is_loopback,
    safe_headers,
)
from promcp.proxy._upstream import (
    UpstreamBroken,
    UpstreamPool,
    UpstreamResponse,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from promcp.stages.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "ExchangeObserver",
    "Observe",
    "Outcome",
    "ProxyRequest",
    "ProxyResponse",
    "ReverseProxy",
    "is_loopback",
    "safe_headers",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: the longest an upstream may stay silent (before its headers or between two body chunks)
DEFAULT_READ_TIMEOUT_S = 600.0
#: the longest a client may take to send a request head (an idle keep-alive connection included) or stay silent
#: mid-body: past it the connection is closed (slowloris), with one log line
DEFAULT_CLIENT_TIMEOUT_S = 60.0
#: connections served at once; one more is closed at once with one log line (file descriptors stay available)
DEFAULT_MAX_CONNECTIONS = 512
_READ_SIZE = 64 * 1024
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "expect",
    }
)
_HOP_BY_HOP_BYTES = frozenset(h.encode() for h in _HOP_BY_HOP)
#: set by the proxy itself: ``host`` names the upstream, ``content-length`` is the length of the body it forwards
_REWRITTEN = frozenset({b"host", b"content-length"})
_REASONS = {
    400: b"Bad Request",
    403: b"Forbidden",
    413: b"Payload Too Large",
    426: b"Upgrade Required",
    502: b"Bad Gateway",
    504: b"Gateway Timeout",
}


class _Framing(enum.Enum):
    """How the body of a response to the client is delimited."""

    LENGTH = "content-length"  # the upstream's Content-Length (or no body at all: HEAD, 204, 304)
    CHUNKED = "chunked"
    CLOSE = "close"  # an HTTP/1.0 client without a length: the body ends when the proxy closes the connection


class _Abort(Exception):
    """Stop serving this connection (the client is gone or the response had to be broken off)."""


@dataclass
class _Stats:
    connections: int = 0
    requests: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def _one_line(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's errors as one log line each (an accept that fails for want of file descriptors would
    otherwise print a traceback per attempt)."""
    exc = context.get("exception")
    log.warning("promcp proxy: %s%s", context.get("message", "event loop error"), f": {exc}" if exc else "")


class ReverseProxy:
    """A recording-ready reverse proxy from ``listen`` to the origin of ``upstream``.

    ``upstream`` is an ``http(s)://host[:port][/path]`` URL; requests are forwarded to its origin with their own
    path, so a client pointed at :attr:`url` (the local origin plus the upstream's path) reaches the same
    endpoints it would reach on the upstream. Use :meth:`start` / :meth:`close` inside a running event loop, or
    :meth:`start_in_thread` / :meth:`stop_thread` from synchronous code.
    """

    def __init__(
        self,
        upstream: str,
        *,
        observe: Observe | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_remote: bool = False,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        clock: Clock = SYSTEM_CLOCK,
        client_timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        hosts: HostPolicy | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"upstream {upstream!r} is not an http:// or https:// URL with a host", key="upstream"
            )
        if not allow_remote and not is_loopback(host):
            raise ConfigError(
                f"refusing to listen on {host!r}: the proxy listens on loopback only unless --allow-remote is given",
                key="listen",
            )
        self.upstream = upstream.rstrip("/")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.upstream_path = parts.path.rstrip("/")
        self._upstream_host = (
            parts.netloc.encode("idna") if not parts.netloc.isascii() else parts.netloc.encode()
        )
        self.observe = observe
        self.hosts = hosts
        self.host, self.port = host, port
        self.max_request_bytes = max_request_bytes
        self.clock = clock
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self.client_timeout_s, self.max_connections = client_timeout_s, max_connections
        self._server: asyncio.base_events.Server | None = None
        self._pool: UpstreamPool | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.stats = _Stats()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give a client: the local origin plus the upstream's path."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.upstream_path}"

    async def start(self) -> None:
        """Open the upstream client and start listening (``port`` 0 picks a free port; :attr:`port` tells it)."""
        self._pool = UpstreamPool(
            self.origin,
            connect_timeout_s=self.connect_timeout_s,
            read_timeout_s=self.read_timeout_s,
            clock=self.clock,
        )
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=_READ_SIZE)
        except OSError as exc:
            await self._pool.aclose()
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}", key="listen"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening, end open connections, close the upstream client."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self._pool is not None:
            await self._pool.aclose()

    async def serve_until(self, stop: asyncio.Event) -> None:
        """Start, serve until ``stop`` is set, close."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.close()

    def start_in_thread(self) -> ReverseProxy:
        """Run the proxy on an event loop in a daemon thread; returns once it listens."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(_one_line)
            self._loop = loop
            self._stopped = asyncio.Event()
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_until_complete(self._stopped.wait())
                loop.run_until_complete(self.close())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name=f"promcp-proxy-{self.origin}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop_thread(self, timeout_s: float = 10.0) -> None:
        """Stop a proxy started with :meth:`start_in_thread` and wait for its thread."""
        if self._loop is not None and self._stopped is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout_s)

    def __enter__(self) -> ReverseProxy:
        return self.start_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()

    # -- one connection -------------------------------------------------------------------------------------------

    def _refuse(self, writer: asyncio.StreamWriter, error: str, why: str) -> None:
        """Close a client connection promcp will not serve, with one log line (never a traceback)."""
        self.stats.errors[error] = self.stats.errors.get(error, 0) + 1
        peer = writer.get_extra_info("peername")
        log.warning("promcp proxy: closed the connection from %s: %s", peer[0] if peer else "?", why)
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self.max_connections:
            self._refuse(writer, "too_many_connections", f"{self.max_connections} connections already open")
            return
        self._connections.add(task)
        self.stats.connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = writer.get_extra_info("peername")
        client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        parser = _h1.Reader(response=False)
        try:
            while True:
                try:  # a head (or an idle keep-alive connection) gets client_timeout_s in all
                    head = await asyncio.wait_for(self._next_event(parser, reader), self.client_timeout_s)
                except TimeoutError:
                    self._refuse(
                        writer, "client_timeout", f"no complete request within {self.client_timeout_s:g} s"
                    )
                    break
                if not isinstance(head, _h1.Head):
                    break
                if parser.upgrade:
                    await self._refuse_upgrade(writer, head)
                    break
                if not await self._exchange(parser, reader, writer, head, client):
                    break
        except _h1.ProtocolError as exc:  # before any answer to it: say so, then close
            self.stats.errors["bad_request"] = self.stats.errors.get("bad_request", 0) + 1
            with contextlib.suppress(Exception):
                await self._send_own(writer, 400, f"promcp proxy: bad request: {exc}", close=True)
        except (_Abort, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _refuse_upgrade(self, writer: asyncio.StreamWriter, head: _h1.Head) -> None:
        """A request to switch protocols (a WebSocket) is answered as an upstream without WebSocket answers it:
        ``426 Upgrade Required``, then the connection is closed. The client goes on over plain HTTP, which the proxy
        records (Codex's Responses WebSocket: measured in docs/record.md)."""
        self.stats.requests += 1
        self.stats.errors["upgrade_refused"] = self.stats.errors.get("upgrade_refused", 0) + 1
        upgrade = next((v for k, v in head.headers if k == b"upgrade"), b"?").decode("latin-1")
        message = f"promcp proxy: protocol upgrade to {upgrade!r} not supported; use plain HTTP"
        await self._send_own(writer, 426, message, close=True)

    async def _next_event(self, parser: _h1.Reader, reader: asyncio.StreamReader) -> _h1.Event | None:
        """The client's next parsed event; None when it closed."""
        while True:
            event = parser.next_event()
            if event is _h1.NEED_DATA:
                if parser.broken:
                    return None
                parser.feed(await reader.read(_READ_SIZE))  # b"": the client closed
                continue
            return event

    async def _exchange(
        self,
        parser: _h1.Reader,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: _h1.Head,
        client: str,
    ) -> bool:
        """Serve one request; whether the connection may carry another."""
        received = self.clock.now()
        self.stats.requests += 1
        if self.hosts is not None and (why := self._refused(head)) is not None:
            self.stats.errors["forbidden"] = self.stats.errors.get("forbidden", 0) + 1
            target = head.target.decode("latin-1")[:80]
            log.warning(
                "promcp proxy: refused %s %s from %s (403): %s", head.method.decode(), target, client, why
            )
            await self._send_own(writer, 403, f"promcp proxy: {why}", close=True)
            return False
        if any(k == b"expect" and v.lower() == b"100-continue" for k, v in head.headers):
            writer.write(_h1.CONTINUE)
        body, too_large = await self._read_body(parser, reader)
        request = ProxyRequest(
            method=head.method.decode("ascii"),
            target=head.target.decode("latin-1"),
            headers=safe_headers((k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers),
            body=body,
            received=received,
            client=client,
        )
        found = self._observer(request)
        observer = Guarded(found) if found is not None else None
        outcome = Outcome(end=received)
        try:
            if too_large:
                outcome.error, outcome.message = (
                    "request_too_large",
                    f"promcp proxy: request body over {self.max_request_bytes} bytes",
                )
                outcome.status = 413
                await self._send_own(writer, 413, outcome.message, close=True)
                return False
            headers: Mapping[str, str] = {}
            if observer is not None and observer.prepare is not None:
                body, headers = await self._prepared(observer, body)
            return await self._forward(parser, reader, writer, head, body, observer, outcome, headers)
        finally:
            outcome.end = self.clock.now()
            if outcome.error:
                self.stats.errors[outcome.error] = self.stats.errors.get(outcome.error, 0) + 1
            if observer is not None:
                observer.end(outcome)

    async def _prepared(self, observer: Guarded, body: bytes) -> tuple[bytes, Mapping[str, str]]:
        """The request as the observer's ``prepare`` changes it (in a worker thread); as received if it fails."""
        prepare = observer.prepare
        assert prepare is not None
        try:
            return await asyncio.get_running_loop().run_in_executor(None, prepare, body)
        except Exception as exc:  # one line, never a traceback: the request goes as the client sent it
            log.warning(
                "promcp proxy: observer %s.prepare failed (%s: %s); forwarded as received",
                type(observer.inner).__name__,
                type(exc).__name__,
                exc,
            )
            return body, {}

    def _observer(self, request: ProxyRequest) -> ExchangeObserver | None:
        if self.observe is None:
            return None
        try:
            return self.observe(request)
        except Exception:
            log.exception(
                "promcp proxy: observer failed on %s %s; forwarding only", request.method, request.target
            )
            return None

    async def _read_body(self, parser: _h1.Reader, reader: asyncio.StreamReader) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        too_large = False
        while True:
            try:  # a body may take long, but not stall: client_timeout_s between two pieces
                event = await asyncio.wait_for(self._next_event(parser, reader), self.client_timeout_s)
            except TimeoutError:
                log.warning(
                    "promcp proxy: a client stalled mid-body for %g s; connection closed",
                    self.client_timeout_s,
                )
                self.stats.errors["client_timeout"] = self.stats.errors.get("client_timeout", 0) + 1
                raise _Abort from None
            if isinstance(event, _h1.Data):
                size += len(event.data)
                if size > self.max_request_bytes:
                    too_large = True
                    chunks.clear()
                elif not too_large:
                    chunks.append(event.data)
            elif event is _h1.END:
                return b"".join(chunks), too_large
            else:  # closed mid-body
                raise _Abort

    def _refused(self, head: _h1.Head) -> str | None:
        """Why the Host / Origin policy refuses this request (None: admitted)."""
        assert self.hosts is not None
        host = next((v.decode("latin-1") for k, v in head.headers if k == b"host"), None)
        origin = next((v.decode("latin-1") for k, v in head.headers if k == b"origin"), None)
        return self.hosts.refusal(host, origin)

    def _upstream_headers(
        self, raw: Sequence[tuple[bytes, bytes]], length: int, replaced: Mapping[str, str] | None = None
    ) -> list[tuple[bytes, bytes]]:
        named = {t.strip() for k, v in raw if k == b"connection" for t in v.lower().split(b",")}
        named |= {k.encode("latin-1") for k in replaced or ()}
        out = [
            (k, v) for k, v in raw if k not in _HOP_BY_HOP_BYTES and k not in _REWRITTEN and k not in named
        ]
        out += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (replaced or {}).items()]
        if length or any(k == b"content-length" for k, _ in raw):
            out.append((b"content-length", b"%d" % length))
        host = self._upstream_host
        if (
            self.hosts is not None
        ):  # an allowed foreign name goes on as it is: the upstream's own check sees it
            theirs = next((v for k, v in raw if k == b"host"), None)
            if theirs is not None and self.hosts.forward_host(theirs.decode("latin-1")):
                host = theirs
        return [(b"host", host), *out]

    async def _forward(
        self,
        parser: _h1.Reader,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: _h1.Head,
        body: bytes,
        observer: Guarded | None,
        outcome: Outcome,
        replaced: Mapping[str, str] | None = None,
    ) -> bool:
        assert self._pool is not None
        try:
            upstream = await self._pool.request(
                head.method,
                head.target,
                self._upstream_headers(head.headers, len(body), replaced),
                body,
                observer.forwarded if observer is not None else None,
            )
        except UpstreamTimeout as exc:
            outcome.sent = exc.sent
            await self._fail(
                writer, outcome, 504, "upstream_timeout", f"upstream {self.origin} did not answer: {exc}"
            )
            return head.keep_alive
        except UpstreamUnreachable as exc:
            await self._fail(
                writer, outcome, 502, "upstream_unreachable", f"cannot reach upstream {self.origin}: {exc}"
            )
            return head.keep_alive
        except UpstreamBroken as exc:
            outcome.sent = exc.sent
            await self._fail(writer, outcome, 502, "upstream_error", f"upstream {self.origin} failed: {exc}")
            return head.keep_alive
        stream = asyncio.current_task()
        assert stream is not None
        gone: list[bool] = []
        watcher = asyncio.ensure_future(self._watch_client(parser, reader, stream, gone))
        outcome.sent = upstream.sent
        try:
            outcome.status = upstream.status
            response, framing = self._client_head(upstream, head)
            writer.write(response)
            rewrite = None
            if observer is not None:
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in upstream.headers]
                observer.response(
                    ProxyResponse(upstream.status, safe_headers(headers), self.clock.now(), upstream.sent)
                )
                if observer.rewrite is not None and framing is not _Framing.LENGTH:
                    rewrite = observer.rewrite
            chunked = framing is _Framing.CHUNKED

            def send(pieces: list[bytes], last: bool) -> None:
                """Body pieces (and, ``last``, the end of the message) to the client in one write."""
                out = b"".join((_h1.chunk(p) if chunked else p) for p in pieces if p)
                writer.write(out + _h1.LAST_CHUNK if last and chunked else out)
                for piece in pieces:
                    if piece:
                        outcome.bytes_to_client += len(piece)
                        if observer is not None:
                            observer.chunk(piece, self.clock.now())

            ended = False
            async for data in upstream.chunks():
                pieces = [rewrite(data) if rewrite is not None else data]
                ended = upstream.done  # the last piece: the end of the message goes in the same write
                if ended and rewrite is not None:
                    pieces.append(rewrite(b""))
                send(pieces, ended)
                await writer.drain()
            if not ended:
                send([rewrite(b"")] if rewrite is not None else [], True)
                await writer.drain()
            return head.keep_alive and framing is not _Framing.CLOSE
        except asyncio.CancelledError:
            if not gone:  # the proxy is closing
                outcome.error, outcome.message = "proxy_closed", "the proxy stopped mid-response"
                raise
            outcome.error, outcome.message = (
                "client_disconnected",
                "the client closed the connection mid-response",
            )
            raise _Abort from None
        except ConnectionError:
            outcome.error, outcome.message = (
                "client_disconnected",
                "the client closed the connection mid-response",
            )
            raise _Abort from None
        except UpstreamTimeout as exc:
            outcome.error, outcome.message = (
                "upstream_timeout",
                f"the upstream went silent mid-response: {exc}",
            )
            raise _Abort from None
        except UpstreamBroken as exc:
            outcome.error, outcome.message = "upstream_cut", f"the upstream broke off mid-response: {exc}"
            raise _Abort from None
        finally:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
            if gone:  # clear the cancellation the watcher requested, if it is still pending
                stream.uncancel()
            await upstream.aclose()

    async def _watch_client(
        self, parser: _h1.Reader, reader: asyncio.StreamReader, stream: asyncio.Task[Any], gone: list[bool]
    ) -> None:
        """While a response streams: a client that closes its socket cancels the stream (the upstream response is
        closed at once). Bytes a client sends meanwhile (a pipelined request) are parsed and kept, up to
        ``max_request_bytes``; past that the client is no longer read until the response ends."""
        while parser.queued <= self.max_request_bytes and not parser.broken:
            data = await reader.read(_READ_SIZE)
            if not data:
                gone.append(True)
                stream.cancel()
                return
            parser.feed(data)  # a ProtocolError ends the watch; the connection closes after this response

    def _client_head(self, upstream: UpstreamResponse, request: _h1.Head) -> tuple[bytes, _Framing]:
        raw = upstream.headers
        named = {t.strip() for k, v in raw if k == b"connection" for t in v.lower().split(b",")}
        headers = [
            (k, v) for k, v in raw if k not in _HOP_BY_HOP_BYTES and k != b"content-length" and k not in named
        ]
        bodiless = request.method == b"HEAD" or upstream.status in (204, 304)
        if upstream.length is not None and not upstream.chunked:
            headers.append((b"content-length", b"%d" % upstream.length))
            framing = _Framing.LENGTH
        elif bodiless:
            framing = _Framing.LENGTH
        elif request.http10:  # no chunked encoding for an HTTP/1.0 client: the body ends with the connection
            framing = _Framing.CLOSE
        else:
            headers.append((b"transfer-encoding", b"chunked"))
            framing = _Framing.CHUNKED
        if framing is _Framing.CLOSE or not request.keep_alive:
            headers.append((b"connection", b"close"))
        return _h1.response_head(upstream.status, upstream.reason, headers), framing

    async def _fail(
        self,
        writer: asyncio.StreamWriter,
        outcome: Outcome,
        status: int,
        error: str,
        message: str,
    ) -> None:
        outcome.error, outcome.message, outcome.status = error, f"promcp proxy: {message}", status
        await self._send_own(writer, status, outcome.message)

    async def _send_own(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        message: str,
        *,
        close: bool = False,
    ) -> None:
        """A response of the proxy's own (an error the upstream never produced)."""
        body = json.dumps({"type": "error", "error": {"type": "proxy_error", "message": message}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if close:
            headers.append((b"connection", b"close"))
        writer.write(_h1.response_head(status, _REASONS.get(status, b""), headers) + body)
        await writer.drain()
