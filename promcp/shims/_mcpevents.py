"""From what the MCP hooks measured to events: a finished request's outcome handed to the stage builders.

The hooks (:mod:`promcp.shims._mcp`) keep instants, the messages as sent and received, and the raw results; this
module classifies the outcome and calls :mod:`promcp.stages` — spawn/ready once per connection, ``initialize`` /
``server/discover``, each ``tools/list`` page, and a ``tools/call``'s S3/S4 — with token counts and wire sizes
computed on the recorder's worker (``Recorder.emit_later``). A ``tools/call``'s events are handed over when the
caller's task next yields (:mod:`promcp.shims._deferred`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from promcp import stages
from promcp.events import Event, Phase, Status
from promcp.recorder import Recorder, current_recorder, current_scope
from promcp.shims import _deferred, _join
from promcp.shims import _spans as _otel
from promcp.shims._calls import Call, SessionInfo
from promcp.shims._config import footprint_tokenizer, settings
from promcp.shims._patch import guard
from promcp.stages import Failure, Instant
from promcp.wire import mcp


def _failure(exc: BaseException) -> Failure:
    """How a request failed, from the exception the SDK raised."""
    import anyio
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        status, error_type = mcp.jsonrpc_failure(exc.error.code)
        return Failure(status, error_type, exc.error.message, {"jsonrpc_code": exc.error.code})
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return Failure(Status.CANCELLED, "cancelled")
    if isinstance(exc, TimeoutError):
        return Failure(Status.TIMEOUT, "timeout")
    return Failure(Status.ERROR, type(exc).__name__, str(exc)[:500])


def finish(call: Call, result: Any, exc: BaseException | None) -> None:
    """A tracked request ended (``send_raw_request`` returned or raised): span, then events."""
    rec = call.info.recorder or current_recorder()
    end = settings.clock.now()
    if (
        _deferred.pending()
    ):  # earlier calls' events first: the journal's order (seq) stays the order calls ended in
        _deferred.drain()
    if call.received is None and exc is None:
        call.received = end
    call.info.pending.pop(call.request_id or "", None)
    failure = None if exc is None else _failure(exc)
    if rec is None:
        guard(_otel.on_finish, call, None if failure is None else "error")
        return
    raw = result if isinstance(result, Mapping) else None
    tool_error = raw is not None and mcp.is_error(raw)
    guard(_otel.on_finish, call, failure.error_type if failure else ("tool_error" if tool_error else None))
    guard(_otel.defer, call.span, call.wire_attrs)
    if call.method in ("initialize", "server/discover"):
        _on_handshake(rec, call, raw, end, failure)
    elif call.method == "tools/list":
        _on_tools_list(rec, call, raw, end, failure)
    elif call.method == "tools/call":  # the hot path: hand the events to the recorder once the caller yields
        _deferred.run_later(functools.partial(_on_tools_call, rec, call, raw, end, failure))


def emit_startup(info: SessionInfo) -> None:
    """spawn and ready, once per connection (deferred until the server's name is known or the transport closes)."""
    rec = info.recorder or current_recorder()
    if info.startup_emitted or rec is None:
        return
    info.startup_emitted = True
    server, transport = info.name(), info.transport
    if info.spawn_start is not None and info.spawn_end is not None:
        rec.emit(
            stages.startup_event(
                phase=Phase.SPAWN,
                server=server,
                transport=transport,
                start=info.spawn_start,
                end=info.spawn_end,
                attrs={"pid": info.pid},
            )
        )
        ready_start, ready_end, how = info.spawn_end, info.first_byte, "first_byte"
    else:
        ready_start, ready_end, how = info.opened, info.transport_open, "transport_open"
    if ready_end is not None:
        rec.emit(
            stages.startup_event(
                phase=Phase.READY,
                server=server,
                transport=transport,
                start=ready_start,
                end=ready_end,
                attrs={"ready": how},
            )
        )


def _on_handshake(
    rec: Recorder, call: Call, result: Mapping[str, Any] | None, end: Instant, failure: Failure | None
) -> None:
    info = call.info
    shake = mcp.handshake(result, call.params)
    if result is not None:
        info.server = info.server or shake.server_name
        info.protocol_version = shake.protocol_version
    emit_startup(info)
    rec.emit(
        stages.initialize_event(
            server=info.name(),
            transport=info.transport,
            start=call.start,
            end=call.received or end,
            handshake=shake if result is not None else None,
            method=call.method,
            jsonrpc_id=call.request_id,
            request_bytes=call.request_bytes,
            response_bytes=call.response_bytes,
            protocol_version=info.protocol_version or shake.protocol_version,
            failure=failure,
        )
    )


def _on_tools_list(
    rec: Recorder, call: Call, result: Mapping[str, Any] | None, end: Instant, failure: Failure | None
) -> None:
    info = call.info
    tools = mcp.tools_of(result) if result is not None else []
    tokenizer = footprint_tokenizer()
    server = info.name()
    guard(_join.join.note_tools, server, [str(t.get("name")) for t in tools if isinstance(t, Mapping)])
    cursor = (call.params or {}).get("cursor")

    def build() -> Event:
        return stages.tools_discovery_event(
            server=server,
            transport=info.transport,
            start=call.start,
            end=call.received or end,
            tools=[mcp.tool_text_of(t) for t in tools],
            tokenizer=tokenizer,
            put_text=rec.put_text,
            jsonrpc_id=call.request_id,
            protocol_version=info.protocol_version,
            response_bytes=call.response_bytes,
            cursor=None if cursor is None else str(cursor),
            next_cursor=mcp.next_cursor(result) if result is not None else None,
            failure=failure,
        )

    rec.emit_later(build)

    def span_tokens() -> dict[str, Any]:
        per_tool = stages.tool_footprints([mcp.tool_text_of(t) for t in tools], tokenizer)
        return {
            "promcp.tokenizer": tokenizer.name,
            "promcp.footprint.tokens": sum(v["tokens"] for v in per_tool.values()),
            "promcp.footprint.bytes": sum(v["bytes"] for v in per_tool.values()),
            "promcp.n_tools": len(tools),
        }

    _otel.defer(call.span, span_tokens)


def _on_tools_call(
    rec: Recorder, call: Call, result: Mapping[str, Any] | None, end: Instant, failure: Failure | None
) -> None:
    info = call.info
    params = call.params or {}
    tool = str(params.get("name"))
    arguments = params.get("arguments") or {}
    tool_call_id = current_scope().tool_call_id or guard(_join.join.take, tool, arguments)
    tokenizer = footprint_tokenizer()
    server = info.name()

    @functools.cache
    def measured() -> stages.ToolsCall:  # on the worker: the wire sizes are computed here
        m = stages.ToolsCall(tool, call.start, end, tokenizer, failure=failure, put_text=rec.put_text)
        m.sent, m.received, m.jsonrpc_id = call.sent, call.received, call.request_id
        m.server, m.transport, m.protocol_version = server, info.transport, info.protocol_version
        m.tool_call_id, m.arguments, m.result = tool_call_id, arguments, result
        m.request_bytes, m.response_bytes = call.request_bytes, call.response_bytes
        return m

    rec.emit_later(lambda: stages.tool_request_event(measured()))
    if call.sent is not None:
        rec.emit_later(lambda: stages.tool_result_event(measured()))

    def span_tokens() -> dict[str, Any]:
        attrs: dict[str, Any] = {"promcp.tokenizer": tokenizer.name}
        attrs["promcp.request.tokens"] = tokenizer.count(mcp.arguments_text(arguments))
        if result is not None:
            text = mcp.result_text(result)
            attrs["promcp.footprint.tokens"] = tokenizer.count(text)
            attrs["promcp.footprint.bytes"] = len(text.encode())
            if mcp.is_error(result):
                attrs["error.type"] = "tool_error"
        return attrs

    _otel.defer(call.span, span_tokens)
