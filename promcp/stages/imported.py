"""An exported conversation's LLM calls and tool uses → S1–S6 events: docs/import.md "What becomes an event" and
docs/accounting.md, implemented here once for every importer (``promcp import`` and the conversations ``promcp
collect`` rebuilds from telemetry logs).

An export shows what the client kept, not what it sent, so the rules differ from a live call's
(:mod:`promcp.stages.llm`) in three places:

* input (S1 when ``round == 1``, else S5): ``parts`` are the context as the importer rebuilt it (counted). With
  provider usage the provider's total is ground truth: when it exceeds the local counts the difference is a
  ``system`` part keyed ``unobserved`` (what the export does not show: the client's system prompt, the tool
  definitions, project memory) instead of being spread over the observed origins; only when the local counts exceed
  it (an over-estimating tokenizer) are they scaled down to it (``attrs.origin_scale``). ``attrs.tokens_in_estimate``
  keeps the local sum, ``attrs.schemas_observable = false`` unless a source saw the tool definitions (``ImportedCall.context``). Its timing is the ``prefill`` interval when the export
  bounds it; otherwise the split is unknown: the whole call is on the output event and the input event has no
  latency (``timing_quality = none``, placed at the prompt on S1);
* output (S2 when the call asked for tools, else S6): ``tokens_out`` from the provider (``attrs.tokens_out_estimate``
  = the local count), else counted on :func:`imported_output_text`;
* tools: S3 + S4 per tool use, keyed by the call id; a use without a result is an S4 ``cancelled`` / ``no_result``;
  a result marked as an error is ``error`` / ``tool_error`` (the export's own error type, when it names one, stays
  in ``attrs.error_type``). Telemetry that reports sizes but no texts (``attrs.texts_observed = false``) gives
  bytes as reported and unknown tokens.

Times are wall-clock ns in an :class:`Interval` whose ``quality`` says how far to trust it.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from promcp.events import (
    NO_RESULT,
    TOOL_ERROR,
    Event,
    Origin,
    Part,
    Stage,
    Status,
    TimingQuality,
    TokenSource,
    scale_parts,
)
from promcp.stages._common import PutText
from promcp.stages.llm import usage_attrs, usage_columns
from promcp.tokenizers import CachedTokenizer
from promcp.wire import Piece, Usage

__all__ = [
    "ImportContext",
    "ImportedCall",
    "ImportedToolUse",
    "Interval",
    "imported_input_event",
    "imported_output_event",
    "imported_output_text",
    "imported_tool_events",
]


@dataclass
class Interval:
    """A time interval on one clock. ``start``/``end`` are wall-clock ns; ``quality`` says how far to trust it."""

    start: int | None = None
    end: int | None = None
    quality: TimingQuality = TimingQuality.NONE

    @property
    def ms(self) -> float | None:
        if (
            self.quality is TimingQuality.NONE
            or self.start is None
            or self.end is None
            or self.end < self.start
        ):
            return None
        return (self.end - self.start) / 1e6

    @property
    def ordered(self) -> bool:
        return self.start is not None and self.end is not None and self.end >= self.start


@dataclass
class ImportedToolUse:
    """One tool call the model made and (if it came back) its result."""

    call_id: str | None
    name: str  # as the client names it (``Linear:save_issue``, ``mcp__github__create_issue``, ``python``)
    tool: str  # the tool's own name
    server: str | None  # MCP server / connector / integration; None for a first-party tool
    mcp: bool
    arguments: str  # the request as the model wrote it (JSON text)
    result: str | None = None  # the result content the model saw; None: no result (stopped, lost)
    is_error: bool = False
    call_span: Interval = field(default_factory=Interval)  # S3: dispatch
    result_span: Interval = field(default_factory=Interval)  # S4: dispatch → result
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ImportedCall:
    """One LLM call: what it wrote (text, thinking) and the tools it asked for (none: the final answer).

    ``span`` is its output (generation, or the whole call when the split is unknown); ``prefill`` bounds the
    prompt processing when a source shows when the first output block started.
    """

    output_text: str = ""
    thinking: str = ""
    tools: list[ImportedToolUse] = field(default_factory=list)
    span: Interval = field(default_factory=Interval)
    prefill: Interval = field(default_factory=Interval)
    usage: Usage | None = None  # provider usage (Claude Code); input_tokens includes cache reads and writes
    model: str | None = None
    extra_context: list[tuple[str, str]] = field(default_factory=list)  # (key, text): orphan results etc.
    #: what a source saw of this call's input besides the conversation (the Gemini CLI's spans: its system
    #: instruction and function declarations), re-sent with every call: counted for this call only
    context: list[Piece] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ImportContext:
    """What is the same for every event of one import: the tokenizer, the provider label, content capture."""

    tokenizer: CachedTokenizer
    provider: str
    put_text: PutText | None = None

    def count(self, text: str) -> int:
        return self.tokenizer.count(text) if text else 0


def _timing(span: Interval) -> dict[str, Any]:
    ms = span.ms
    if ms is None:
        return {
            "t_start_ns": span.start,
            "t_end_ns": span.end if span.ordered else None,
            "latency_ms": None,
            "timing_quality": TimingQuality.NONE,
        }
    return {"t_start_ns": span.start, "t_end_ns": span.end, "latency_ms": ms, "timing_quality": span.quality}


def _common(ctx: ImportContext, task_id: str) -> dict[str, Any]:
    return {"task_id": task_id, "provider": ctx.provider, "tokenizer": ctx.tokenizer.name}


def imported_output_text(call: ImportedCall) -> str:
    """What the model generated, as counted: thinking, text and each tool call (name + arguments as JSON)."""
    pieces = [p for p in (call.thinking, call.output_text) if p]
    for use in call.tools:
        pieces.append(json.dumps({"name": use.name, "input": use.arguments}, ensure_ascii=False))
    return "\n".join(pieces)


def imported_input_event(
    ctx: ImportContext,
    call: ImportedCall,
    *,
    task_id: str,
    round: int,
    parts: Sequence[Part],
    model: str | None,
    conversation: str,
    prompt_at: int | None,
    prompt_content: str | None = None,
    prompt_missing: bool = False,
) -> Event:
    """The input event (S1/S5) of ``call``, whose context the importer rebuilt as ``parts``. ``prompt_at``: the
    prompt's wall-clock ns (where S1 sits when the prefill is unknown); ``prompt_content``: the captured prompt's
    hash (S1's ``attrs.content``)."""
    schemas = any(p.origin is Origin.SCHEMAS for p in call.context)  # tool definitions a source saw
    attrs: dict[str, Any] = {"conversation": conversation, "schemas_observable": schemas}
    if round == 1 and prompt_content:
        attrs["content"] = prompt_content
    if prompt_missing:
        attrs["prompt_missing"] = True
    parts = list(parts)
    source = ctx.tokenizer.source
    cache: dict[str, Any] = {}
    if call.usage is not None and call.usage.input_tokens is not None:
        cache = usage_columns(call.usage)
        total = call.usage.input_tokens
        local = sum(p.tokens for p in parts)
        attrs["tokens_in_estimate"] = local
        attrs.update(usage_attrs(call.usage))
        if total >= local:  # the rest is context the export does not show (system prompt, tool schemas…)
            parts = [*parts, Part(Origin.SYSTEM, "unobserved", total - local)]
        else:
            attrs["origin_scale"] = builtins.round(total / local, 6) if local else None
            parts = scale_parts(parts, total)
        source = TokenSource.PROVIDER
    timing = _timing(call.prefill)
    if timing["latency_ms"] is None:  # split unknown: the whole call is on the output event
        start = prompt_at if round == 1 else None
        timing = {
            "t_start_ns": start,
            "t_end_ns": start,
            "latency_ms": None,
            "timing_quality": TimingQuality.NONE,
        }
    return Event(
        stage=Stage.S1 if round == 1 else Stage.S5,
        round=round,
        parts=parts,
        token_source=source,
        model=model,
        attrs=attrs,
        **cache,
        **_common(ctx, task_id),
        **timing,
    )


def imported_output_event(
    ctx: ImportContext,
    call: ImportedCall,
    *,
    task_id: str,
    round: int,
    text: str,
    model: str | None,
    prompt_at: int | None = None,
    turn_ms: float | None = None,
) -> Event:
    """The output event (S2 when the call asked for tools, else S6) of ``call``; ``text`` is
    :func:`imported_output_text`. On S6: ``turn_ms`` (the client's own duration of the turn) goes to
    ``attrs.turn_duration_ms`` beside ``attrs.reconstructed_turn_ms`` (prompt → end of the answer)."""
    final = not call.tools
    attrs: dict[str, Any] = dict(call.attrs)
    reasoning: int | None = None
    if call.usage is not None and call.usage.output_tokens is not None:
        tokens, source = call.usage.output_tokens, TokenSource.PROVIDER
        reasoning = call.usage.reasoning_tokens
        attrs["tokens_out_estimate"] = ctx.count(text)
    else:
        tokens, source = ctx.count(text), ctx.tokenizer.source
    if call.thinking:
        attrs["thinking_tokens_estimate"] = ctx.count(call.thinking)
    if final and ctx.put_text and call.output_text:
        attrs["content"] = ctx.put_text("answer", call.output_text)
    if final and turn_ms is not None:
        attrs["turn_duration_ms"] = turn_ms
        if prompt_at is not None and call.span.end is not None:
            attrs["reconstructed_turn_ms"] = builtins.round((call.span.end - prompt_at) / 1e6, 3)
    first = call.tools[0] if call.tools else None
    return Event(
        stage=Stage.S6 if final else Stage.S2,
        round=round,
        tokens_out=max(int(tokens), 0),
        reasoning_tokens=reasoning,
        token_source=source,
        model=model,
        resp_preview=text or None,
        tool_call_id=(first.call_id if first else None),
        tool=(first.tool if first else None),
        server=(first.server if first else None),
        attrs=attrs or None,
        **_common(ctx, task_id),
        **_timing(call.span),
    )


def imported_tool_events(
    ctx: ImportContext, use: ImportedToolUse, *, task_id: str, key: str, round: int | None, model: str | None
) -> Iterator[Event]:
    """S3 and S4 of one tool use, keyed ``key`` (the call id, or one the importer made up); ``round`` None for a
    use no call could be matched to (``attrs.unplaced``)."""
    who: dict[str, Any] = {
        "server": use.server,
        "tool": use.tool,
        "tool_call_id": key,
        "mcp_method": "tools/call" if use.mcp else None,
        "round": round,
        "model": model,
        "token_source": ctx.tokenizer.source,
    }
    attrs: dict[str, Any] = {"mcp": use.mcp, "client_name": use.name, **use.attrs}
    common = _common(ctx, task_id)
    # telemetry gives sizes, not texts: bytes as reported, tokens unknown
    seen = use.attrs.get("texts_observed") is not False
    yield Event(
        stage=Stage.S3,
        footprint_tokens=ctx.count(use.arguments) if seen else None,
        footprint_bytes=len(use.arguments.encode("utf-8", "replace"))
        if seen
        else use.attrs.get("arguments_bytes"),
        req_preview=use.arguments or None,
        attrs=attrs,
        **who,
        **common,
        **_timing(use.call_span),
    )
    if use.result is None:
        yield Event(
            stage=Stage.S4,
            status=Status.CANCELLED,
            error_type=NO_RESULT,
            attrs={**attrs, "note": "the export holds no result for this call (stopped or lost)"},
            timing_quality=TimingQuality.NONE,
            **who,
            **common,
        )
        return
    result_attrs = dict(attrs)
    if ctx.put_text and seen:
        result_attrs["content"] = ctx.put_text("result", use.result)
    yield Event(
        stage=Stage.S4,
        footprint_tokens=ctx.count(use.result) if seen else None,
        footprint_bytes=len(use.result.encode("utf-8", "replace")) if seen else use.attrs.get("result_bytes"),
        resp_preview=use.result or None,
        status=Status.ERROR if use.is_error else Status.OK,
        error_type=TOOL_ERROR if use.is_error else None,
        attrs=result_attrs,
        **who,
        **common,
        **_timing(use.result_span),
    )
