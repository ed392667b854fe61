"""OpenTelemetry for the shims: enrich the mcp SDK's own ``MCP send <method> [<tool>]`` CLIENT spans.

promcp never replaces the process-wide TracerProvider (OpenTelemetry lets it be set once per process, which could
not be undone). When the application has set an SDK ``TracerProvider``, the SDK's spans go there and promcp only
adds attributes. Otherwise, when spans are wanted (``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, or ``instrument(span_exporter=…)``), promcp builds its own provider and
points the SDK's module tracer ``mcp.shared._otel._tracer`` at it until :func:`promcp.uninstrument`.

Inside ``JSONRPCDispatcher._write`` the SDK span is the current span and it is still open when the response is
dispatched, so the shims add attributes instead of creating a second span (own spans only when the SDK made none).

Attributes — semantic conventions where they exist: ``mcp.method.name`` and ``jsonrpc.request.id`` (set by the SDK),
``mcp.protocol.version``, ``network.transport`` (``pipe`` | ``tcp`` | ``inproc``), ``gen_ai.operation.name``
(``execute_tool``), ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``error.type``. promcp's own, all under ``promcp.``:
``promcp.stage``, ``promcp.phase``, ``promcp.transport``, ``promcp.server``, ``promcp.request.bytes``,
``promcp.response.bytes``, ``promcp.wire_rtt_ms``; added at export time, off the hot path:
``promcp.request.tokens`` (S3 arguments), ``promcp.footprint.tokens`` / ``promcp.footprint.bytes`` (S4 result text
or the tools/list schemas), ``promcp.n_tools``, ``promcp.tokenizer``.

**Rows carried for ``promcp collect``.** When promcp owns the provider, every row the recorder journals also rides,
as JSON, on the next spans exported, in the format of :mod:`promcp.wire.carried` (``promcp.events`` /
``promcp.run`` span attributes, ``promcp.run.id`` on the resource). ``promcp collect`` writes them back as they are, so the collected run equals the local one column for
column (``collectors/otlp_spans.py``). When nothing else is exported, :meth:`Tracing.close` sends the rest on
``promcp events`` spans. The stored texts (content blobs) stay local.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from promcp.events import Event, Phase, Stage
from promcp.shims._calls import Call
from promcp.shims._patch import Patches, guard
from promcp.wire import carried

if TYPE_CHECKING:  # pragma: no cover
    from promcp.recorder import Recorder
    from promcp.wire import Output

_NETWORK = {"stdio": "pipe", "streamable_http": "tcp", "sse": "tcp", "inproc": "inproc"}
#: MCP method -> (stage, phase) of its span; other tracked methods are the handshake
_STAGE = {
    "tools/call": (Stage.S3, Phase.TOOL_CALL),
    "tools/list": (Stage.INIT, Phase.TOOLS_DISCOVERY),
}
_HANDSHAKE = (Stage.INIT, Phase.INITIALIZE)
_MAX_DEFERRED = 100_000


class _Deferred:
    """span_id -> builder of attributes computed when the span is exported (token counts)."""

    def __init__(self) -> None:
        self.enabled = False
        self.lock = threading.Lock()
        self.by_span: dict[int, Callable[[], dict[str, Any]]] = {}


deferred = _Deferred()
_tracer: Any = None  # promcp's own tracer (fallback spans), set by setup()


def otlp_configured() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


class RowCarrier:
    """Rows the recorder journaled, waiting for the next export (bounded: past :attr:`max_pending` rows a row is
    counted in :attr:`dropped` and stays only in the local journal)."""

    def __init__(self, recorder: Recorder, *, max_pending: int = 100_000) -> None:
        import json

        self.max_pending = max_pending
        self.dropped = 0
        self._lock = threading.Lock()
        self._rows: list[Event] = []
        header = {
            "run_id": recorder.run_id,
            "topology": recorder.topology.value,
            "source": recorder.source,
            "benchmark": recorder.benchmark,
            "meta": recorder.meta,
            "content": recorder.content,
            "max_content_bytes": recorder.max_content_bytes,
        }
        self.run = json.dumps(header, sort_keys=True, default=str)

    def add(self, row: Event) -> None:
        with self._lock:
            if len(self._rows) >= self.max_pending:
                self.dropped += 1
            else:
                self._rows.append(row)

    @property
    def pending(self) -> int:
        return len(self._rows)

    def take(self, spans: int) -> list[list[Event]]:
        """Up to ``spans`` chunks of rows, oldest first; the rest wait for the next export."""
        with self._lock:
            n = min(len(self._rows), spans * carried.ROWS_PER_SPAN)
            rows, self._rows = self._rows[:n], self._rows[n:]
        return [rows[i : i + carried.ROWS_PER_SPAN] for i in range(0, len(rows), carried.ROWS_PER_SPAN)]

    def attributes(self, rows: list[Event]) -> dict[str, Any]:
        return carried.encode(rows, self.run)


class Tracing:
    """What :func:`setup` built; :meth:`close` flushes and shuts down a provider promcp owns."""

    def __init__(self, provider: Any, owned: bool, carrier: RowCarrier | None = None) -> None:
        self.provider, self.owned, self.carrier = provider, owned, carrier

    def close(self) -> None:
        global _tracer
        if self.provider is not None and self.owned:
            carrier = self.carrier
            if carrier is not None and carrier.pending and _tracer is not None:
                for _ in range(
                    -(-carrier.pending // carried.ROWS_PER_SPAN)
                ):  # spans for the rows not sent yet
                    _tracer.start_span("promcp events").end()
            self.provider.force_flush()  # deferred attributes and carried rows are applied during this export
            self.provider.shutdown()
        deferred.enabled = False
        with deferred.lock:
            deferred.by_span.clear()
        _tracer = None


def setup(patches: Patches, span_exporter: Any = None, recorder: Recorder | None = None) -> Tracing:
    """Choose or build the tracer provider (see the module docstring); ``recorder``'s rows ride on promcp's
    spans when promcp owns the provider."""
    global _tracer
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider) and span_exporter is None:
        _tracer = current.get_tracer("promcp")
        return Tracing(current, owned=False)
    if span_exporter is None and not otlp_configured():
        return Tracing(None, owned=False)
    import mcp.shared._otel as sdk_otel
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if span_exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    service = os.environ.get("OTEL_SERVICE_NAME") or "promcp-instrumented-host"
    resource: dict[str, Any] = {"service.name": service}
    if (
        recorder is not None
    ):  # the rows ride along: a receiver takes them instead of mapping these spans again
        resource[carried.RUN_RESOURCE] = recorder.run_id
    provider = TracerProvider(resource=Resource.create(resource))
    carrier = RowCarrier(recorder) if recorder is not None else None
    exporter = TokenEnrichingExporter(span_exporter, carrier)
    provider.add_span_processor(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
    patches.set(sdk_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    _tracer = provider.get_tracer("promcp")
    deferred.enabled = True
    if recorder is not None and carrier is not None:
        recorder.on_journal(carrier.add)
    return Tracing(provider, owned=True, carrier=carrier)


def _recording(span: Any) -> Any:
    return span if span is not None and span.is_recording() else None


def on_request(call: Call) -> Any:
    """Inside ``_write``: the current span is the SDK's ``MCP send`` span; add request attributes to it."""
    from opentelemetry import trace

    span = _recording(trace.get_current_span())
    if span is None:
        if _tracer is None:
            return None
        span = _own_span(call)  # this mcp emits no span of its own: make one, ended by on_finish
    stage, phase = _STAGE.get(call.method, _HANDSHAKE)
    transport = call.info.transport.value
    attrs: dict[str, Any] = {
        "network.transport": _NETWORK.get(transport, transport),
        "promcp.stage": stage.value,
        "promcp.phase": phase.value,
        "promcp.transport": transport,
        "promcp.server": call.info.name(),
    }
    if call.info.protocol_version:
        attrs["mcp.protocol.version"] = call.info.protocol_version
    if call.method == "tools/call":
        from promcp.recorder import current_scope

        attrs["gen_ai.operation.name"] = "execute_tool"
        name = (call.params or {}).get("name")
        if isinstance(name, str):
            attrs["gen_ai.tool.name"] = name
        tcid = current_scope().tool_call_id
        if tcid:
            attrs["gen_ai.tool.call.id"] = tcid
    span.set_attributes(attrs)
    return span


