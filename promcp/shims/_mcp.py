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

Inline work is limited to clock readings, keeping the messages and span attributes; what a finished request
measured goes to :mod:`promcp.shims._mcpevents`, whose stage builders count tokens and wire sizes on the
recorder's worker thread (``Recorder.emit_later``). Every hook body runs under :func:`promcp.shims._patch.guard`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from mcp_types import JSONRPCError, JSONRPCResponse

from promcp.events import Transport
from promcp.recorder import Recorder
from promcp.shims import _mcpevents
from promcp.shims import _spans as _otel
from promcp.shims._calls import Call, SessionInfo
from promcp.shims._config import settings
from promcp.shims._patch import Patches, guard

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


_transport_var: contextvars.ContextVar[SessionInfo | None] = contextvars.ContextVar(
    "promcp_transport", default=None
)
_call_var: contextvars.ContextVar[Call | None] = contextvars.ContextVar("promcp_call", default=None)
_by_read_stream: dict[int, SessionInfo] = {}


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
        info.transport_open = settings.clock.now()
    _by_read_stream[id(streams[0])] = info


def _closed(info: SessionInfo | None, streams: Any) -> None:
    _by_read_stream.pop(id(streams[0]), None)
    if info is not None:
        _mcpevents.emit_startup(info)


def wrap_spawn(orig: Callable[..., Any]) -> Callable[..., Any]:
    async def spawn(*args: Any, **kwargs: Any) -> Any:
        info = _transport_var.get()
        start = settings.clock.now()
        process = await orig(*args, **kwargs)
        if info is not None:
            info.spawn_start, info.spawn_end = start, settings.clock.now()
            info.pid = getattr(process, "pid", None)
        return process

    spawn.__wrapped__ = orig  # type: ignore[attr-defined]
    return spawn


def wrap_parse_line(orig: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse_line(line: str) -> Any:
        info = _transport_var.get()
        if info is not None and info.first_byte is None:
            info.first_byte = settings.clock.now()
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
        call = guard(Call, info, method, params, settings.clock.now())
        token = _call_var.set(call)
        try:
            result = await orig(self, method, params, opts, **kwargs)
        except BaseException as exc:
            _call_var.reset(token)
            if call is not None:
                guard(_mcpevents.finish, call, None, exc)
            raise
        _call_var.reset(token)
        if call is not None:
            guard(_mcpevents.finish, call, result, None)
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
        call.sent = settings.clock.now()

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
    call.received = settings.clock.now()
    call.response_msg = message
    _otel.on_response(call)


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
