"""The HTTP MCP proxy's recording worker: from the hooks of each HTTP exchange to MCP messages of a session.

The loop's side (:mod:`.http_hooks`) queues typed hook records; one :class:`~promcp.bounded_worker.BoundedWorker`
(:class:`HttpSessions`) takes them in order and, for each exchange:

* finds its **session** (:mod:`.session_registry`);
* cuts the **JSON-RPC messages** out of the bodies — a POST body (one message or a batch), a JSON response body, each
  ``message`` event of an SSE stream (POST responses, GET streams, the legacy SSE stream) — and hands them to the
  session's :class:`~promcp.proxy.mcp.observer.McpObserver`: the same pairing, INIT, ``tools/list`` pages, S3/S4 and
  stage ``MCP`` events as over stdio. A message's wire bytes are its JSON text (the body, or the event's ``data``).
  A request's messages go to the observer once it was handed to the server (a ``tools/call`` is journaled while in
  flight);
* records what only HTTP has: INIT ``ready`` (the session's first request → the first response), a request that
  got no JSON-RPC answer (server unreachable, HTTP error, a body that is not JSON-RPC, a stream cut short) as the
  failure of that request, each ``GET`` stream and ``DELETE`` as a stage ``MCP`` event of the transport.

The worker's queue holds at most ``QUEUE_ITEMS`` records and ``QUEUE_BYTES`` bytes (request bodies and response
chunks; a message may be 64 MiB). The loop never waits for it: a record it refuses marks its exchange lost (relayed
whole, counted in :attr:`HttpSessions.lost` and logged). An event stream's chunks have a tighter bound of their own
(``BACKLOG_BYTES``: past it a stream's last chunks are kept and the rest counted), so a fast stream is recorded
bounded rather than lost. At stop the worker drains within ``STOP_TIMEOUT_S``, then ends every session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promcp.bounded_worker import BoundedWorker
from promcp.events import Status, Transport
from promcp.proxy._http import Outcome, ProxyRequest, ProxyResponse
from promcp.proxy.mcp.frames import json_decoder
from promcp.proxy.mcp.http_hooks import (
    Body,
    Ended,
    Forwarded,
    Head,
    Held,
    Hook,
    HttpExchange,
    Opened,
    StreamChunks,
)
from promcp.proxy.mcp.observer import CLIENT, SERVER, Seen, error_failure
from promcp.proxy.mcp.session_registry import Session, SessionRegistry, digest, problem
from promcp.proxy.mcp.sse_endpoint import SESSION_HEADER, event_end, is_event_stream, session_query
from promcp.stages import Failure, Instant
from promcp.wire import error_message, http_error_type
from promcp.wire.framing import SSEDecoder

__all__ = ["BACKLOG_BYTES", "ExchangeState", "HttpSessions"]

log = logging.getLogger(__name__)

#: stream bytes queued for the worker and not handled yet, past which a stream's chunks are no longer queued: its
#: last ones are kept and the rest counted (:class:`promcp.proxy._bounded.HeadTail`) until the worker catches up
BACKLOG_BYTES = 2 << 20
#: the worker's queue: hook records and bytes at most (past either, an exchange's recording is reported lost)
QUEUE_ITEMS = 100_000
QUEUE_BYTES = 256 * 1024 * 1024
#: how long stop() waits for the queue to drain before it reports the rest lost
STOP_TIMEOUT_S = 60.0


@dataclass
class ExchangeState:
    """What the worker keeps of one exchange."""

    session: Session | None
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
    """The worker: exchanges in, each session's messages out to its observer (see the module's docstring)."""

    def __init__(self, registry: SessionRegistry, *, max_message: int) -> None:
        """``registry``: the sessions, their runs and recorders (and the proxy's ``timeout_s``). Problems are
        logged (``promcp.proxy.mcp.*``)."""
        self.registry = registry
        timeout_s = registry.timeout_s
        self.max_message = max_message
        self.errors = 0
        #: exchanges relayed whole whose recording was lost (the worker's queue was full, or stop() gave up)
        self.lost = 0
        self._decode = json_decoder()
        self._queued_bytes = 0  # stream bytes the loop queued (written by the loop only)…
        self._handled_bytes = 0  # …and the worker handled (written by the worker only)
        self.peak_backlog = 0  # the most stream bytes queued and not handled at once
        self._stop_at: Instant | None = None
        tick = None if timeout_s is None else min(max(timeout_s / 4, 0.05), 1.0)
        self._worker: BoundedWorker[Hook | Held] = BoundedWorker(
            self._handle_item,
            name="promcp-mcp-http",
            max_items=QUEUE_ITEMS,
            max_bytes=QUEUE_BYTES,
            full="refuse",
            tick_s=tick,
            on_tick=self.registry.check_timeouts if tick is not None else None,
            on_stop=self._stopped,
        )

    @property
    def runs(self) -> list[str]:
        return self.registry.runs

    @property
    def sessions_seen(self) -> int:
        return self.registry.sessions_seen

    # -- the loop's side ------------------------------------------------------------------------------------------

    def observe(self, request: ProxyRequest, body_done: Instant) -> HttpExchange:
        return HttpExchange(
            self._put,
            request,
            body_done,
            room=self._room,
            queued=self._count_queued,
            max_message=self.max_message,
        )

    def _put(self, item: Hook | Held, size: int, force: bool) -> bool:
        return self._worker.put(item, size, force=force)

    def _room(self, size: int) -> bool:
        """Whether the worker's backlog of stream chunks has room for ``size`` more bytes."""
        return self._queued_bytes - self._handled_bytes + size <= BACKLOG_BYTES

    def _count_queued(self, size: int) -> None:
        self._queued_bytes += size
        self.peak_backlog = max(self.peak_backlog, self._queued_bytes - self._handled_bytes)

    def stop(self, at: Instant) -> None:
        """End every session (after what is queued, within ``STOP_TIMEOUT_S``) and stop the worker."""
        self._stop_at = at
        left = self._worker.close(timeout=STOP_TIMEOUT_S)
        if left:
            self.lost += len(left)
            problem(
                f"{len(left)} exchange record(s) not recorded: the recording fell {STOP_TIMEOUT_S:g} s behind; "
                "what the sessions journaled is kept (run `promcp finalize`)"
            )

    # -- the worker -----------------------------------------------------------------------------------------------

    def _stopped(self) -> None:
        at = self._stop_at
        assert at is not None
        self.registry.stop(at)

    def _handle_item(self, item: Hook | Held) -> None:
        for hook in item.hooks if isinstance(item, Held) else (item,):
            try:
                self._handle(hook)
            except Exception as exc:  # never lose the worker: say it once, go on with the next hook
                self.errors += 1
                log.debug("recording error", exc_info=True)
                if self.errors == 1:
                    problem(f"recording error ({type(exc).__name__}: {exc}); traffic is still relayed")

    def _handle(self, hook: Hook) -> None:
        ex = hook.exchange
        match hook:
            case Opened():
                self._request(ex)
            case Forwarded(at=at):
                self._sent(ex, at)
            case StreamChunks(chunks=chunks, gap=gap):
                self._stream_chunks(ex, chunks, gap)
            case Head(head=head):
                self._head(ex, head)
            case Body(data=data, at=at):
                self._chunk(ex, data, at)
            case Ended(outcome=outcome, lost=True):
                self._lost(ex, outcome)
            case Ended(outcome=outcome):
                self._end(ex, outcome)

    def _lost(self, ex: HttpExchange, outcome: Outcome) -> None:
        """An exchange whose hooks the full queue refused: relayed whole, its recording reported lost."""
        self.lost += 1
        req = ex.request
        problem(f"{req.method} {req.path} relayed but not recorded: the recording queue was full")
        state = ex.state
        if state is not None and state.session is not None and state.request_ids:
            failure = Failure.of("no_response", "not recorded: the proxy's recording queue was full")
            state.session.observer.close_requests(CLIENT, state.request_ids, outcome.end, failure)

    # -- one exchange ---------------------------------------------------------------------------------------------

    def _request(self, ex: HttpExchange) -> None:
        req = ex.request
        state = ExchangeState(None)
        ex.state = state
        if req.method == "POST":
            self._read_request(state, req.body)
        named = req.header(SESSION_HEADER)
        legacy = session_query(req.target)
        session: Session | None
        if named:
            session = self.registry.find(("http", named), Transport.STREAMABLE_HTTP)
        elif legacy:
            session = self.registry.find(("sse", legacy), Transport.SSE)
        elif req.method == "GET":
            session = None  # a legacy SSE stream opens its session with its endpoint event
        else:
            items = state.message if isinstance(state.message, list) else [state.message]
            initializes = any(isinstance(m, Mapping) and m.get("method") == "initialize" for m in items)
            session = self.registry.opening(initializes)
        state.session = session
        if session is not None:
            session.used = time.monotonic()
            if session.first_request is None:
                session.first_request = req.received

    def _read_request(self, state: ExchangeState, body: bytes) -> None:
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

    def _feed_client(self, ex: HttpExchange, session: Session, sent: Instant | None) -> None:
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
        session: Session,
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
        streamed = is_event_stream(head)
        session = state.session
        if session is None:  # a GET without a session: a legacy SSE stream, or a server refusing it
            if head.status < 300 and streamed:
                state.legacy = True
            else:
                session = state.session = self.registry.opening(False)
                session.first_request = session.first_request or ex.request.received
        if session is not None:
            new_id = head.header(SESSION_HEADER)
            if new_id and session.key is None:
                self.registry.bind(session, ("http", new_id))
                session.initializing = False
            self._opened(session, head.started, attrs=self._ready_attrs(head, session))
            self._feed_client(ex, session, head.sent)
        if streamed:
            state.decoder = SSEDecoder(self.max_message)
        elif ex.request.method in ("POST", "DELETE") or head.status >= 400:
            state.body = bytearray()

    @staticmethod
    def _ready_attrs(head: ProxyResponse, session: Session) -> dict[str, Any]:
        attrs: dict[str, Any] = {"until": "first_response", "http_status": head.status}
        if session.key is not None:
            attrs["session"] = digest(session.key[1])
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
                end = event_end(bytearray(data))
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
        self, ex: HttpExchange, state: ExchangeState, name: str, data: str, first: Instant, last: Instant
    ) -> None:
        if name == "endpoint":
            if state.legacy and state.session is None:
                key = session_query(data)
                # the client may POST to the endpoint before this event is recorded (the stream is relayed to it
                # first): that POST already opened the session under its key; it is this stream's session
                session = (self.registry.bound.get(("sse", key)) if key else None) or self.registry.new(
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
        session = state.session or self.registry.opening(False)
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
            session = state.session = self.registry.opening(False)
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
            self.registry.finish(
                session, outcome.end, Failure.of("session_expired", "the server no longer knows it")
            )
        elif req.method == "DELETE" and status is not None and status < 300:
            self.registry.finish(
                session,
                outcome.end,
                Failure(Status.CANCELLED, "session_closed", "the client ended the session before the answer"),
            )
        elif state.legacy:
            self.registry.finish(
                session,
                outcome.end,
                failure or Failure.of("stream_closed", "the event stream ended before the answer"),
            )
        elif session.late:
            self.registry.finish(
                session, outcome.end, failure or Failure.of("session_expired", "the session had ended")
            )

    def _read_body(self, state: ExchangeState, session: Session, outcome: Outcome) -> None:
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
    def _unanswered(state: ExchangeState, outcome: Outcome) -> Failure | None:
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
