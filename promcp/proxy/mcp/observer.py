"""What the MCP proxy records: every JSON-RPC message it relays, read in passing and turned into events by the
stage builders (:mod:`promcp.stages`) — the same rules, the same tool rendering and the same tokenizers as
``promcp run`` and ``promcp.instrument()``.

A transport (:mod:`.stdio`, :mod:`.http`) forwards bytes first and then hands each complete message to
:meth:`McpObserver.message` with a :class:`Seen`: its size on the wire and three instants (first byte arrived, last
byte arrived, last byte handed on — for an HTTP request: handed to the server in full, or None when it never was). The observer pairs requests with responses by JSON-RPC id, in both directions,
and records:

=================================  ===========================================================================
message                            event
=================================  ===========================================================================
``initialize`` / ``server/discover``  INIT ``initialize``: request arrival → response arrival; protocol version,
                                   server info, capabilities; wire bytes of both
``tools/list`` (each page)         INIT ``tools_discovery``: the page's tools rendered as a host puts them in a
                                   prompt (:func:`promcp.wire.mcp.tool_text_of`), per-tool tokens and bytes,
                                   the page's wire bytes, cursors; ``attrs.trigger = "list_changed"`` for a
                                   re-listing after ``notifications/tools/list_changed``
``tools/call``                     S3 (request arrival → forwarded to the server) and S4 (→ response arrival),
                                   wire bytes, the forwarded result's tokens; JSON-RPC errors, ``isError``, a
                                   crash before the answer, a timeout or a cancellation as its status. S3 is
                                   queued as soon as the request was forwarded and S4 when the call ends, so a
                                   proxy killed mid-call leaves the call in flight (an S3 without S4)
anything else                      stage ``MCP`` (:func:`promcp.stages.message_event`): requests in either
                                   direction with latency and sizes, notifications with their size, lines that
                                   are not JSON-RPC, answers nobody asked for
=================================  ===========================================================================

Token counts run on the recorder's worker thread (``emit_later``); the tokenizer is loaded there on first use.
Nothing here blocks, raises into the transport or changes a byte: a message the observer cannot use is recorded
as such and relayed as it was.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.events import Direction, Event, Phase, Status, Transport
from promcp.recorder import Recorder
from promcp.stages import (
    SYSTEM_CLOCK,
    Clock,
    Failure,
    Instant,
    PutText,
    ToolsCall,
    initialize_event,
    message_event,
    startup_event,
    tool_request_event,
    tool_result_event,
    tools_discovery_event,
)
from promcp.tokenizers import CachedTokenizer
from promcp.wire import arguments_digest, compact_json, mcp

__all__ = ["CLIENT", "SERVER", "Deferred", "McpObserver", "Seen", "error_failure"]

CLIENT = "client"
SERVER = "server"
#: requests whose params are previewed only up to this size (the recorder truncates previews anyway)
_PREVIEW_LIMIT = 64 * 1024
#: answers for requests the proxy already closed (cancelled, timed out) are recognised among this many ids
_CLOSED_IDS = 1024
#: answers that arrive before their request was registered (the other relay thread was slower) wait here
_EARLY_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class Seen:
    """One message as the proxy saw it: its bytes on the wire and when they passed."""

    size: int
    first: Instant  # its first byte arrived
    last: Instant  # its last byte arrived
    forwarded: Instant | None  # its last byte was handed on to the other side (None: it never was)


def _handed_on(request: Seen, answer: Seen | None) -> Instant | None:
    """When the request counts as handed to the other side: the instant its last byte's write returned, unless the
    answer had already begun to arrive by then (the relay thread was descheduled after the write, or the answer raced
    ahead of the clock call) — then the instant that write began, which the answer cannot precede."""
    forwarded = request.forwarded
    if forwarded is None or answer is None or forwarded.ms_to(answer.first) >= 0:
        return forwarded
    return request.last


@dataclass(slots=True)
class _Request:
    origin: str  # who asked: CLIENT or SERVER
    method: str
    params: Any
    jsonrpc_id: str
    seen: Seen
    trigger: str | None = None  # tools/list after notifications/tools/list_changed
    attrs: dict[str, Any] = field(default_factory=dict)
    #: a ``tools/call``'s S3, queued when the request was forwarded (before its answer: a proxy killed mid-call
    #: still leaves the call in flight in the trace)
    s3: Deferred | None = None


def _id_key(value: Any) -> str:
    return compact_json(value)


def _id_text(value: Any) -> str:
    return value if isinstance(value, str) else compact_json(value)


def error_failure(error: Any) -> Failure:
    """The Failure of a JSON-RPC ``error`` object a peer sent: always ``mcp_error`` (``attrs.jsonrpc_code``). The
    mcp SDK's codes for a timeout (-32001) and a closed connection (-32000) mean that only when the SDK raises them
    itself (:func:`promcp.wire.mcp.jsonrpc_failure`); on the wire they are the server's own — -32000 is the first
    of JSON-RPC's implementation-defined server errors (the TypeScript SDK answers "Server not initialized" with
    it)."""
    code = error.get("code") if isinstance(error, Mapping) else None
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    status, error_type = Status.ERROR, "mcp_error"
    message = error.get("message") if isinstance(error, Mapping) else None
    return Failure(status, error_type, str(message) if message is not None else None, {"jsonrpc_code": code})


@dataclass
class Deferred:
    """Token counting the observer leaves for later: a ``tools/list`` page or one side of a ``tools/call``, as
    plain measured values."""

    kind: str  # "tools_list", "s3" or "s4"
    fields: dict[str, Any]
    tokenizer_name: str
    tokenizer: Callable[[], CachedTokenizer] | None = None
    put_text: PutText | None = None

    def __call__(self) -> Event | None:
        if self.tokenizer is not None:
            tok = self.tokenizer()
        else:
            from promcp import tokenizers

            tok = tokenizers.get(self.tokenizer_name)
        if self.kind == "tools_list":
            return tools_discovery_event(tokenizer=tok, put_text=self.put_text, **self.fields)
        call = ToolsCall(tokenizer=tok, put_text=self.put_text, **self.fields)
        if self.kind == "s3":
            return tool_request_event(call)
        # the key that joins this call to the model's tool call an LLM proxy saw (promcp/stages/link.py)
        args = call.arguments if call.arguments_text is None else call.arguments_text
        call.attrs = {**call.attrs, "args_digest": arguments_digest(args)}
        return tool_result_event(call)


class McpObserver:
    """Records one MCP session's traffic as a recording proxy sees it (thread-safe: each direction's relay
    thread calls in)."""

    def __init__(
        self,
        recorder: Recorder,
        *,
        server: str | None,
        transport: Transport,
        tokenizer: str | Callable[[], CachedTokenizer] = DEFAULT_TOKENIZER,
        clock: Clock = SYSTEM_CLOCK,
        timeout_s: float | None = None,
        max_pending: int = 10_000,
        relay_ms: bool = True,
    ) -> None:
        self.recorder = recorder
        #: whether answers carry ``attrs.relay_ms`` (the stdio relay measures it; over HTTP the core hands a
        #: chunk to the client before the observer hears of it, so there is no separate arrival instant)
        self.relay_ms = relay_ms
        self.server = server
        self.transport = transport
        self.clock = clock
        self.timeout_s = timeout_s
        self.max_pending = max_pending
        self.protocol_version: str | None = None
        self._tokenizer_spec = tokenizer
        self._tokenizer: CachedTokenizer | None = None
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], _Request] = {}
        self._early: OrderedDict[tuple[str, str], tuple[Mapping[str, Any], Seen]] = OrderedDict()
        self._closed: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._list_changed = False
        self._listed = False
        self._ready_recorded = False
        self._spawn_end: Instant | None = None
        self.messages = 0
        self.unparsed = 0
        self.record_errors = 0
        #: told (once) when recording fails; the traffic is relayed regardless
        self.on_error: Callable[[str], None] | None = None

    # -- tokenizer (loaded on the worker thread, on first use) ----------------------------------------------

    def tokenizer(self) -> CachedTokenizer:
        if self._tokenizer is None:
            spec = self._tokenizer_spec
            if callable(spec):
                self._tokenizer = spec()
            else:
                from promcp import tokenizers

                # an unknown name: count with the default, say so (the column names it)
                self._tokenizer = tokenizers.get_or_default(spec, self.on_error)
        return self._tokenizer

    # -- start-up ---------------------------------------------------------------------------------------------

    def spawned(
        self,
        start: Instant,
        end: Instant,
        *,
        failure: Failure | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """INIT ``spawn``: the server process was created (or could not be)."""
        self._spawn_end = end if failure is None else None
        self._emit(
            startup_event(
                phase=Phase.SPAWN,
                server=self.server,
                transport=self.transport,
                start=start,
                end=end,
                failure=failure,
                attrs=attrs,
            )
        )

    def first_output(self, at: Instant) -> None:
        """INIT ``ready``: the spawned server wrote its first byte (the answer to ``initialize``, usually)."""
        self._ready(None, at, None, {"until": "first_output"})

    def not_ready(self, at: Instant, failure: Failure, attrs: Mapping[str, Any] | None = None) -> None:
        """INIT ``ready`` failed: the spawned server ended without writing a byte."""
        self._ready(None, at, failure, attrs)

    def opened(
        self,
        start: Instant,
        end: Instant,
        *,
        failure: Failure | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """INIT ``ready`` of a server the proxy did not start (HTTP): the session's first request arrived →
        the first response began (or the transport failed). Recorded once."""
        self._ready(start, end, failure, attrs)

    def _ready(
        self, start: Instant | None, end: Instant, failure: Failure | None, attrs: Mapping[str, Any] | None
    ) -> None:
        """The one INIT ``ready`` event of a session, from ``start`` (None: the end of the server's spawn)."""
        with self._lock:
            start = self._spawn_end if start is None else start
            if self._ready_recorded or start is None:
                return
            self._ready_recorded = True
        self._emit(
            startup_event(
                phase=Phase.READY,
                server=self.server,
                transport=self.transport,
                start=start,
                end=end,
                failure=failure,
                attrs=attrs,
            )
        )

    # -- messages ---------------------------------------------------------------------------------------------

    def message(self, origin: str, message: Any, seen: Seen) -> None:
        """One decoded JSON value that ``origin`` (CLIENT / SERVER) sent, already relayed."""
        if isinstance(message, list) and message:  # a JSON-RPC batch (protocol 2025-03-26)
            for item in message:
                size = mcp.message_bytes(item, self.transport) or 0
                self._one(origin, item, Seen(size, seen.first, seen.last, seen.forwarded), batch=len(message))
            return
        self._one(origin, message, seen, batch=None)

    def unparsable(self, origin: str, seen: Seen, error_type: str, detail: str) -> None:
        """A frame that is not a JSON-RPC message (not JSON, too large to read, a stray value)."""
        self.unparsed += 1
        self._message(
            origin,
            method=None,
            start=seen.first,
            request_bytes=seen.size,
            failure=Failure(Status.ERROR, error_type, detail),
        )

    def oversize(self, origin: str, seen: Seen, edges: bytes, limit: int) -> None:
        """A message too large to read (over ``--max-frame``): relayed whole, counted, not parsed. When its first
        or last bytes name the id of a request waiting for an answer, that request ends here (``attrs.unread``);
        otherwise it is recorded as an unreadable frame."""
        import re

        found = re.search(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)', edges)
        asker = SERVER if origin == CLIENT else CLIENT
        req = None
        if found is not None:
            with self._lock:
                req = self._pending.pop((asker, found.group(1).decode()), None)
        if req is None:
            detail = f"a {seen.size}-byte message, over the {limit}-byte limit"
            self.unparsable(origin, seen, "frame_too_large", detail)
            return
        self.messages += 1
        req.attrs["unread"] = "frame_too_large"
        self._finish(req, None, seen, seen.last, None)

    def _one(self, origin: str, msg: Any, seen: Seen, *, batch: int | None) -> None:
        self.messages += 1
        if not isinstance(msg, Mapping):
            self.unparsable(
                origin, seen, "not_jsonrpc", f"a JSON {type(msg).__name__}, not a JSON-RPC object"
            )
            return
        method = msg.get("method")
        has_id = "id" in msg and msg["id"] is not None
        if isinstance(method, str):
            if has_id:
                self._request(origin, method, msg, seen, batch)
            else:
                self._notification(origin, method, msg, seen, batch)
        elif has_id and ("result" in msg or "error" in msg):
            self._response(origin, msg, seen)
        else:
            self.unparsable(
                origin,
                seen,
                "not_jsonrpc",
                "a JSON object that is no JSON-RPC request, notification or response",
            )

    def _request(
        self, origin: str, method: str, msg: Mapping[str, Any], seen: Seen, batch: int | None
    ) -> None:
        req = _Request(origin, method, msg.get("params"), _id_text(msg["id"]), seen)
        if batch:
            req.attrs["batch"] = batch
        key = (origin, _id_key(msg["id"]))
        with self._lock:
            if method == "tools/list" and origin == CLIENT and self._list_changed:
                req.trigger, self._list_changed = "list_changed", False
            elif method == "tools/list" and origin == CLIENT and req.params is None:
                self._list_changed = (
                    False  # a fresh first page: a later re-listing is what list_changed triggers
                )
            early = self._early.pop(key, None)
            if early is None:
                if len(self._pending) >= self.max_pending:  # a peer that never answers: forget the oldest
                    self._pending.pop(next(iter(self._pending)))
                self._pending[key] = req
        if early is not None:
            self._complete(req, *early)
        elif origin == CLIENT and method == "tools/call" and seen.forwarded is not None:
            # the call's request event now, not when its answer comes: journaled while the call is in flight
            req.s3 = self._deferred("s3", self._call_fields(req, None, None, seen.last, None))
            self._emit_later(req.s3)

    def _response(self, origin: str, msg: Mapping[str, Any], seen: Seen) -> None:
        asker = SERVER if origin == CLIENT else CLIENT
        key = (asker, _id_key(msg["id"]))
        with self._lock:
            req = self._pending.pop(key, None)
            late = self._closed.get(key) if req is None else None
            stale: list[tuple[Mapping[str, Any], Seen]] = []
            if req is None and late is None:  # its request may still be on the other relay thread's way
                self._early[key] = (msg, seen)
                while len(self._early) > _EARLY_LIMIT:
                    stale.append(self._early.popitem(last=False)[1])
        for old_msg, old_seen in stale:
            self._unanswered(origin, old_msg, old_seen)
        if req is None and late is None:
            return
        if req is not None:
            self._complete(req, msg, seen)
        else:
            self._message(
                origin,
                method=late,
                start=seen.first,
                jsonrpc_id=_id_text(msg["id"]),
                request_bytes=seen.size,
                attrs={"late_response": True},
            )

    def _unanswered(self, origin: str, msg: Mapping[str, Any], seen: Seen) -> None:
        self._message(
            origin,
            method=None,
            start=seen.first,
            jsonrpc_id=_id_text(msg.get("id")),
            request_bytes=seen.size,
            failure=Failure(Status.ERROR, "unmatched_response", "a response to no request the proxy saw"),
        )

    def _notification(
        self, origin: str, method: str, msg: Mapping[str, Any], seen: Seen, batch: int | None
    ) -> None:
        params = msg.get("params")
        if method == "notifications/tools/list_changed" and origin == SERVER:
            with self._lock:  # only a change after a listing makes the next listing a re-listing
                self._list_changed = self._listed
        elif method == "notifications/cancelled" and isinstance(params, Mapping) and "requestId" in params:
            reason = str(params.get("reason") or "")
            timed_out = "timed out" in reason.lower() or "timeout" in reason.lower()
            failure = Failure(
                Status.TIMEOUT if timed_out else Status.CANCELLED,
                "timeout" if timed_out else "cancelled",
                reason or None,
                {"cancelled_by": origin},
            )
            self._close_request((origin, _id_key(params["requestId"])), seen.first, failure)
        self._message(
            origin,
            method=method,
            start=seen.first,
            request_bytes=seen.size,
            preview=self._preview(params, seen),
            attrs={"batch": batch} if batch else None,
        )

    # -- ending requests --------------------------------------------------------------------------------------

    def _close_request(self, key: tuple[str, str], at: Instant, failure: Failure) -> None:
        with self._lock:
            req = self._pending.pop(key, None)
            if req is None:
                return
            self._closed[key] = req.method
            while len(self._closed) > _CLOSED_IDS:
                self._closed.popitem(last=False)
        self._finish(req, None, None, at, failure)

    def close_requests(self, origin: str, ids: Any, at: Instant, failure: Failure) -> int:
        """End the requests ``origin`` sent with JSON-RPC ``ids`` that are still waiting for an answer (an HTTP
        exchange that ended without one: the server unreachable, an HTTP error, a body that is not JSON-RPC).
        Returns how many were open."""
        closed = 0
        for jsonrpc_id in ids:
            key = (origin, _id_key(jsonrpc_id))
            with self._lock:
                open_ = key in self._pending
            if open_:
                self._close_request(key, at, failure)
                closed += 1
        return closed

    def transport_event(
        self,
        start: Instant,
        end: Instant | None,
        *,
        failure: Failure | None = None,
        attrs: Mapping[str, Any] | None = None,
        origin: str = CLIENT,
        size: int | None = None,
    ) -> None:
        """Stage ``MCP`` for something of the transport that is no JSON-RPC message (an HTTP ``GET`` stream,
        a ``DELETE`` that ends the session): ``attrs`` say what (``http_method``, ``http_status``…)."""
        self._message(
            origin,
            method=None,
            start=start,
            end=end,
            request_bytes=size,
            response_bytes=size,
            failure=failure,
            attrs=attrs,
        )

    def check_timeouts(self, now: Instant | None = None) -> int:
        """Close requests pending longer than ``timeout_s`` as timed out (the traffic is not touched: a late
        answer is still relayed, and recorded as ``late_response``). Returns how many were closed."""
        if self.timeout_s is None:
            return 0
        now = now or self.clock.now()
        limit = self.timeout_s * 1000
        with self._lock:
            expired = [k for k, r in self._pending.items() if r.seen.first.ms_to(now) >= limit]
        for key in expired:
            failure = Failure(
                Status.TIMEOUT,
                "timeout",
                f"no answer within {self.timeout_s:g} s",
                {"timeout_s": self.timeout_s},
            )
            self._close_request(key, now, failure)
        return len(expired)

    def ended(self, at: Instant, failure: Failure) -> int:
        """The session is over (server exited, connection closed): every request still waiting gets ``failure``.
        Answers that arrived for no request are recorded as unmatched. Returns how many requests were open."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            early = list(self._early.values())
            self._early.clear()
        for req in pending:
            self._finish(req, None, None, at, failure)
        for msg, seen in early:
            self._unanswered(SERVER, msg, seen)
        return len(pending)

    def note(self, at: Instant, failure: Failure, attrs: Mapping[str, Any] | None = None) -> None:
        """A session-level problem that is no message (e.g. the server exited with an error status)."""
        self._message(
            SERVER,
            method=None,
            start=at,
            failure=failure,
            attrs=attrs,
        )

    # -- events -----------------------------------------------------------------------------------------------

    def _complete(self, req: _Request, msg: Mapping[str, Any], seen: Seen) -> None:
        error = msg.get("error")
        failure = error_failure(error) if error is not None else None
        self._finish(req, msg.get("result") if error is None else None, seen, seen.last, failure)

    def _finish(
        self, req: _Request, result: Any, answer: Seen | None, end: Instant, failure: Failure | None
    ) -> None:
        method = req.method
        if req.origin == CLIENT and method in ("initialize", "server/discover"):
            self._initialize(req, result, answer, end, failure)
        elif req.origin == CLIENT and method == "tools/list":
            self._tools_list(req, result, answer, end, failure)
        elif req.origin == CLIENT and method == "tools/call":
            self._tools_call(req, result, answer, end, failure)
        else:
            self._message(
                req.origin,
                method=method,
                start=req.seen.first,
                end=end,
                jsonrpc_id=req.jsonrpc_id,
                request_bytes=req.seen.size,
                response_bytes=answer.size if answer is not None else None,
                failure=failure,
                preview=self._preview(req.params, req.seen),
                attrs=req.attrs or None,
            )

    def _initialize(
        self, req: _Request, result: Any, answer: Seen | None, end: Instant, failure: Failure | None
    ) -> None:
        params = req.params if isinstance(req.params, Mapping) else None
        shake = mcp.handshake(result, params) if result is not None else None
        if shake is not None and shake.protocol_version:
            self.protocol_version = shake.protocol_version
        asked = params.get("protocolVersion") if params else None
        self._emit(
            initialize_event(
                server=self.server,
                transport=self.transport,
                start=req.seen.first,
                end=end,
                handshake=shake,
                method=req.method,
                jsonrpc_id=req.jsonrpc_id,
                request_bytes=req.seen.size,
                response_bytes=answer.size if answer is not None else None,
                protocol_version=str(asked) if asked is not None else None,
                failure=failure,
                attrs=self._client_info(params),
            )
        )

    @staticmethod
    def _client_info(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
        info = params.get("clientInfo") if params else None
        if not isinstance(info, Mapping):
            return None
        return {
            k: str(v)
            for k, v in (("client_name", info.get("name")), ("client_version", info.get("version")))
            if v
        }

    def _tools_list(
        self, req: _Request, result: Any, answer: Seen | None, end: Instant, failure: Failure | None
    ) -> None:
        params = req.params if isinstance(req.params, Mapping) else {}
        cursor = params.get("cursor")
        with self._lock:
            self._listed = True
        tools = [mcp.tool_text_of(t) for t in mcp.tools_of(result)] if result is not None else []
        next_cursor = mcp.next_cursor(result) if isinstance(result, Mapping) else None
        attrs = dict(req.attrs)
        if req.trigger:
            attrs["trigger"] = req.trigger
        attrs["request_bytes"] = req.seen.size
        fields = {
            "server": self.server,
            "transport": self.transport,
            "start": req.seen.first,
            "end": end,
            "tools": tools,
            "jsonrpc_id": req.jsonrpc_id,
            "protocol_version": self.protocol_version,
            "response_bytes": answer.size if answer is not None else None,
            "cursor": str(cursor) if cursor is not None else None,
            "next_cursor": next_cursor,
            "failure": failure,
            "attrs": attrs,
        }
        self._emit_later(self._deferred("tools_list", fields))

    def _tools_call(
        self, req: _Request, result: Any, answer: Seen | None, end: Instant, failure: Failure | None
    ) -> None:
        measured = self._call_fields(req, result, answer, end, failure)
        if answer is not None and answer.forwarded is not None and self.relay_ms:
            # how long the proxy held the answer's last byte before handing it on
            measured["attrs"]["relay_ms"] = round(answer.last.ms_to(answer.forwarded), 4)
        if req.s3 is None:
            self._emit_later(self._deferred("s3", measured))
        else:  # queued at forward; an answer that raced ahead of the forward's clock moves its end (if not built)
            req.s3.fields["sent"] = measured["sent"]
        self._emit_later(self._deferred("s4", measured))

    def _call_fields(
        self, req: _Request, result: Any, answer: Seen | None, end: Instant, failure: Failure | None
    ) -> dict[str, Any]:
        """What the proxy measured of one ``tools/call`` (``answer`` None: none yet, or none came)."""
        params = req.params if isinstance(req.params, Mapping) else {}
        arguments = params.get("arguments")
        measured: dict[str, Any] = {
            "tool": str(params.get("name")),
            "start": req.seen.first,
            "end": end,
            "sent": _handed_on(req.seen, answer),
            "received": answer.last if answer is not None else None,
            "server": self.server,
            "transport": self.transport,
            "jsonrpc_id": req.jsonrpc_id,
            "protocol_version": self.protocol_version,
            "request_bytes": req.seen.size,
            "result": result,
            "response_bytes": answer.size if answer is not None else None,
            "failure": failure,
            "attrs": dict(req.attrs),
        }
        if isinstance(arguments, Mapping) or arguments is None:
            measured["arguments"] = arguments
        else:  # not an object: counted as the JSON it is
            measured["arguments_text"] = compact_json(arguments)
        return measured

    # -- plumbing ---------------------------------------------------------------------------------------------

    def _deferred(self, kind: str, fields: dict[str, Any]) -> Deferred:
        name = self._tokenizer_spec if isinstance(self._tokenizer_spec, str) else DEFAULT_TOKENIZER
        return Deferred(kind, fields, name, self.tokenizer, self.recorder.put_text)

    def _direction(self, origin: str) -> Direction:
        return Direction.CLIENT_TO_SERVER if origin == CLIENT else Direction.SERVER_TO_CLIENT

    @staticmethod
    def _preview(params: Any, seen: Seen) -> str | None:
        if params is None or seen.size > _PREVIEW_LIMIT:
            return None
        return compact_json(params)

    def _message(self, origin: str, **facts: Any) -> None:
        """Stage ``MCP``: one message, or a request with its outcome, that ``origin`` sent (every such event of the
        session goes through here: its server, transport and protocol version are the observer's)."""
        self._emit(
            message_event(
                server=self.server,
                transport=self.transport,
                direction=self._direction(origin),
                protocol_version=self.protocol_version,
                **facts,
            )
        )

    def _emit(self, event: Event) -> None:
        try:
            self.recorder.emit(event)
        except Exception as exc:  # a full disk must never stop the relay: count it, say it once
            self._failed(exc)

    def _emit_later(self, build: Callable[[], Event | None]) -> None:
        try:
            self.recorder.emit_later(build)
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self.record_errors += 1
        if self.record_errors == 1 and self.on_error is not None:
            self.on_error(f"recording stopped: {exc}")
