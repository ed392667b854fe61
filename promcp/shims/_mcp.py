"""Hooks on the mcp SDK 2.x client side: INIT (spawn, ready, initialize/discover, tools/list) and S3/S4 (tools/call).

Hook targets (all checked by :func:`missing_targets`; mcp >=2.3,<2.4):

* transport factories ``mcp.client.stdio.stdio_client``, ``mcp.client.streamable_http.streamable_http_client``,
  ``mcp.client.sse.sse_client`` — and every module that imported a copy of them (``mcp``, ``mcp.client``,
  ``mcp.client.client``…) — to learn the transport of a stream pair and when it opened;
* ``mcp.client.stdio._create_platform_compatible_process`` (spawn) and ``mcp.client.stdio._parse_line``
  (first byte from the server);
* ``mcp.client.session.ClientSession.__init__`` — tags the session's ``JSONRPCDispatcher`` (server-side dispatchers
  stay untouched, so their hooks cost one attribute lookup);
* ``JSONRPCDispatcher.send_raw_request`` (runs in the caller's task: method, params, outcome, errors, scope),
  ``._write`` (the request as sent: id, bytes, the SDK's ``MCP send …`` span) and ``._dispatch`` (the response as
  received, while that span is still open).

Inline work is limited to clocks, byte counts and span attributes; tokens are counted by the recorder's worker
thread (``Recorder.emit_later``). Every hook body runs under :func:`promcp.shims._patch.guard`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from mcp_types import JSONRPCError, JSONRPCResponse

from promcp.events import Event, Phase, Stage, Status, TimingQuality, Transport
from promcp.recorder import Recorder, Scope, current_recorder, current_scope, scope
from promcp.shims import _footprint
from promcp.shims import _spans as _otel
from promcp.shims._patch import Patches, guard
from promcp.tokenizers import CachedTokenizer

#: (module, attribute) pairs the shims patch; the canary test asserts each exists in the installed mcp.
TARGETS: tuple[tuple[str, str], ...] = (
    ("mcp.client.stdio", "stdio_client"),
    ("mcp.client.stdio", "_create_platform_compatible_process"),
    ("mcp.client.stdio", "_parse_line"),
    ("mcp.client.streamable_http", "streamable_http_client"),
    ("mcp.client.sse", "sse_client"),
    ("mcp.client.session", "ClientSession.__init__"),
    ("mcp.shared.jsonrpc_dispatcher", "JSONRPCDispatcher.send_raw_request"),
    ("mcp.shared.jsonrpc_dispatcher", "JSONRPCDispatcher._write"),
    ("mcp.shared.jsonrpc_dispatcher", "JSONRPCDispatcher._dispatch"),
)
_FACTORIES = {
    "stdio_client": Transport.STDIO,
    "streamable_http_client": Transport.STREAMABLE_HTTP,
    "sse_client": Transport.SSE,
}
_TRACKED = frozenset({"initialize", "server/discover", "tools/list", "tools/call"})
_META_PROTOCOL = "io.modelcontextprotocol/protocolVersion"
_META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
_SCOPE_FIELDS = tuple(f.name for f in fields(Scope))
_RESPONSE_TYPES = (JSONRPCResponse, JSONRPCError)


def missing_targets() -> list[str]:
    """Hook targets absent from the installed mcp (empty when every hook can be installed)."""
    import importlib

    missing: list[str] = []
    for module_name, attr in TARGETS:
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{attr}")
    return missing


@dataclass
class Clock:
    wall_ns: int
    mono_ns: int

    @classmethod
    def now(cls) -> Clock:
        return cls(time.time_ns(), time.perf_counter_ns())

    def ms_to(self, end: Clock) -> float:
        return (end.mono_ns - self.mono_ns) / 1e6


@dataclass
class SessionInfo:
    """One client connection: its transport and start-up clocks (shared by the transport and the dispatcher)."""

    transport: Transport
    label: str  # server name until the server tells its own
    recorder: Recorder | None = None  # set by promcp.shims.record_session(); else the current recorder
    opened: Clock = field(default_factory=Clock.now)
    spawn_start: Clock | None = None
    spawn_end: Clock | None = None
    pid: int | None = None
    transport_open: Clock | None = None  # HTTP/SSE: the transport context entered
    first_byte: Clock | None = None
    startup_emitted: bool = False
    server: str | None = None
    protocol_version: str | None = None
    pending: dict[str, Call] = field(default_factory=dict)

    @property
    def newline(self) -> int:
        return 1 if self.transport is Transport.STDIO else 0

    def name(self) -> str:
        return current_scope().server or self.server or self.label


@dataclass
class Call:
    """One tracked request, from send_raw_request entry to its outcome."""

    info: SessionInfo
    method: str
    params: Mapping[str, Any] | None
    start: Clock
    request_id: str | None = None
    sent: Clock | None = None
    received: Clock | None = None
    span: Any = None
    own_span: bool = False
    # the messages as sent/received; their wire size is computed when first asked for (on the recorder's worker
    # or the span exporter's thread), not on the call's path: serializing a 10 KB response costs ~30 µs
    request_msg: Any = None
    response_msg: Any = None
    _sizes: dict[str, int | None] = field(default_factory=dict)

    def _wire_size(self, key: str, message: Any) -> int | None:
        if key not in self._sizes:
            self._sizes[key] = (
                None
                if message is None
                else len(message.model_dump_json(by_alias=True, exclude_unset=True).encode())
                + self.info.newline
            )
        return self._sizes[key]

    @property
    def request_bytes(self) -> int | None:
        """The JSON-RPC request's bytes on the wire (stdio: plus the newline)."""
        return self._wire_size("request", self.request_msg)

    @property
    def response_bytes(self) -> int | None:
        """The JSON-RPC response's bytes on the wire (stdio: plus the newline)."""
        return self._wire_size("response", self.response_msg)

    def wire_attrs(self) -> dict[str, Any]:
        """Span attributes computed at export time."""
        return {
            "promcp.request.bytes": self.request_bytes or 0,
            "promcp.response.bytes": self.response_bytes or 0,
        }


