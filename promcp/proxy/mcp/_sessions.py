"""From HTTP exchanges to MCP sessions: what the HTTP side of ``promcp proxy mcp`` does off the proxy's event loop.

The reverse-proxy core (:mod:`promcp.proxy._http`) hands every exchange to an :class:`HttpExchange` observer, whose
hooks only queue what they were given (a request, a response head, a body chunk, the outcome). They hold it on the
loop until the exchange ends, or for at most ``HOLD_S`` (50 ms) or ``HOLD_BYTES`` (1 MiB), then queue it in one
piece: a worker woken mid-exchange would take the interpreter lock and a CPU from the bytes in flight (measured,
docs/proxy.md "Overhead"); instants are taken when the bytes pass, so holding changes no figure. One worker thread
(:class:`HttpSessions`) takes the queue in order and, for each exchange:

* finds its **session** — by the ``Mcp-Session-Id`` header (streamable HTTP), by the ``sessionId`` / ``session_id``
  query parameter a legacy SSE server named in its ``endpoint`` event, or, for a request that names none (the
  ``initialize`` that opens a session, a ``server/discover`` probe, a stateless server), the session being opened:
  a response that names a new ``Mcp-Session-Id`` binds that session to it;
* cuts the **JSON-RPC messages** out of the bodies — a POST body (one message or a batch), a JSON response body, each
  ``message`` event of an SSE stream (POST responses, GET streams, the legacy SSE stream) — and hands them to the
  session's :class:`~promcp.proxy.mcp.observer.McpObserver`: the same pairing, INIT, ``tools/list`` pages, S3/S4 and
  stage ``MCP`` events as over stdio. A message's wire bytes are its JSON text (the body, or the event's ``data``);
* records what only HTTP has: INIT ``ready`` (the session's first request → the first response), a request that
  got no JSON-RPC answer (server unreachable, HTTP error, a body that is not JSON-RPC, a stream cut short) as the
  failure of that request, each ``GET`` stream and ``DELETE`` as a stage ``MCP`` event of the transport.

A session ends with a ``DELETE``, with its legacy SSE stream, with a 404 for its id (the server forgot it) or when
the proxy stops; its run is then finalized (one run per session, unless a run id was given: then every session
writes one part of that run). An exchange that names a session after it ended (a ``notifications/cancelled`` the
client sent as it gave up, arriving after its DELETE) writes one more part of that session's run, merged into its
run file when the exchange ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from promcp.events import Status, Topology, Transport
from promcp.proxy._bounded import HeadTail
from promcp.proxy._http import ExchangeObserver, Outcome, ProxyRequest, ProxyResponse
from promcp.proxy.mcp.frames import json_decoder
from promcp.proxy.mcp.observer import CLIENT, SERVER, McpObserver, Seen, error_failure
from promcp.recorder import Recorder, new_run_id
from promcp.stages import Failure, Instant
from promcp.tokenizers import CachedTokenizer
from promcp.wire import error_message, http_error_type
from promcp.wire.framing import SSEDecoder

__all__ = ["SESSION_HEADER", "SOURCE", "EndpointRewriter", "HttpExchange", "HttpSessions", "session_query"]

SOURCE = "proxy:mcp"
SESSION_HEADER = "mcp-session-id"
_SESSION_PARAMS = ("sessionId", "session_id")
#: sessions kept open at once; past it the least recently used one is ended (bounds memory)
MAX_SESSIONS = 256
#: ended sessions whose run a late message (a notifications/cancelled sent after the session ended) still finds
ENDED_KEPT = 1024

_REQ, _HEAD, _CHUNK, _END, _STOP, _MANY, _SENT, _CHUNKS = range(8)
#: the longest an exchange's hooks are held on the proxy's loop before the worker sees them (a long tool call, a
#: GET stream); and the body bytes past which they are handed on at once
HOLD_S = 0.05
HOLD_BYTES = 1 << 20
#: stream bytes queued for the worker and not handled yet, past which a stream's chunks are no longer queued: its
#: last ones are kept and the rest counted (:class:`promcp.proxy._bounded.HeadTail`) until the worker catches up
BACKLOG_BYTES = 2 << 20


def session_query(target: str) -> str | None:
    """The legacy SSE session id in a URL's query (``sessionId`` or ``session_id``), or None."""
    query = urlsplit(target).query
    if not query:
        return None
    params = parse_qs(query)
    return next((params[k][0] for k in _SESSION_PARAMS if params.get(k)), None)


