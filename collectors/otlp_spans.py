"""OTLP trace spans → promcp events: promcp's own spans back into the rows they carry, and the spans of other
instrumentations (the mcp SDK's ``MCP send …`` spans, OpenTelemetry GenAI ``chat`` spans) into the stages they
stand for, built by :mod:`promcp.stages` like every other source.

======================================  =====================================================================
span                                    events
======================================  =====================================================================
``promcp.events`` attribute             the journal rows ``promcp.instrument()`` carried (:mod:`promcp.shims._spans`),
                                        exactly as journaled: same run id, ``seq`` and every column; the other
                                        spans of such a sender (resource ``promcp.run.id``) map to nothing more
CLIENT span with ``mcp.method.name``    ``tools/call``: S3 (at the span's start) + S4 (start → end, exact);
                                        ``initialize`` / ``server/discover``: INIT ``initialize``; ``tools/list``:
                                        INIT ``tools_discovery``; another method: an MCP ``protocol`` event
span with ``gen_ai.operation.name``     ``chat`` / ``text_completion`` / ``generate_content``: the input event (S1
                                        for a trace's first call, else S5) with ``gen_ai.usage.*`` as provider
                                        usage (cache read / creation included) and the output event (S2 when the
                                        finish reasons ask for tools, else S6) over the span (exact);
                                        ``execute_tool`` without ``mcp.method.name``: S3 + S4 of a non-MCP tool
======================================  =====================================================================

A trace is a task (``task_id`` = the trace id), every event keeps its span's ``trace_id`` / ``span_id`` /
``parent_span_id``. Token counts come from promcp's enrichment when present (``promcp.request.tokens``,
``promcp.footprint.tokens``, ``promcp.tokenizer``: ``token_source = tokenizer``), from ``gen_ai.usage.*``
(``provider``), else they are unknown (``token_source = none``): other instrumentations do not export the texts.
SERVER spans (the server's side of the same call) and other spans are counted, not mapped, so a call instrumented on
both ends is not counted twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from promcp import stages
from promcp.errors import ImportFormatError
from promcp.events import (
    Direction,
    Event,
    Origin,
    Part,
    Status,
    TokenSource,
    Transport,
)
from promcp.stages import Counted, Failure, Instant, LLMCall, ToolsCall
from promcp.tokenizers import CachedTokenizer
from promcp.wire import Output, ToolCall, Usage, carried
from promcp.wire.mcp import Handshake

__all__ = ["CarriedRows", "SpanMapper", "SpanRecord", "carried_rows", "request_batches", "span_records"]

_CLIENT: Final = 3  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_CLIENT
_SERVER: Final = 2
_STATUS_ERROR: Final = 2
_CHAT_OPS: Final = frozenset({"chat", "text_completion", "generate_content"})
_TOOL_FINISH: Final = frozenset({"tool_calls", "tool_use", "function_call"})
_TRANSPORTS: Final = {
    "stdio": Transport.STDIO,
    "pipe": Transport.STDIO,
    "streamable_http": Transport.STREAMABLE_HTTP,
    "sse": Transport.SSE,
    "inproc": Transport.INPROC,
}


@dataclass
class SpanRecord:
    """One OTLP span, flattened: ids as hex, times in ns, attributes and its resource's attributes as dicts."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)
    status_code: int = 0
    status_message: str = ""


def span_records(request: Any) -> Iterator[SpanRecord]:
    """Every span of an ``ExportTraceServiceRequest``."""
    from promcp.collectors.otlp import attributes

    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield SpanRecord(
                    name=s.name,
                    kind=int(s.kind),
                    trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(),
                    parent_span_id=s.parent_span_id.hex() or None,
                    start_ns=int(s.start_time_unix_nano),
                    end_ns=int(s.end_time_unix_nano),
                    attrs=attributes(s.attributes),
                    resource=resource,
                    status_code=int(s.status.code),
                    status_message=s.status.message,
                )


