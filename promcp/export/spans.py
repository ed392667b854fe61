"""One promcp event → one OTLP span (protobuf), with stable ids, the OTel GenAI / MCP semantic-convention attributes
backends read, promcp's own under ``promcp.*``, and the row itself for ``promcp collect`` (docs/export.md).

Ids are derived, never random, so exporting a run twice sends the same spans (a backend keeps one of each):
the trace id from (run id, task id), an event's span id from (run id, ``seq``), a task's root span id from (run id,
task id). Times come from the event: a bounded interval is sent as its bounds and marked ``promcp.timing_quality
= bounded``; a missing end is the start plus the measured latency, or the start; a missing start is the end; an
event without any time is a zero-length span at the last time known before it, marked ``promcp.time_known =
none`` (its time is a placeholder, not a measurement).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from promcp.events import LLM_INPUT_STAGES, LLM_OUTPUT_STAGES, Event, Stage
from promcp.wire import carried

__all__ = ["NO_TASK", "Cost", "TaskSpan", "event_span", "key_values", "span_id", "task_span", "trace_id"]

#: The trace of a run's events without a task (session start-up: INIT, MCP traffic outside a task).
NO_TASK: Final = "(session)"
_KIND_INTERNAL: Final = Span.SpanKind.SPAN_KIND_INTERNAL
_KIND_CLIENT: Final = Span.SpanKind.SPAN_KIND_CLIENT
#: OTel ``network.transport`` of a promcp transport (as promcp.instrument() writes it)
_NETWORK: Final = {"stdio": "pipe", "streamable_http": "tcp", "sse": "tcp", "inproc": "inproc"}
_LLM_STAGES: Final = LLM_INPUT_STAGES | LLM_OUTPUT_STAGES
_TOOL_STAGES: Final = frozenset({Stage.S3, Stage.S4})


def _digest(text: str, size: int) -> bytes:
    raw = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size).digest()
    return raw if any(raw) else raw[:-1] + b"\x01"  # an all-zero id is invalid in OTLP


def trace_id(run_id: str, task: str) -> bytes:
    """The trace of one task of one run (16 bytes, stable)."""
    return _digest(f"promcp\x00{run_id}\x00task\x00{task}", 16)


def span_id(run_id: str, seq: int) -> bytes:
    """The span of the event ``seq`` of a run (8 bytes, stable)."""
    return _digest(f"promcp\x00{run_id}\x00seq\x00{seq}", 8)


def root_span_id(run_id: str, task: str) -> bytes:
    """The root span of one task of one run (8 bytes, stable)."""
    return _digest(f"promcp\x00{run_id}\x00task\x00{task}\x00root", 8)


def _value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, list | tuple):
        return AnyValue(array_value=ArrayValue(values=[_value(x) for x in v]))
    return AnyValue(string_value=str(v))


def key_values(attrs: Mapping[str, Any]) -> list[KeyValue]:
    """OTLP key-values of ``attrs`` (None values left out)."""
    return [KeyValue(key=k, value=_value(v)) for k, v in attrs.items() if v is not None]


def _fill(target: Any, attrs: Mapping[str, Any]) -> None:
    """Add ``attrs`` (None values left out) to a span's repeated ``attributes`` in place: three times faster than
    building :class:`KeyValue` objects and copying them in (this is most of an export's time)."""
    add = target.add
    for k, v in attrs.items():
        if v is None:
            continue
        value = add(key=k).value
        if isinstance(v, str):
            value.string_value = v
        elif isinstance(v, bool):
            value.bool_value = v
        elif isinstance(v, int):
            value.int_value = v
        elif isinstance(v, float):
            value.double_value = v
        elif isinstance(v, list | tuple):
            value.array_value.CopyFrom(ArrayValue(values=[_value(x) for x in v]))
        else:
            value.string_value = str(v)


@dataclass(frozen=True)
class Cost:
    """What one LLM event cost (US dollars; None with the reason when it has no price)."""

    usd: float | None
    reason: str | None = None
    priced_by: str | None = None


@dataclass
class TaskSpan:
    """A task's root span: its trace, and the time its events cover (None when none of them has a time)."""

    run_id: str
    task: str
    start_ns: int | None
    end_ns: int | None
    events: int = 0


def task_span(task: TaskSpan, anchor_ns: int, resource_run: Mapping[str, Any]) -> Span:
    """The root span of a task: from its first known time to its last (``derived`` from its events)."""
    known = task.start_ns is not None and task.end_ns is not None
    start = task.start_ns if task.start_ns is not None else anchor_ns
    end = task.end_ns if task.end_ns is not None else start
    session = task.task == NO_TASK
    attrs: dict[str, Any] = {
        "promcp.run_id": task.run_id,
        "promcp.task_id": None if session else task.task,
        "promcp.event_count": task.events,
        "promcp.timing_quality": "derived" if known else "none",
        "promcp.time_known": "both" if known else "none",
        "promcp.topology": resource_run.get("topology"),
        "promcp.source": resource_run.get("source"),
        "promcp.benchmark": resource_run.get("benchmark"),
        "gen_ai.conversation.id": None if session else task.task,
    }
    span = Span(
        trace_id=trace_id(task.run_id, task.task),
        span_id=root_span_id(task.run_id, task.task),
        name=f"session {task.run_id}" if session else f"task {task.task}",
        kind=_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=max(end, start),
    )
    _fill(span.attributes, attrs)
    return span


def _times(e: Event, anchor_ns: int) -> tuple[int, int, str]:
    """(start, end, which of the two the event knows: both / start / end / none)."""
    s, t = e.t_start_ns, e.t_end_ns
    if s is not None and t is not None:
        return s, max(t, s), "both"
    if s is not None:
        if e.latency_ms is not None:
            return s, s + round(e.latency_ms * 1e6), "start"
        return s, s, "start"
    if t is not None:
        return t, t, "end"
    return anchor_ns, anchor_ns, "none"


def _name(e: Event) -> str:
    stage = e.stage
    if stage in _LLM_STAGES:
        return f"chat {e.model}" if e.model else "chat"
    if stage in _TOOL_STAGES:
        return f"{e.mcp_method or 'execute_tool'} {e.tool or ''}".rstrip()
    if e.mcp_method:
        return e.mcp_method
    return f"{str(e.phase) if e.phase else stage.value} {e.server or ''}".rstrip()


def _semconv(e: Event) -> dict[str, Any]:
    """The OTel GenAI / MCP semantic-convention attributes of an event."""
    a = e.attrs or {}
    stage = e.stage
    out: dict[str, Any] = {}
    if stage in _LLM_STAGES:
        out["gen_ai.operation.name"] = "chat"
        out["gen_ai.request.model"] = e.model
        out["gen_ai.provider.name"] = e.provider
        if stage in LLM_INPUT_STAGES:
            out["gen_ai.usage.input_tokens"] = e.tokens_in
            out["gen_ai.usage.cache_read.input_tokens"] = e.cache_read_tokens
            out["gen_ai.usage.cache_creation.input_tokens"] = e.cache_write_tokens
        else:
            out["gen_ai.usage.output_tokens"] = e.tokens_out
            out["gen_ai.usage.reasoning.output_tokens"] = e.reasoning_tokens
            reason = a.get("finish_reason")
            out["gen_ai.response.finish_reasons"] = [str(reason)] if reason else None
            out["gen_ai.response.id"] = a.get("response_id")
            out["gen_ai.response.model"] = a.get("response_model")
            out["gen_ai.tool.call.id"] = e.tool_call_id
    elif stage in _TOOL_STAGES:
        out["gen_ai.operation.name"] = "execute_tool"
        out["gen_ai.tool.name"] = e.tool
        out["gen_ai.tool.call.id"] = e.tool_call_id
    out["mcp.method.name"] = e.mcp_method
    out["jsonrpc.request.id"] = e.jsonrpc_id
    out["mcp.protocol.version"] = e.protocol_version
    if e.transport is not None:
        out["network.transport"] = _NETWORK.get(str(e.transport), str(e.transport))
    out["error.type"] = e.error_type
    return out


def _own(e: Event) -> dict[str, Any]:
    """promcp's own attributes: identity, stage, timing quality, token provenance, footprint, origins."""
    return {
        "promcp.run_id": e.run_id,
        "promcp.task_id": e.task_id,
        "promcp.round": e.round,
        "promcp.seq": e.seq,
        "promcp.stage": str(e.stage),
        "promcp.phase": str(e.phase) if e.phase else None,
        "promcp.direction": str(e.direction) if e.direction else None,
        "promcp.topology": str(e.topology),
        "promcp.source": e.source,
        "promcp.benchmark": e.benchmark,
        "promcp.status": str(e.status),
        "promcp.timing_quality": str(e.timing_quality),
        "promcp.latency_ms": e.latency_ms,
        "promcp.server": e.server,
        "promcp.tool": e.tool,
        "promcp.transport": str(e.transport) if e.transport else None,
        "promcp.token_source": str(e.token_source),
        "promcp.tokenizer": e.tokenizer,
        "promcp.tokens_in": e.tokens_in,
        "promcp.tokens_out": e.tokens_out,
        "promcp.footprint.tokens": e.footprint_tokens,
        "promcp.footprint.bytes": e.footprint_bytes,
        "promcp.origin.system": e.in_system,
        "promcp.origin.schemas": e.in_schemas,
        "promcp.origin.user": e.in_user,
        "promcp.origin.history": e.in_history,
        "promcp.origin.tool_results": e.in_tool_results,
        "promcp.context_window": e.context_window,
        "promcp.cache_write_5m_tokens": e.cache_write_5m_tokens,
        "promcp.cache_write_1h_tokens": e.cache_write_1h_tokens,
    }


def event_span(e: Event, anchor_ns: int, *, run_header: str | None, cost: Cost | None) -> Span:
    """The span of one event; ``run_header`` (the run's header as JSON) makes it carry the row itself for
    ``promcp collect`` (:mod:`promcp.wire.carried`); ``anchor_ns`` is the time of a span whose event has none."""
    start, end, known = _times(e, anchor_ns)
    task = e.task_id if e.task_id is not None else NO_TASK
    attrs = {**_semconv(e), **_own(e), "promcp.time_known": known}
    if cost is not None:
        attrs["promcp.cost.usd"] = cost.usd
        attrs["promcp.cost.reason"] = cost.reason
        attrs["promcp.cost.priced_by"] = cost.priced_by
    if run_header is not None:
        attrs.update(carried.encode([e], run_header))
    status = Status()
    if str(e.status) != "ok":
        status = Status(code=Status.StatusCode.STATUS_CODE_ERROR, message=e.error_type or str(e.status))
    span = Span(
        trace_id=trace_id(e.run_id, task),
        span_id=span_id(e.run_id, e.seq),
        parent_span_id=root_span_id(e.run_id, task),
        name=_name(e),
        kind=_KIND_INTERNAL if e.stage == Stage.INIT and e.mcp_method is None else _KIND_CLIENT,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        status=status,
    )
    _fill(span.attributes, attrs)
    return span