def _own_span(call: Call) -> Any:
    from opentelemetry.trace import SpanKind

    name = (call.params or {}).get("name") if call.method == "tools/call" else None
    span = _tracer.start_span(
        f"MCP send {call.method}{f' {name}' if isinstance(name, str) else ''}",
        kind=SpanKind.CLIENT,
        attributes={"mcp.method.name": call.method, "jsonrpc.request.id": call.request_id or ""},
    )
    call.own_span = True
    return span


def on_response(call: Call) -> None:
    """Inside ``_dispatch`` (the SDK span still open): add response attributes."""
    if call.span is None:
        return
    attrs: dict[str, Any] = {}  # byte counts are added at export time (Call.wire_attrs via defer)
    if call.sent is not None and call.received is not None:
        attrs["promcp.wire_rtt_ms"] = call.sent.ms_to(call.received)
    call.span.set_attributes(attrs)


def on_finish(call: Call, error_type: str | None) -> None:
    """After the call: mark tool errors; end a span the shims started themselves (never the SDK's)."""
    span = call.span
    if span is None:
        return
    # (the SDK's own span has ended by now: a tool error is added to it at export time, see promcp.shims._mcpevents)
    if call.own_span:
        if error_type:
            from opentelemetry.trace import StatusCode

            span.set_attribute("error.type", error_type)
            span.set_status(StatusCode.ERROR)
        span.end()