_transport_var: contextvars.ContextVar[SessionInfo | None] = contextvars.ContextVar(
    "promcp_transport", default=None
)
_call_var: contextvars.ContextVar[Call | None] = contextvars.ContextVar("promcp_call", default=None)
_by_read_stream: dict[int, SessionInfo] = {}


class Settings:
    """What the hooks need from :func:`promcp.instrument` (the tokenizer for footprints)."""

    tokenizer: CachedTokenizer | None = None


settings = Settings()


def _tokenizer() -> CachedTokenizer:
    if settings.tokenizer is None:
        from promcp import tokenizers

        settings.tokenizer = tokenizers.get("o200k_base")
    return settings.tokenizer


# -- transport factories --------------------------------------------------------------------------------------------


def _label(kind: Transport, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    target = args[0] if args else kwargs.get("server", kwargs.get("url"))
    if kind is Transport.STDIO:
        command = os.path.basename(str(getattr(target, "command", "server")))
        argv = [str(a) for a in getattr(target, "args", []) or []]
        if "-m" in argv[:-1]:
            return argv[argv.index("-m") + 1]
        return os.path.basename(argv[0]) if command.startswith("python") and argv else command
    return str(target)


def wrap_factory(orig: Callable[..., Any], kind: Transport) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def factory(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        info = guard(SessionInfo, kind, guard(_label, kind, args, kwargs) or kind.value)
        token = _transport_var.set(info) if info is not None else None
        try:
            async with orig(*args, **kwargs) as streams:
                if token is not None:
                    _transport_var.reset(token)
                    token = None
                guard(_opened, info, streams)
                try:
                    yield streams
                finally:
                    guard(_closed, info, streams)
        finally:
            if token is not None:
                _transport_var.reset(token)

    factory.__wrapped__ = orig  # type: ignore[attr-defined]
    factory.__doc__ = orig.__doc__
    factory.__name__ = getattr(orig, "__name__", "factory")
    return factory


def _opened(info: SessionInfo | None, streams: Any) -> None:
    if info is None:
        return
    if info.transport is not Transport.STDIO:
        info.transport_open = Clock.now()
    _by_read_stream[id(streams[0])] = info


def _closed(info: SessionInfo | None, streams: Any) -> None:
    _by_read_stream.pop(id(streams[0]), None)
    if info is not None:
        _emit_startup(info)


def wrap_spawn(orig: Callable[..., Any]) -> Callable[..., Any]:
    async def spawn(*args: Any, **kwargs: Any) -> Any:
        info = _transport_var.get()
        start = Clock.now()
        process = await orig(*args, **kwargs)
        if info is not None:
            info.spawn_start, info.spawn_end = start, Clock.now()
            info.pid = getattr(process, "pid", None)
        return process

    spawn.__wrapped__ = orig  # type: ignore[attr-defined]
    return spawn


def wrap_parse_line(orig: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse_line(line: str) -> Any:
        info = _transport_var.get()
        if info is not None and info.first_byte is None:
            info.first_byte = Clock.now()
        return orig(line)

    parse_line.__wrapped__ = orig  # type: ignore[attr-defined]
    return parse_line


# -- session / dispatcher -------------------------------------------------------------------------------------------


def wrap_session_init(orig: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        guard(_tag_dispatcher, self)

    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    return __init__


def _tag_dispatcher(session: Any) -> None:
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    dispatcher = getattr(session, "_dispatcher", None)
    if not isinstance(dispatcher, JSONRPCDispatcher) or getattr(dispatcher, "_promcp", None) is not None:
        return
    info = _by_read_stream.get(id(getattr(dispatcher, "_read_stream", None)))
    dispatcher._promcp = info or SessionInfo(Transport.INPROC, "inproc")  # type: ignore[attr-defined]


def tag_session(
    session: Any, recorder: Recorder, server: str | None, transport: Transport | None
) -> SessionInfo:
    """Bind one session's dispatcher to ``recorder`` (see promcp.shims.record_session)."""
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    from promcp.errors import InstrumentationError

    dispatcher = getattr(session, "_dispatcher", None)
    if not isinstance(dispatcher, JSONRPCDispatcher):
        raise InstrumentationError(
            f"record_session(): {type(session).__name__} has no JSON-RPC dispatcher to record "
            "(an in-process Client(server) in modern mode sends no JSON-RPC; use mode='legacy')"
        )
    info: SessionInfo | None = getattr(dispatcher, "_promcp", None)
    if info is None or (transport is not None and info.transport is not transport):
        if transport is None:
            raise InstrumentationError(
                "record_session(): this session's transport was opened before promcp's hooks were installed, "
                "so promcp cannot tell it; pass transport='stdio'|'streamable_http'|'sse'|'inproc'"
            )
        info = SessionInfo(
            transport, server or transport.value, startup_emitted=True
        )  # start-up was not seen
        dispatcher._promcp = info  # type: ignore[attr-defined]
    info.recorder = recorder
    if server:
        info.server = server
    return info


def wrap_send_raw_request(orig: Callable[..., Any]) -> Callable[..., Any]:
    async def send_raw_request(
        self: Any, method: str, params: Mapping[str, Any] | None, opts: Any = None, **kwargs: Any
    ) -> Any:
        info: SessionInfo | None = getattr(self, "_promcp", None)
        if info is None or method not in _TRACKED:
            return await orig(self, method, params, opts, **kwargs)
        call = guard(Call, info, method, params, Clock.now())
        token = _call_var.set(call)
        try:
            result = await orig(self, method, params, opts, **kwargs)
        except BaseException as exc:
            _call_var.reset(token)
            if call is not None:
                guard(_finish, call, None, exc)
            raise
        _call_var.reset(token)
        if call is not None:
            guard(_finish, call, result, None)
        return result

    send_raw_request.__wrapped__ = orig  # type: ignore[attr-defined]
    return send_raw_request


def wrap_write(orig: Callable[..., Any]) -> Callable[..., Any]:
    async def _write(self: Any, message: Any, metadata: Any = None) -> None:
        call = _call_var.get()
        if call is None or call.request_id is not None or getattr(self, "_promcp", None) is not call.info:
            await orig(self, message, metadata)
            return
        guard(_on_request, call, message)
        await orig(self, message, metadata)
        call.sent = Clock.now()

    _write.__wrapped__ = orig  # type: ignore[attr-defined]
    return _write


def _on_request(call: Call, message: Any) -> None:
    if getattr(message, "method", None) != call.method or getattr(message, "id", None) is None:
        return
    call.request_id = str(message.id)
    call.request_msg = message
    call.info.pending[call.request_id] = call
    call.span = _otel.on_request(call)


def wrap_dispatch(orig: Callable[..., Any]) -> Callable[..., Any]:
    async def _dispatch(self: Any, item: Any, *args: Any, **kwargs: Any) -> None:
        info: SessionInfo | None = getattr(self, "_promcp", None)
        if info is not None and info.pending:
            guard(_on_response, info, item)
        await orig(self, item, *args, **kwargs)

    _dispatch.__wrapped__ = orig  # type: ignore[attr-defined]
    return _dispatch


def _on_response(info: SessionInfo, item: Any) -> None:
    message: Any = getattr(item, "message", None)
    # a type test, not getattr(message, "method"): on a pydantic response a missing attribute costs ~5 µs
    if not isinstance(message, _RESPONSE_TYPES) or message.id is None:
        return
    call = info.pending.pop(str(message.id), None)
    if call is None:
        return
    call.received = Clock.now()
    call.response_msg = message
    _otel.on_response(call)


# -- events ---------------------------------------------------------------------------------------------------------


def _error(exc: BaseException) -> tuple[Status, str, dict[str, Any]]:
    import anyio
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if isinstance(exc, MCPError):
        code = exc.error.code
        attrs: dict[str, Any] = {"jsonrpc_code": code, "error": exc.error.message}
        if code == REQUEST_TIMEOUT:
            return Status.TIMEOUT, "timeout", attrs
        if code == CONNECTION_CLOSED:
            return Status.ERROR, "server_crashed", attrs
        return Status.ERROR, "mcp_error", attrs
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return Status.CANCELLED, "cancelled", {}
    if isinstance(exc, TimeoutError):
        return Status.TIMEOUT, "timeout", {}
    return Status.ERROR, type(exc).__name__, {"error": str(exc)[:500]}


def _finish(call: Call, result: Any, exc: BaseException | None) -> None:
    rec = call.info.recorder or current_recorder()
    end = Clock.now()
    if _later:  # earlier calls' events first: the journal's order (seq) stays the order calls ended in
        drain()
    if call.received is None and exc is None:
        call.received = end
    call.info.pending.pop(call.request_id or "", None)
    if rec is None:
        guard(_otel.on_finish, call, None if exc is None else "error")
        return
    status, error_type, err_attrs = (Status.OK, None, {}) if exc is None else _error(exc)
    if isinstance(result, Mapping) and result.get("isError"):
        error_type = "tool_error"
    guard(_otel.on_finish, call, error_type)
    guard(_otel.defer, call.span, call.wire_attrs)
    if call.method in ("initialize", "server/discover"):
        _on_handshake(rec, call, result, end, status, error_type, err_attrs)
    elif call.method == "tools/list":
        _on_tools_list(rec, call, result, end, status, error_type, err_attrs)
    elif call.method == "tools/call":  # the hot path: hand the event to the recorder once the caller yields
        _run_later(functools.partial(_on_tools_call, rec, call, result, end, status, error_type, err_attrs))


_later: collections.deque[tuple[Scope, Callable[[], Any]]] = collections.deque()
_drain_context = contextvars.Context()  # drain runs here: no per-call context copy on the call's path


def _run_later(fn: Callable[[], Any]) -> None:
    """Run ``fn`` when the caller's task next yields to the event loop, under the caller's current scope.

    Waking the recorder's worker while the caller is still returning through the SDK (result validation, its own
    code) makes the two threads contend for the GIL on the call's path (~100 µs of caller CPU per call measured in
    tests/perf/bench_instrument.py); one loop iteration later the caller is usually waiting on I/O. Every other
    emitter of the shims (the next MCP call, the LLM wrappers) drains first, so the journal order is kept. Only the scope (a frozen value) is captured, not a copy of the whole context: copying
    contexts cost ~15 µs per call here. :func:`drain` (called by ``promcp.shims.flush()`` and ``uninstrument()``)
    runs whatever is still queued, so nothing is lost when the loop stops first.
    """
    _later.append((current_scope(), fn))
    if len(_later) == 1:  # else a drain is already scheduled (or running) and will take this one too
        try:
            asyncio.get_running_loop().call_soon(drain, context=_drain_context)
        except RuntimeError:  # no asyncio loop (trio backend, or called outside a loop): run now
            drain()


def _in_scope(sc: Scope, fn: Callable[[], Any]) -> None:
    with scope(**{name: getattr(sc, name) for name in _SCOPE_FIELDS}):
        fn()


def drain() -> None:
    """Run every deferred event hand-off now (idempotent, any thread)."""
    while True:
        try:
            sc, fn = _later.popleft()
        except IndexError:
            return
        guard(_in_scope, sc, fn)


def _emit_startup(info: SessionInfo) -> None:
    """spawn and ready, once per connection (deferred until the server's name is known or the transport closes)."""
    rec = info.recorder or current_recorder()
    if info.startup_emitted or rec is None:
        return
    info.startup_emitted = True
    common: dict[str, Any] = {"stage": Stage.INIT, "server": info.name(), "transport": info.transport}
    if info.spawn_start is not None and info.spawn_end is not None:
        rec.emit(
            Event(
                **common,
                phase=Phase.SPAWN,
                t_start_ns=info.spawn_start.wall_ns,
                t_end_ns=info.spawn_end.wall_ns,
                latency_ms=info.spawn_start.ms_to(info.spawn_end),
                attrs={"pid": info.pid, "source": "instrument"},
            )
        )
        ready_start: Clock | None = info.spawn_end
        ready_end = info.first_byte
        how = "first_byte"
    else:
        ready_start, ready_end, how = info.opened, info.transport_open, "transport_open"
    if ready_start is not None and ready_end is not None:
        rec.emit(
            Event(
                **common,
                phase=Phase.READY,
                t_start_ns=ready_start.wall_ns,
                t_end_ns=max(ready_start.wall_ns, ready_end.wall_ns),
                latency_ms=ready_start.ms_to(ready_end),
                attrs={"ready": how, "source": "instrument"},
            )
        )


def _request_meta(call: Call) -> Mapping[str, Any]:
    meta = (call.params or {}).get("_meta") if call.params else None
    return meta if isinstance(meta, Mapping) else {}


def _on_handshake(
    rec: Recorder,
    call: Call,
    result: Any,
    end: Clock,
    status: Status,
    error_type: str | None,
    err_attrs: dict[str, Any],
) -> None:
    info = call.info
    attrs: dict[str, Any] = {"source": "instrument", **err_attrs}
    if isinstance(result, Mapping):
        server_info = result.get("serverInfo")
        if not isinstance(server_info, Mapping):
            server_info = (result.get("_meta") or {}).get(_META_SERVER_INFO)
        if isinstance(server_info, Mapping):
            info.server = info.server or server_info.get("name")
            attrs["server_name"] = server_info.get("name")
            attrs["server_version"] = server_info.get("version")
        info.protocol_version = result.get("protocolVersion") or _request_meta(call).get(_META_PROTOCOL)
    _emit_startup(info)
    rec.emit(
        Event(
            stage=Stage.INIT,
            phase=Phase.INITIALIZE,
            server=info.name(),
            transport=info.transport,
            mcp_method=call.method,
            jsonrpc_id=call.request_id,
            t_start_ns=call.start.wall_ns,
            t_end_ns=max(end.wall_ns, call.start.wall_ns),
            latency_ms=call.start.ms_to(call.received or end),
            status=status,
            error_type=error_type,
            protocol_version=info.protocol_version or _request_meta(call).get(_META_PROTOCOL),
            footprint_bytes=call.response_bytes,
            attrs={**attrs, "request_bytes": call.request_bytes},
        )
    )


def _on_tools_list(
    rec: Recorder,
    call: Call,
    result: Any,
    end: Clock,
    status: Status,
    error_type: str | None,
    err_attrs: dict[str, Any],
) -> None:
    info = call.info
    tools = list(result.get("tools") or []) if isinstance(result, Mapping) else []
    tokenizer = _tokenizer()
    server, start, received = info.name(), call.start, call.received or end
    cursor = (call.params or {}).get("cursor") if call.params else None
    guard(_note_tools, server, tools)

    def build() -> Event:
        rendered = [_footprint.tool_text_of(t) for t in tools]
        tokens, size, per_tool = _footprint.tool_list_footprint(rendered, tokenizer.count)
        per_tool_attrs: dict[str, Any] = {
            name: {**per_tool[name], "content": rec.put_text("schema", text)} for name, text in rendered
        }
        attrs: dict[str, Any] = {
            "n_tools": len(tools),
            "tools": per_tool_attrs,
            "source": "instrument",
            **err_attrs,
        }
        attrs["response_bytes"] = call.response_bytes
        if cursor:
            attrs["cursor"] = cursor
        return Event(
            stage=Stage.INIT,
            phase=Phase.TOOLS_DISCOVERY,
            server=server,
            transport=info.transport,
            mcp_method="tools/list",
            jsonrpc_id=call.request_id,
            t_start_ns=start.wall_ns,
            t_end_ns=max(end.wall_ns, start.wall_ns),
            latency_ms=start.ms_to(received),
            status=status,
            error_type=error_type,
            protocol_version=info.protocol_version,
            footprint_tokens=tokens if status is Status.OK else None,
            footprint_bytes=size if status is Status.OK else None,
            token_source=tokenizer.source,
            tokenizer=tokenizer.name,
            attrs=attrs,
        )

    rec.emit_later(build)

    def span_tokens() -> dict[str, Any]:
        rendered = [_footprint.tool_text_of(t) for t in tools]
        tokens, size, _ = _footprint.tool_list_footprint(rendered, tokenizer.count)
        return {
            "promcp.tokenizer": tokenizer.name,
            "promcp.footprint.tokens": tokens,
            "promcp.footprint.bytes": size,
            "promcp.n_tools": len(tools),
        }

    _otel.defer(call.span, span_tokens)


def _note_tools(server: str, tools: list[Any]) -> None:
    """Tell the LLM wrappers which server offers which tools (schema part keys ``<server>/<tool>``)."""
    from promcp.shims import _llm

    _llm.note_tools(server, [str(t.get("name")) for t in tools if isinstance(t, Mapping)])


#: Finds the model's tool-call id for (tool, arguments) when the host did not set one in a scope (LLM wrappers).
tool_call_lookup: Callable[[str, Mapping[str, Any]], str | None] | None = None


def _on_tools_call(
    rec: Recorder,
    call: Call,
    result: Any,
    end: Clock,
    status: Status,
    error_type: str | None,
    err_attrs: dict[str, Any],
) -> None:
    info = call.info
    params = call.params or {}
    tool = str(params.get("name"))
    arguments = params.get("arguments") or {}
    tool_call_id = current_scope().tool_call_id
    if tool_call_id is None and tool_call_lookup is not None:
        tool_call_id = guard(tool_call_lookup, tool, arguments)
    is_error = isinstance(result, Mapping) and bool(result.get("isError"))
    if is_error:
        status, error_type = Status.ERROR, "tool_error"
    tokenizer = _tokenizer()
    common: dict[str, Any] = {
        "server": info.name(),
        "tool": tool,
        "tool_call_id": tool_call_id,
        "transport": info.transport,
        "mcp_method": "tools/call",
        "jsonrpc_id": call.request_id,
        "protocol_version": info.protocol_version,
        "tokenizer": tokenizer.name,
        "token_source": tokenizer.source,
    }
    sent, start = call.sent, call.start

    def build_s3() -> Event:
        args_text = _footprint.arguments_text(arguments)
        return Event(
            stage=Stage.S3,
            **common,
            t_start_ns=start.wall_ns,
            t_end_ns=(sent or start).wall_ns,
            latency_ms=start.ms_to(sent) if sent else None,
            timing_quality=TimingQuality.EXACT if sent else TimingQuality.NONE,
            footprint_tokens=tokenizer.count(args_text),
            footprint_bytes=call.request_bytes if call.request_bytes is not None else len(args_text.encode()),
            status=Status.OK if sent else status,
            error_type=None if sent else error_type,
            req_preview=args_text,
            attrs={"source": "instrument"},
        )

    rec.emit_later(build_s3)
    if sent is None:
        return
    received = call.received or end

    def build_s4() -> Event:
        attrs: dict[str, Any] = {"source": "instrument", **err_attrs}
        text: str | None = None
        if isinstance(result, Mapping):
            text = _footprint.result_text(result)
            attrs["content"] = rec.put_text("result", text)
        if is_error:
            attrs["is_error"] = True
        return Event(
            stage=Stage.S4,
            **common,
            t_start_ns=sent.wall_ns,
            t_end_ns=max(received.wall_ns, sent.wall_ns),
            latency_ms=sent.ms_to(received),
            footprint_tokens=tokenizer.count(text) if text is not None else None,
            footprint_bytes=call.response_bytes,
            status=status,
            error_type=error_type,
            resp_preview=text,
            attrs=attrs,
        )

    rec.emit_later(build_s4)

    def span_tokens() -> dict[str, Any]:
        attrs: dict[str, Any] = {"promcp.tokenizer": tokenizer.name}
        attrs["promcp.request.tokens"] = tokenizer.count(_footprint.arguments_text(arguments))
        if isinstance(result, Mapping):
            text = _footprint.result_text(result)
            attrs["promcp.footprint.tokens"] = tokenizer.count(text)
            attrs["promcp.footprint.bytes"] = len(text.encode())
        return attrs

    _otel.defer(call.span, span_tokens)


# -- install --------------------------------------------------------------------------------------------------------


def install(patches: Patches) -> None:
    """Patch every target (raises InstrumentationError naming the missing ones, before patching anything)."""
    from promcp.errors import InstrumentationError

    missing = missing_targets()
    if missing:
        raise InstrumentationError(
            "promcp.instrument(): the installed mcp lacks hook target(s) "
            + ", ".join(missing)
            + " (supported: mcp>=2.3,<2.4)"
        )
    import mcp.client.session as session_mod
    import mcp.client.sse
    import mcp.client.stdio as stdio_mod
    import mcp.client.streamable_http  # noqa: F401
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    originals: dict[int, Callable[..., Any]] = {}
    for module_name, attr in (
        ("mcp.client.stdio", "stdio_client"),
        ("mcp.client.streamable_http", "streamable_http_client"),
        ("mcp.client.sse", "sse_client"),
    ):
        orig = getattr(sys.modules[module_name], attr)
        originals[id(orig)] = wrap_factory(orig, _FACTORIES[attr])
    # rebind every import-time copy (mcp.stdio_client, mcp.client.client.stdio_client, user modules…)
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr in _FACTORIES:
            value = namespace.get(attr)
            if value is not None and id(value) in originals:
                patches.set(module, attr, originals[id(value)])
    patches.set(
        stdio_mod,
        "_create_platform_compatible_process",
        wrap_spawn(stdio_mod._create_platform_compatible_process),
    )
    patches.set(stdio_mod, "_parse_line", wrap_parse_line(stdio_mod._parse_line))
    patches.set(session_mod.ClientSession, "__init__", wrap_session_init(session_mod.ClientSession.__init__))
    patches.set(
        JSONRPCDispatcher, "send_raw_request", wrap_send_raw_request(JSONRPCDispatcher.send_raw_request)
    )
    patches.set(JSONRPCDispatcher, "_write", wrap_write(JSONRPCDispatcher._write))
    patches.set(JSONRPCDispatcher, "_dispatch", wrap_dispatch(JSONRPCDispatcher._dispatch))