@dataclass
class CarriedRows:
    """The rows one span carried and the header of the run they belong to."""

    run: dict[str, Any]
    rows: list[Event]


def carried_rows(span: SpanRecord) -> CarriedRows | None:
    """The journal rows ``span`` carries (None when it carries none; the format is :mod:`promcp.wire.carried`).
    Raises :class:`ImportFormatError` naming the span when they do not decode (a truncating
    ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, say)."""
    try:
        found = carried.decode(span.attrs)
    except ValueError as exc:
        raise ImportFormatError(f"span {span.span_id} ({span.name!r}): {exc}") from None
    return None if found is None else CarriedRows(*found)


def request_batches(
    spans: Iterable[SpanRecord], mapper: SpanMapper, problem: Callable[[ImportFormatError], None]
) -> Iterator[tuple[dict[str, Any], CarriedRows | None, list[Event]]]:
    """What one trace request holds, for a receiver or an import to write (collectors/otlp_runs.py): each span's
    carried rows as ``(resource, rows, [])``, then the mapped events grouped by sender as ``(resource, None,
    events)`` (one batch per sender: journaled with one write). Spans are taken in start order, so a trace's first
    LLM call is its S1 whatever order the exporter sent them in; a span whose rows do not decode goes to
    ``problem`` and the rest are kept."""
    by_sender: dict[str, tuple[dict[str, Any], list[Event]]] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        try:
            rows = carried_rows(span)
        except ImportFormatError as exc:
            problem(exc)
            continue
        if rows is not None:
            yield span.resource, rows, []
            continue
        events = mapper.events(span)
        if events:
            key = repr(sorted(span.resource.items()))
            by_sender.setdefault(key, (span.resource, []))[1].extend(events)
    for resource, events in by_sender.values():
        yield resource, None, events


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        return max(int(v), 0)
    except (TypeError, ValueError):
        return None


def _str(v: Any) -> str | None:
    return str(v) if v not in (None, "") else None