def chat_span(provider: str, model: str | None) -> Any:
    """A ``chat {model}`` CLIENT span for one LLM call (None when no tracer is set up)."""
    if _tracer is None:
        return None
    from opentelemetry.trace import SpanKind

    return _tracer.start_span(
        f"chat {model}" if model else "chat",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            **({"gen_ai.request.model": model} if model else {}),
        },
    )


def span_ids(span: Any) -> dict[str, Any]:
    """``trace_id`` / ``span_id`` / ``parent_span_id`` columns of the events a span stands for."""
    if span is None:
        return {}
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return {}
    parent = getattr(span, "parent", None)
    return {
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": f"{parent.span_id:016x}" if parent is not None else None,
    }


def end_chat_span(span: Any, out: Output | None, error_type: str | None, message: str | None) -> None:
    """Finish a chat span with the GenAI response and usage attributes."""
    from opentelemetry.trace import StatusCode

    attrs: dict[str, Any] = {}
    if out is not None:
        usage = out.usage
        attrs.update(
            {
                "gen_ai.response.model": out.model,
                "gen_ai.response.id": out.response_id,
                "gen_ai.response.finish_reasons": [out.finish_reason] if out.finish_reason else None,
                "gen_ai.usage.input_tokens": usage.input_tokens if usage else None,
                "gen_ai.usage.output_tokens": usage.output_tokens if usage else None,
                "gen_ai.usage.cache_read.input_tokens": (usage.cache_read_tokens or None) if usage else None,
                "gen_ai.usage.cache_creation.input_tokens": (usage.cache_write_tokens or None)
                if usage
                else None,
                "promcp.stage": (Stage.S2 if out.tool_calls else Stage.S6).value,
                "gen_ai.tool.call.id": out.tool_calls[0].id if out.tool_calls else None,
            }
        )
    if error_type is not None:
        attrs["error.type"] = error_type
        span.set_status(StatusCode.ERROR, message or error_type)
    span.set_attributes({k: v for k, v in attrs.items() if v is not None})
    span.end()


def defer(span: Any, build: Callable[[], dict[str, Any]]) -> None:
    """Attach attributes to ``span`` when it is exported (``build`` runs on the exporter's thread)."""
    if span is None or not deferred.enabled:
        return
    ctx = span.get_span_context()
    with deferred.lock:
        earlier = deferred.by_span.get(ctx.span_id)
        if earlier is not None:  # several builders for one span: merge their attributes
            build = _merged(earlier, build)
        if len(deferred.by_span) < _MAX_DEFERRED:
            deferred.by_span[ctx.span_id] = build


def _merged(
    first: Callable[[], dict[str, Any]], second: Callable[[], dict[str, Any]]
) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        return {**(guard(first) or {}), **(guard(second) or {})}

    return build


class TokenEnrichingExporter:
    """Wraps a SpanExporter: adds the deferred ``promcp.*`` attributes to spans just before export, and the
    journal rows waiting in ``carrier``."""

    def __init__(self, inner: Any, carrier: RowCarrier | None = None) -> None:
        self.inner = inner
        self.carrier = carrier

    def export(self, spans: Sequence[Any]) -> Any:
        out = [guard(_enrich, s) or s for s in spans]
        if self.carrier is not None and out:
            chunks = self.carrier.take(len(out))
            for i, rows in enumerate(chunks):
                out[i] = guard(_with_attributes, out[i], self.carrier.attributes(rows)) or out[i]
        return self.inner.export(out)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def _enrich(span: Any) -> Any:
    with deferred.lock:
        build = deferred.by_span.pop(span.context.span_id, None)
    if build is None:
        return span
    return _with_attributes(span, {k: v for k, v in build().items() if v is not None})


def _with_attributes(span: Any, extra: dict[str, Any]) -> Any:
    """A copy of a finished span with ``extra`` attributes (ended spans are read-only)."""
    from opentelemetry.sdk.trace import ReadableSpan

    attrs = dict(span.attributes or {})
    attrs.update(extra)
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attrs,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