def _digest(session_id: str) -> str:
    """What is recorded of a session id (a credential of sorts: whoever has it can use the session)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:12]


class EndpointRewriter:
    """Points a legacy SSE server's ``endpoint`` event back at the proxy (the core's ``rewrite`` hook).

    The client POSTs its messages to the URL that event names. A path (what the mcp SDKs send) already reaches the
    proxy; an absolute URL would send the client straight to the server, so its origin (scheme, host, port) is
    replaced by the one the client used to reach the proxy. The start of the stream is held until its first event
    is complete (at most 64 KiB); every byte after it, and every event but an absolute ``endpoint``, passes
    unchanged."""

    LIMIT = 64 * 1024
    _ENDPOINT = re.compile(rb"^event:[ ]?endpoint\r?$", re.M)
    _ABSOLUTE = re.compile(rb"^(data:[ ]?)https?://[^/?#\r\n]*", re.M | re.I)

    def __init__(self, origin: str) -> None:
        self.origin = origin.encode()
        self.held = bytearray()
        self.done = False
        self.rewrote = False

    def __call__(self, data: bytes) -> bytes:
        if self.done:
            return data
        if not data:  # the body ended: whatever is held goes out as it was
            self.done = True
            return bytes(self.held)
        self.held += data
        end = _event_end(self.held)
        if end is None and len(self.held) <= self.LIMIT:
            return b""
        self.done = True
        held = bytes(self.held)
        self.held = bytearray()
        if end is None:
            return held
        first, rest = held[:end], held[end:]
        if self._ENDPOINT.search(first):
            fixed = self._ABSOLUTE.sub(lambda m: m.group(1) + self.origin, first, count=1)
            self.rewrote = fixed != first
            first = fixed
        return first + rest


def _is_stream(head: ProxyResponse) -> bool:
    """Whether a response is an SSE stream of JSON-RPC messages (a POST's answer, a GET stream)."""
    kind = (head.header("content-type") or "").split(";")[0].strip().lower()
    return kind == "text/event-stream" and head.status < 300


def _straddled_end(before: bytes, data: bytes) -> int | None:
    """Where in ``data`` an event ends whose blank line began in the bytes ``before`` it (None: none does)."""
    for tail, head in ((b"\r\n\r", b"\n"), (b"\r\n", b"\r\n"), (b"\n", b"\n"), (b"\r", b"\r")):
        if before.endswith(tail) and data.startswith(head):
            return len(head)
    return None


def _event_end(buffer: bytearray) -> int | None:
    """The index just past the blank line that ends the first SSE event in ``buffer``, or None."""
    ends = [i + len(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if (i := buffer.find(sep)) != -1]
    return min(ends) if ends else None


class HttpExchange(ExchangeObserver):
    """The core's observer for one exchange: queues what it sees, nothing more (runs on the proxy's loop)."""

    def __init__(
        self,
        put: Callable[[tuple[Any, ...]], None],
        request: ProxyRequest,
        body_done: Instant,
        *,
        room: Callable[[int], bool] | None = None,
        queued: Callable[[int], None] | None = None,
        max_message: int = 64 * 1024 * 1024,
    ) -> None:
        self.request = request
        self.body_done = body_done
        self.state: _State | None = None  # the worker's
        self._put = put
        #: an SSE response's chunks are queued within a bound (``room``: whether the worker's backlog can take that
        #: many more bytes; past it the last chunks are kept and the rest counted): an endless stream costs flat memory
        self._room, self._queued = room, queued
        self.bounds: HeadTail[tuple[bytes, Instant]] | None = None
        self._skipped_seen = 0
        self._max_message = max_message
        self._edge = b""  # the last bytes queued (an event's end may straddle two chunks)
        self._open = 0  # bytes of the event the worker is in the middle of (0: it is between events)
        self._held: list[tuple[Any, ...]] | None = [(_REQ, self)]
        self._held_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        try:
            self._timer = asyncio.get_running_loop().call_later(HOLD_S, self._release)
        except RuntimeError:  # not on an event loop: nothing is held
            self._release()

    def _hand(self, item: tuple[Any, ...], size: int = 0) -> None:
        if self._held is None:
            self._put(item)
            return
        self._held.append(item)
        self._held_bytes += size
        if self._held_bytes > HOLD_BYTES:
            self._release()

    def _release(self) -> None:
        """Queue what is held, in one piece; from now on every hook queues at once."""
        held, self._held = self._held, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if held:
            self._put((_MANY, held))

    def forwarded(self, at: Instant) -> None:
        self._hand((_SENT, self, at))

    def response(self, response: ProxyResponse) -> None:
        if (  # a legacy SSE stream: its endpoint event must point back at the proxy
            self.request.method == "GET"
            and response.status == 200
            and (response.header("content-type") or "").startswith("text/event-stream")
            and self.request.header(SESSION_HEADER) is None
            and session_query(self.request.target) is None
        ):
            host = self.request.header("host")
            if host:
                self.rewrite = EndpointRewriter(f"http://{host}")
        if _is_stream(response):
            self.bounds = HeadTail()
        self._hand((_HEAD, self, response))

    def chunk(self, data: bytes, at: Instant) -> None:
        bounds = self.bounds
        if bounds is None:
            self._hand((_CHUNK, self, data, at), len(data))
            return
        room = self._room(len(data) + bounds.held) if self._room is not None else True
        if room or not self._open:
            self._chunks(bounds.take((data, at), len(data), room=room))
            return
        # no room, but the worker is in the middle of an event (one large answer, say): that event is queued to
        # its end, as far as the message limit — the bound drops whole events only
        cut = _straddled_end(self._edge, data)
        if cut is None:
            cut = _event_end(bytearray(data))
        if cut is None:
            if self._open + len(data) <= self._max_message:
                self._chunks([(data, at)])
            else:  # an event over the limit: the worker drops it anyway
                self._open = 0
                self._chunks(bounds.take((data, at), len(data), room=False))
            return
        if cut:
            self._chunks([(data[:cut], at)])
        self._open = 0
        if cut < len(data):
            self._chunks(bounds.take((data[cut:], at), len(data) - cut, room=False))

    def _chunks(self, ready: list[tuple[bytes, Instant]]) -> None:
        """Queue a stream's chunks, saying whether chunks before the first were dropped (a gap)."""
        if not ready or self.bounds is None:
            return
        gap = self.bounds.skipped_frames != self._skipped_seen
        self._skipped_seen = self.bounds.skipped_frames
        skipping = gap  # after a gap the worker skips to the next event's start: no event is open until then
        for data, _at in ready:  # where the worker's decoder will be: between events, or this far into one
            edge = self._edge + data
            last = max(edge.rfind(b"\n\n") + 2, edge.rfind(b"\r\r") + 2, edge.rfind(b"\r\n\r\n") + 4)
            if last >= 2:
                skipping, self._open = False, len(edge) - last
            else:
                self._open = 0 if skipping else self._open + len(data)
            self._edge = edge[-4:]
        size = sum(len(data) for data, _ in ready)
        if self._queued is not None:
            self._queued(size)
        self._hand((_CHUNKS, self, ready, gap), size)

    def end(self, outcome: Outcome) -> None:
        if self.bounds is not None:
            self._chunks(self.bounds.rest())
        self._hand((_END, self, outcome))
        self._release()


@dataclass
class _Session:
    observer: McpObserver
    recorder: Recorder
    own_recorder: bool
    key: tuple[str, str] | None = None
    first_request: Instant | None = None
    born_here: bool = True  # the proxy saw it start (else: first seen by an id it did not hand out)
    initializing: bool = False
    ended: bool = False
    used: float = field(default_factory=time.monotonic)
    late: bool = (
        False  # an exchange naming a session that had ended: written into that session's run, then ended
    )


@dataclass
class _State:
    """What the worker keeps of one exchange."""

    session: _Session | None
    message: Any = None  # what the client sent: one JSON-RPC message or a batch (None: no body)
    request_ids: list[Any] = field(default_factory=list)
    body_error: str | None = None
    head: ProxyResponse | None = None
    fed: bool = False
    decoder: SSEDecoder | None = None
    event_start: Instant | None = None
    resync: bool = False  # chunks were dropped: skip to the next event boundary
    body: bytearray | None = None
    body_dropped: bool = False
    first_at: Instant | None = None
    last_at: Instant | None = None
    null_error: Any = None  # a JSON-RPC error with no id (the answer to a request the server refused)
    unreadable: str | None = None
    stream_messages: int = 0
    stream_bytes: int = 0
    legacy: bool = False  # a GET that opened a legacy SSE stream


class HttpSessions:
    """The worker: sessions, their observers and recorders (see the module's docstring)."""

    def __init__(
        self,
        *,
        out: Path,
        name: str,
        run_id: str | None,
        tokenizer: Callable[[], CachedTokenizer],
        content: str,
        max_content_bytes: int | None,
        timeout_s: float | None,
        max_message: int,
        meta: Mapping[str, Any],
        say: Callable[[str], None],
    ) -> None:
        self.out, self.name, self.run_id = out, name, run_id
        self.tokenizer, self.content, self.timeout_s = tokenizer, content, timeout_s
        self.max_message = max_message
        self.max_content_bytes = max_content_bytes
        self.meta = dict(meta)
        self.say = say
        self.sessions_seen = 0
        self.runs: list[str] = []
        self.errors = 0
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._bound: dict[tuple[str, str], _Session] = {}
        self._live: list[_Session] = []
        self._unbound: _Session | None = None
        self._shared: Recorder | None = None
        self._ended: OrderedDict[tuple[str, str], str] = OrderedDict()  # an ended session's key → its own run
        self._decode = json_decoder()
        self._queued_bytes = 0  # stream bytes the loop queued (written by the loop only)…
        self._handled_bytes = 0  # …and the worker handled (written by the worker only)
        self.peak_backlog = 0  # the most stream bytes queued and not handled at once
        self._worker = threading.Thread(target=self._work, name="promcp-mcp-http", daemon=True)
        self._worker.start()

    # -- the loop's side ------------------------------------------------------------------------------------------

    def observe(self, request: ProxyRequest, body_done: Instant) -> HttpExchange:
        return HttpExchange(
            self._queue.put,
            request,
            body_done,
            room=self._room,
            queued=self._count_queued,
            max_message=self.max_message,
        )

    def _room(self, size: int) -> bool:
        """Whether the worker's backlog of stream chunks has room for ``size`` more bytes."""
        return self._queued_bytes - self._handled_bytes + size <= BACKLOG_BYTES

    def _count_queued(self, size: int) -> None:
        self._queued_bytes += size
        self.peak_backlog = max(self.peak_backlog, self._queued_bytes - self._handled_bytes)

    def stop(self, at: Instant) -> None:
        """End every session (after what is queued) and wait for the worker."""
        self._queue.put((_STOP, at))
        self._worker.join()

    # -- the worker -----------------------------------------------------------------------------------------------

    def _work(self) -> None:
        tick = None if self.timeout_s is None else min(max(self.timeout_s / 4, 0.05), 1.0)
        while True:
            try:
                item = self._queue.get(timeout=tick)
            except queue.Empty:
                self._check_timeouts()
                continue
            if item[0] == _STOP:
                self._handle(item)
                return
            for one in item[1] if item[0] == _MANY else (item,):
                self._handle(one)
            if tick is not None:
                self._check_timeouts()

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        try:
            if kind == _STOP:
                self._stop(item[1])
                return
            ex: HttpExchange = item[1]
            if kind == _REQ:
                self._request(ex)
            elif kind == _SENT:
                self._sent(ex, item[2])
            elif kind == _CHUNKS:
                self._stream_chunks(ex, item[2], item[3])
            elif kind == _HEAD:
                self._head(ex, item[2])
            elif kind == _CHUNK:
                self._chunk(ex, item[2], item[3])
            else:
                self._end(ex, item[2])
        except Exception as exc:  # never lose the worker: say it once, go on with the next item
            self.errors += 1
            if self.errors == 1:
                self.say(f"recording error ({type(exc).__name__}: {exc}); traffic is still relayed")

    def _check_timeouts(self) -> None:
        for session in self._live:
            with contextlib.suppress(Exception):
                session.observer.check_timeouts()

    # -- sessions -------------------------------------------------------------------------------------------------

    def _recorder(self) -> tuple[Recorder, bool]:
        """The recorder a new session writes to: its own run, or (a run id was given) one part of that run."""
        if self.run_id is not None:
            if self._shared is None:
                self._shared = self._open(self.run_id)
            return self._shared, False
        return self._open(new_run_id()), True

    def _open(self, run_id: str, *, new_run: bool = True) -> Recorder:
        """A recorder writing one part of ``run_id`` (``new_run``: a run this proxy counts as its own)."""
        if new_run:
            self.runs.append(run_id)
        return Recorder(
            self.out,
            topology=Topology.C_OTS,
            source=SOURCE,
            run_id=run_id,
            part=f"mcp-{self.name}",
            content=self.content,
            max_content_bytes=self.max_content_bytes,
            meta=self.meta,
        )

    def _observer(self, recorder: Recorder, transport: Transport) -> McpObserver:
        observer = McpObserver(
            recorder,
            server=self.name,
            transport=transport,
            tokenizer=self.tokenizer,
            timeout_s=self.timeout_s,
            relay_ms=False,
        )
        observer.on_error = self.say
        return observer

    def _new(self, transport: Transport, key: tuple[str, str] | None, *, born_here: bool = True) -> _Session:
        recorder, own = self._recorder()
        observer = self._observer(recorder, transport)
        session = _Session(observer, recorder, own, born_here=born_here)
        self.sessions_seen += 1
        self._live.append(session)
        if key is not None:
            self._bind(session, key)
        if len(self._live) > MAX_SESSIONS:
            oldest = min(self._live, key=lambda s: s.used)
            self._finish(
                oldest,
                observer.clock.now(),
                Failure(Status.CANCELLED, "session_evicted", "the proxy had too many sessions open"),
            )
        return session

    def _late(self, key: tuple[str, str], transport: Transport) -> _Session | None:
        """A session for one exchange that names a session which already ended in its own run (a client's
        ``notifications/cancelled`` that comes after the DELETE): it writes one more part of that run (merged into
        its run file when the exchange ends) instead of opening a run of its own."""
        run_id = self._ended.get(key)
        if run_id is None:
            return None
        recorder = self._open(run_id, new_run=False)
        observer = self._observer(recorder, transport)
        session = _Session(observer, recorder, True, key=key, born_here=False, late=True)
        self._live.append(session)
        return session

    def _bind(self, session: _Session, key: tuple[str, str]) -> None:
        session.key = key
        self._bound[key] = session
        if self._unbound is session:
            self._unbound = None

    def _opening(self, initializes: bool) -> _Session:
        """The session a request that names none belongs to: the one being opened (a fresh one for a second
        ``initialize`` while the first is still unanswered: two clients starting at once)."""
        current = self._unbound
        if current is None or current.ended or (initializes and current.initializing):
            current = self._new(Transport.STREAMABLE_HTTP, None)
            self._unbound = current
        if initializes:
            current.initializing = True
        return current

    def _finish(self, session: _Session, at: Instant, failure: Failure) -> None:
        """End a session: what it still waits for gets ``failure``; its own run is finalized."""
        if session.ended:
            return
        session.ended = True
        with contextlib.suppress(ValueError):
            self._live.remove(session)
        if session.key is not None and self._bound.get(session.key) is session:
            del self._bound[session.key]
        if self._unbound is session:
            self._unbound = None
        session.observer.ended(at, failure)
        if session.own_recorder and session.key is not None and not session.late:
            self._ended[session.key] = session.recorder.run_id
            while len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
        if session.own_recorder:
            try:
                session.recorder.close()
            except Exception as exc:
                self.say(f"could not finish run {session.recorder.run_id} ({type(exc).__name__}: {exc})")

    def _stop(self, at: Instant) -> None:
        gone = Failure(Status.CANCELLED, "proxy_stopped", "the proxy stopped before the answer")
        for session in list(self._live):
            self._finish(session, at, gone)
        if self._shared is not None:
            self._shared.close()

    # -- one exchange ---------------------------------------------------------------------------------------------

    def _request(self, ex: HttpExchange) -> None:
        req = ex.request
        state = _State(None)
        ex.state = state
        if req.method == "POST":
            self._read_request(state, req.body)
        named = req.header(SESSION_HEADER)
        legacy = session_query(req.target)
        if named:
            key = ("http", named)
            session = (
                self._bound.get(key)
                or self._late(key, Transport.STREAMABLE_HTTP)
                or self._new(Transport.STREAMABLE_HTTP, key, born_here=False)
            )
        elif legacy:
            key = ("sse", legacy)
            session = (
                self._bound.get(key)
                or self._late(key, Transport.SSE)
                or self._new(Transport.SSE, key, born_here=False)
            )
        elif req.method == "GET":
            session = None  # a legacy SSE stream opens its session with its endpoint event
        else:
            items = state.message if isinstance(state.message, list) else [state.message]
            initializes = any(isinstance(m, Mapping) and m.get("method") == "initialize" for m in items)
            session = self._opening(initializes)
        state.session = session
        if session is not None:
            session.used = time.monotonic()
            if session.first_request is None:
                session.first_request = req.received

    def _read_request(self, state: _State, body: bytes) -> None:
        if not body.strip():
            return
        try:
            doc = self._decode(body)
        except ValueError as exc:
            state.body_error = f"not JSON ({exc}): {body[:80]!r}"
            return
        items = doc if isinstance(doc, list) else [doc]
        state.message = doc
        state.request_ids = [
            m["id"]
            for m in items
            if isinstance(m, Mapping) and isinstance(m.get("method"), str) and m.get("id") is not None
        ]

    def _feed_client(self, ex: HttpExchange, session: _Session, sent: Instant | None) -> None:
        """The request's messages, once it is known when they were handed to the server."""
        state = ex.state
        assert state is not None
        if state.fed:
            return
        state.fed = True
        req = ex.request
        seen = Seen(len(req.body), req.received, ex.body_done, sent)
        if state.body_error is not None:
            session.observer.unparsable(CLIENT, seen, "invalid_json", state.body_error)
        elif state.message is not None:  # a batch is split by the observer
            session.observer.message(CLIENT, state.message, seen)

    def _sent(self, ex: HttpExchange, at: Instant) -> None:
        """The request reached the server: its messages go to the observer now, before any answer (a ``tools/call``
        is journaled while in flight)."""
        state = ex.state
        assert state is not None
        if state.session is not None:
            self._feed_client(ex, state.session, at)

    def _opened(
        self,
        session: _Session,
        end: Instant,
        failure: Failure | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        if session.born_here and session.first_request is not None:
            session.observer.opened(session.first_request, end, failure=failure, attrs=attrs)

    def _head(self, ex: HttpExchange, head: ProxyResponse) -> None:
        state = ex.state
        assert state is not None
        state.head = head
        streamed = _is_stream(head)
        session = state.session
        if session is None:  # a GET without a session: a legacy SSE stream, or a server refusing it
            if head.status < 300 and streamed:
                state.legacy = True
            else:
                session = state.session = self._opening(False)
                session.first_request = session.first_request or ex.request.received
        if session is not None:
            new_id = head.header(SESSION_HEADER)
            if new_id and session.key is None:
                self._bind(session, ("http", new_id))
                session.initializing = False
            self._opened(session, head.started, attrs=self._ready_attrs(head, session))
            self._feed_client(ex, session, head.sent)
        if streamed:
            state.decoder = SSEDecoder(self.max_message)
        elif ex.request.method in ("POST", "DELETE") or head.status >= 400:
            state.body = bytearray()

    @staticmethod
    def _ready_attrs(head: ProxyResponse, session: _Session) -> dict[str, Any]:
        attrs: dict[str, Any] = {"until": "first_response", "http_status": head.status}
        if session.key is not None:
            attrs["session"] = _digest(session.key[1])
        return attrs

    def _chunk(self, ex: HttpExchange, data: bytes, at: Instant) -> None:
        state = ex.state
        assert state is not None
        if state.first_at is None:
            state.first_at = at
        state.last_at = at
        decoder = state.decoder
        if decoder is not None:
            if state.resync:  # after a gap: what is left of a cut event is dropped with it
                end = _event_end(bytearray(data))
                if end is None:
                    return
                data, state.resync, state.event_start = data[end:], False, None
                state.decoder = decoder = SSEDecoder(self.max_message)
            start = at if decoder.idle or state.event_start is None else state.event_start
            events = decoder.feed(data)
            for i, event in enumerate(events):
                self._event(ex, state, event.event, event.data, start if i == 0 else at, at)
            state.event_start = None if decoder.idle else (at if events else start)
        elif state.body is not None and not state.body_dropped:
            if len(state.body) + len(data) > self.max_message:
                state.body_dropped = True
                state.body = bytearray()
            else:
                state.body += data

    def _stream_chunks(self, ex: HttpExchange, chunks: list[tuple[bytes, Instant]], gap: bool) -> None:
        """A stream's chunks, in order; ``gap``: chunks before the first were dropped (counted, not read)."""
        state = ex.state
        assert state is not None
        try:
            if gap:
                state.resync = True
            for data, at in chunks:
                self._chunk(ex, data, at)
        finally:
            self._handled_bytes += sum(len(data) for data, _ in chunks)

    def _event(
        self, ex: HttpExchange, state: _State, name: str, data: str, first: Instant, last: Instant
    ) -> None:
        if name == "endpoint":
            if state.legacy and state.session is None:
                key = session_query(data)
                # the client may POST to the endpoint before this event is recorded (the stream is relayed to it
                # first): that POST already opened the session under its key; it is this stream's session
                session = (self._bound.get(("sse", key)) if key else None) or self._new(
                    Transport.SSE, ("sse", key) if key else None
                )
                session.born_here = True
                session.first_request = ex.request.received
                state.session = session
                assert state.head is not None
                self._opened(session, state.head.started, attrs=self._ready_attrs(state.head, session))
            return
        if not data.strip():  # a keep-alive or a resumption point
            return
        session = state.session or self._opening(False)
        state.session = session
        raw = data.encode()
        seen = Seen(len(raw), first, last, last)
        state.stream_messages += 1
        state.stream_bytes += len(raw)
        try:
            message = self._decode(raw)
        except ValueError as exc:
            session.observer.unparsable(SERVER, seen, "invalid_json", f"not JSON ({exc}): {raw[:80]!r}")
            return
        session.observer.message(SERVER, message, seen)

    def _end(self, ex: HttpExchange, outcome: Outcome) -> None:
        state = ex.state
        assert state is not None
        req = ex.request
        if state.decoder is not None:
            start = state.event_start or outcome.end
            for event in state.decoder.close():
                self._event(ex, state, event.event, event.data, start, state.last_at or outcome.end)
            if state.decoder.dropped:
                state.unreadable = f"{state.decoder.dropped} event(s) over the {self.max_message}-byte limit"
        session = state.session
        if session is None:
            session = state.session = self._opening(False)
            session.first_request = session.first_request or req.received
        failure = self._transport_failure(outcome)
        if state.head is None:
            self._opened(session, outcome.end, failure)
            self._feed_client(ex, session, outcome.sent)
        elif state.body is not None:
            self._read_body(state, session, outcome)
        if state.request_ids:
            why = failure or self._unanswered(state, outcome)
            if why is not None:
                session.observer.close_requests(CLIENT, state.request_ids, outcome.end, why)
        status = outcome.status
        bounds = ex.bounds
        skipped = bounds.skipped_frames if bounds is not None else 0
        if req.method == "GET" or req.method == "DELETE" or skipped:
            attrs: dict[str, Any] = {"http_method": req.method, "http_status": status}
            if req.method != "DELETE":
                attrs.update(stream_messages=state.stream_messages, stream_bytes=state.stream_bytes)
                if state.legacy:
                    attrs["legacy_sse"] = True
            if bounds is not None and skipped:  # a stream faster than the recording: what it skipped, counted
                attrs.update(stream_chunks_not_read=skipped, stream_bytes_not_read=bounds.skipped_bytes)
            end_failure = failure
            if req.method == "GET" and outcome.error in ("client_disconnected", "proxy_closed"):
                # a client closing its event stream (or the proxy stopping) is how a stream ends
                attrs["ended_by"] = "client" if outcome.error == "client_disconnected" else "proxy_stopped"
                end_failure = None
            if end_failure is None and status is not None and status >= 400:
                end_failure = Failure.of(http_error_type(status), f"HTTP {status}", http_status=status)
            session.observer.transport_event(req.received, outcome.end, failure=end_failure, attrs=attrs)
        if session.key is not None and status == 404 and not state.legacy:
            self._finish(session, outcome.end, Failure.of("session_expired", "the server no longer knows it"))
        elif req.method == "DELETE" and status is not None and status < 300:
            self._finish(
                session,
                outcome.end,
                Failure(Status.CANCELLED, "session_closed", "the client ended the session before the answer"),
            )
        elif state.legacy:
            self._finish(
                session,
                outcome.end,
                failure or Failure.of("stream_closed", "the event stream ended before the answer"),
            )
        elif session.late:
            self._finish(
                session, outcome.end, failure or Failure.of("session_expired", "the session had ended")
            )

    def _read_body(self, state: _State, session: _Session, outcome: Outcome) -> None:
        body = state.body
        assert body is not None and state.head is not None
        first = state.first_at or outcome.end
        last = state.last_at or outcome.end
        if state.body_dropped:
            size = outcome.bytes_to_client
            seen = Seen(size, first, last, last)
            session.observer.oversize(SERVER, seen, b"", self.max_message)
            state.unreadable = f"a {size}-byte body, over the {self.max_message}-byte limit"
            return
        if not body.strip() or state.head.status == 202:
            return
        kind = (state.head.header("content-type") or "").split(";")[0].strip().lower()
        try:
            doc = self._decode(bytes(body))
        except ValueError as exc:
            if state.request_ids or kind == "application/json":
                detail = f"not JSON ({exc}): {bytes(body[:80])!r}"
                session.observer.unparsable(
                    SERVER, Seen(len(body), first, last, last), "invalid_json", detail
                )
                state.unreadable = "the response body is not JSON"
            return
        items = doc if isinstance(doc, list) else [doc]
        answers = []
        for item in items:
            if (
                isinstance(item, Mapping)
                and item.get("id") is None
                and isinstance(item.get("error"), Mapping)
            ):
                state.null_error = item["error"]  # the server refused the request as a whole
            else:
                answers.append(item)
        if not answers:
            return
        message = answers if isinstance(doc, list) else answers[0]
        session.observer.message(SERVER, message, Seen(len(body), first, last, last))

    @staticmethod
    def _transport_failure(outcome: Outcome) -> Failure | None:
        """The failure of an exchange the proxy could not complete (the core's error names)."""
        error = outcome.error
        if error is None:
            return None
        if error == "client_disconnected":
            return Failure(Status.CANCELLED, "client_closed", outcome.message)
        if error == "proxy_closed":
            return Failure(Status.CANCELLED, "proxy_stopped", outcome.message)
        attrs = {"http_status": outcome.status} if outcome.status is not None else {}
        return Failure.of(error, outcome.message, **attrs)

    @staticmethod
    def _unanswered(state: _State, outcome: Outcome) -> Failure | None:
        """Why the requests of an exchange that completed got no answer in it (None: they may get one elsewhere)."""
        status = outcome.status or 0
        if status >= 400:
            if state.null_error is not None:
                found = error_failure(state.null_error)
                return Failure(
                    found.status, found.error_type, found.message, {**found.attrs, "http_status": status}
                )
            message = error_message(bytes(state.body or b""))
            return Failure.of(http_error_type(status), f"HTTP {status}: {message}", http_status=status)
        if status == 202 or state.head is None:
            return None  # accepted: the answer comes on the session's event stream
        if state.unreadable is not None:
            return Failure.of("invalid_response", state.unreadable, http_status=status)
        return Failure.of("no_response", "the response ended without answering", http_status=status)