class SpanMapper:
    """Spans of other instrumentations → events (one mapper per receiver: it remembers, per trace, how many LLM
    calls it has seen, to tell S1 from S5; at most ``max_traces`` traces are remembered)."""

    def __init__(self, tokenizer: CachedTokenizer, *, max_traces: int = 100_000) -> None:
        self.tok = tokenizer  # only drives the builders: counts are taken from the spans, never from texts
        self.max_traces = max_traces
        self._rounds: OrderedDict[str, dict[str, int]] = OrderedDict()  # trace → span → call number
        self.unmapped: dict[str, int] = {}

    def events(self, span: SpanRecord) -> list[Event]:
        """The events ``span`` stands for (empty for a span that maps to none: counted in :attr:`unmapped`)."""
        a = span.attrs
        method = _str(a.get("mcp.method.name"))
        op = _str(a.get("gen_ai.operation.name"))
        if span.resource.get(carried.RUN_RESOURCE):  # promcp's own: its rows arrive carried, exactly
            self.unmapped["promcp span (rows carried)"] = (
                self.unmapped.get("promcp span (rows carried)", 0) + 1
            )
            return []
        if span.kind == _SERVER or span.end_ns < span.start_ns:
            events: list[Event] = []
        elif method is not None:
            events = self._mcp(span, method)
        elif op in _CHAT_OPS:
            events = self._chat(span)
        elif op == "execute_tool":
            events = self._tool(span, mcp=False)
        else:
            events = []
        if not events:
            why = "server span" if span.kind == _SERVER else (method or op or "other")
            self.unmapped[why] = self.unmapped.get(why, 0) + 1
            return []
        ids = {"trace_id": span.trace_id, "span_id": span.span_id, "parent_span_id": span.parent_span_id}
        return [e.replace(task_id=e.task_id or span.trace_id, **ids) for e in events]

    # -- MCP ------------------------------------------------------------------------------------------------------

    @staticmethod
    def _instants(span: SpanRecord) -> tuple[Instant, Instant]:
        # the exporter's two wall-clock readings; their difference is the span's duration, as measured
        return Instant(span.start_ns, span.start_ns), Instant(span.end_ns, span.end_ns)

    @staticmethod
    def _failure(span: SpanRecord) -> Failure | None:
        error = _str(span.attrs.get("error.type"))
        if span.status_code != _STATUS_ERROR and error is None:
            return None
        if error == "tool_error":
            return None  # an isError result: the S4 carries it (see _tool)
        kind = error or "error"
        return Failure(
            Status.TIMEOUT if "timeout" in kind.lower() else Status.ERROR, kind, span.status_message or None
        )

    @staticmethod
    def _server(span: SpanRecord) -> str | None:
        return _str(span.attrs.get("promcp.server")) or _str(span.attrs.get("server.address"))

    @staticmethod
    def _transport(span: SpanRecord) -> Transport | None:
        name = _str(span.attrs.get("promcp.transport")) or _str(span.attrs.get("network.transport"))
        return _TRANSPORTS.get(name or "")

    @staticmethod
    def _counted(event: Event, span: SpanRecord, key: str | None) -> Event:
        """The event with the span's own token count (promcp's enrichment under ``key``) or none at all."""
        n = _int(span.attrs.get(key)) if key is not None else None
        if n is None:
            return event.replace(footprint_tokens=None, token_source=TokenSource.NONE, tokenizer=None)
        tokenizer = _str(span.attrs.get("promcp.tokenizer"))
        return event.replace(footprint_tokens=n, token_source=TokenSource.TOKENIZER, tokenizer=tokenizer)

    def _mcp(self, span: SpanRecord, method: str) -> list[Event]:
        if span.kind != _CLIENT:
            return []
        a = span.attrs
        start, end = self._instants(span)
        failure = self._failure(span)
        common: dict[str, Any] = {
            "server": self._server(span),
            "transport": self._transport(span),
            "jsonrpc_id": _str(a.get("jsonrpc.request.id")),
            "protocol_version": _str(a.get("mcp.protocol.version")),
        }
        if method == "tools/call":
            return self._tool(span, mcp=True)
        if method in ("initialize", "server/discover"):
            return [
                stages.initialize_event(
                    start=start,
                    end=end,
                    handshake=Handshake(protocol_version=common.pop("protocol_version")),
                    method=method,
                    response_bytes=_int(a.get("promcp.response.bytes")),
                    request_bytes=_int(a.get("promcp.request.bytes")),
                    failure=failure,
                    **common,
                )
            ]
        if method == "tools/list":
            event = stages.tools_discovery_event(
                start=start,
                end=end,
                tools=[],
                tokenizer=self.tok,
                response_bytes=_int(a.get("promcp.response.bytes")),
                failure=failure,
                **common,
            )
            n_tools = _int(a.get("promcp.n_tools"))
            event = self._counted(event, span, "promcp.footprint.tokens" if failure is None else None)
            return [
                event.replace(
                    footprint_bytes=_int(a.get("promcp.footprint.bytes")),
                    attrs={**(event.attrs or {}), **({"n_tools": n_tools} if n_tools is not None else {})}
                    or None,
                )
            ]
        return [
            stages.message_event(
                method=method,
                direction=Direction.CLIENT_TO_SERVER,
                start=start,
                end=end,
                request_bytes=_int(a.get("promcp.request.bytes")),
                response_bytes=_int(a.get("promcp.response.bytes")),
                failure=failure,
                **common,
            )
        ]

    def _tool(self, span: SpanRecord, *, mcp: bool) -> list[Event]:
        a = span.attrs
        start, end = self._instants(span)
        tool = _str(a.get("gen_ai.tool.name"))
        if tool is None:  # "MCP send tools/call <tool>" / "execute_tool <tool>" / "tools/call <tool>"
            words = span.name.split()
            tool = words[-1] if len(words) > 1 else "tool"
        failure = self._failure(span)
        result = {"content": [], "isError": True} if _str(a.get("error.type")) == "tool_error" else None
        call = ToolsCall(
            tool=tool,
            start=start,
            end=end,
            tokenizer=self.tok,
            sent=start,
            received=end,
            server=self._server(span) if mcp else None,
            transport=self._transport(span) if mcp else None,
            tool_call_id=_str(a.get("gen_ai.tool.call.id")),
            jsonrpc_id=_str(a.get("jsonrpc.request.id")),
            protocol_version=_str(a.get("mcp.protocol.version")),
            request_bytes=_int(a.get("promcp.request.bytes")),
            response_bytes=_int(a.get("promcp.response.bytes")),
            result=result,
            forwarded_text="",
            failure=failure,
            attrs={} if mcp else {"mcp": False},
            mcp=mcp,
            counted=Counted(  # promcp's enrichment when the sender had it, else unknown
                request=_int(a.get("promcp.request.tokens")),
                result=_int(a.get("promcp.footprint.tokens")),
                tokenizer=_str(a.get("promcp.tokenizer")),
            ),
        )
        return stages.tools_call_events(call)

    # -- GenAI ----------------------------------------------------------------------------------------------------

    def _round(self, span: SpanRecord) -> int:
        """The span's LLM call number in its trace (the same again for a span sent twice)."""
        calls = self._rounds.pop(span.trace_id, None) or {}
        n = calls.setdefault(span.span_id, len(calls) + 1)
        self._rounds[span.trace_id] = calls
        while len(self._rounds) > self.max_traces:
            self._rounds.popitem(last=False)
        return n

    def _chat(self, span: SpanRecord) -> list[Event]:
        a = span.attrs
        start, end = self._instants(span)
        inp, out = _int(a.get("gen_ai.usage.input_tokens")), _int(a.get("gen_ai.usage.output_tokens"))
        usage = None
        if inp is not None or out is not None:
            reported = {
                k.removeprefix("gen_ai.usage."): v for k, v in a.items() if k.startswith("gen_ai.usage.")
            }
            usage = Usage(
                input_tokens=inp,
                output_tokens=out,
                cache_read_tokens=_int(a.get("gen_ai.usage.cache_read.input_tokens")),
                cache_write_tokens=_int(a.get("gen_ai.usage.cache_creation.input_tokens")),
                reasoning_tokens=_int(a.get("gen_ai.usage.reasoning.output_tokens")),
                source=TokenSource.PROVIDER,
                reported=reported,
            )
        reasons = a.get("gen_ai.response.finish_reasons") or []
        reasons = [str(r) for r in (reasons if isinstance(reasons, list) else [reasons])]
        asks = bool(_TOOL_FINISH.intersection(reasons)) or _str(a.get("promcp.stage")) == "S2"
        tool_calls = (
            [ToolCall(id=_str(a.get("gen_ai.tool.call.id")) or "", name="", arguments={})] if asks else []
        )
        failure = self._failure(span)
        model = _str(a.get("gen_ai.request.model")) or _str(a.get("gen_ai.response.model"))
        call = LLMCall(
            provider=_str(a.get("gen_ai.provider.name")) or _str(a.get("gen_ai.system")),
            model=model,
            round=self._round(span),
            start=start,
            end=end,
            tokenizer=self.tok,
            parts=[Part(Origin.SYSTEM, "unobserved", inp)] if inp is not None else [],
            n_tools=0,
            output=Output(
                tool_calls=tool_calls,
                finish_reason=reasons[0] if reasons else None,
                model=_str(a.get("gen_ai.response.model")),
                response_id=_str(a.get("gen_ai.response.id")),
                usage=usage,
            ),
            usage=usage,
            failure=failure,
            attrs_in={"schemas_observable": False},
            texts_observed=False,  # a span carries sizes and usage, no texts: what it does not say is unknown
        )
        return stages.llm_call_events(call)


def mapping_counts(mapper: SpanMapper) -> Mapping[str, int]:
    """Spans left out, by why (method or operation name, ``server span``, ``other``)."""
    return dict(mapper.unmapped)
