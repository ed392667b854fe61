"""One LLM call → an input event (S1 or S5) and an output event (S2 or S6): docs/accounting.md "What one LLM call
records" and "Input tokens by origin", implemented once for every source.

Input event — S1 when ``round == 1``, else S5:

* ``parts``: the prompt by origin — ``pieces`` (texts, counted here with ``tokenizer``; schema keys renamed through
  ``schema_keys``) or ``parts`` already counted (a local model's template-exact counts);
* with provider usage (``usage.input_tokens``), the provider's total is ground truth: the parts are scaled to it
  (largest remainder, :func:`promcp.events.scale_parts`), ``attrs.tokens_in_estimate`` keeps the local sum and
  ``attrs.origin_scale`` the factor; ``token_source`` is the usage's source, else the tokenizer's;
* columns ``cache_read_tokens`` / ``cache_write_tokens`` (+ the 5-minute / 1-hour split) from the provider's usage
  (:func:`usage_columns`), ``reasoning_tokens`` on the output event;
* ``attrs``: ``n_tools``; ``usage`` = the provider's usage fields as reported; ``content`` = the captured task
  prompt on S1;
* latency = the prefill (``prompt_ms``: measured time to first byte, or the server's own prefill), clamped to the
  call's total; without one, ``latency_ms`` is null with ``timing_quality = none``.

Output event — S2 when the model asked for tool calls (``tool_call_id`` / ``tool`` of the first, every id in
``attrs.tool_call_ids`` when several), else S6 (``attrs.content`` = the captured answer): ``tokens_out`` from the
provider, else counted on the output text; latency = total − prefill, so input + output = the call's wall time.

A call that failed (no response) is one input event with the failure's status, the whole call's latency, no
token counts (``attrs.tokens_in_estimate`` keeps the local count) and no output event. A prompt that does not fit
the context window is a ``context_overflow`` input event (:func:`context_overflow_event`) and is never sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promcp.events import Event, Origin, Part, Stage, Status, TimingQuality, TokenSource, scale_parts
from promcp.stages._common import Failure, PutText, outcome
from promcp.stages.clock import Instant
from promcp.tokenizers import CachedTokenizer
from promcp.wire import Output, Piece, Usage

__all__ = [
    "LLMCall",
    "context_overflow_event",
    "input_parts",
    "llm_call_events",
    "llm_input_event",
    "llm_output_event",
    "output_text",
    "usage_attrs",
    "usage_columns",
]


@dataclass
class LLMCall:
    """What a source measured around one LLM call, as plain values."""

    provider: str | None
    model: str | None  # the model the source asked for (the response's, when it differs, goes to attrs)
    round: int  # 1: the task's first call (S1); later calls are S5
    start: Instant
    end: Instant
    tokenizer: CachedTokenizer
    pieces: Sequence[Piece] = ()
    parts: Sequence[Part] | None = None
    #: tool name → schema part key (``<server>/<tool>``), for pieces keyed by the name the model saw
    schema_keys: Mapping[str, str] | None = None
    n_tools: int | None = None  # default: the number of schema pieces
    output: Output | None = None  # None: the call failed (``failure``) or its response could not be read
    usage: Usage | None = None  # default: output.usage
    total_ms: float | None = None  # the call's duration when the source timed it more closely than start/end
    prompt_ms: float | None = (
        None  # prefill / time to first byte; default: output.prompt_ms (server-reported)
    )
    failure: Failure | None = None
    context_window: int | None = None
    prompt_text: str | None = None  # the task prompt captured on S1; default: the ``prompt`` piece's text
    put_text: PutText | None = None
    attrs_in: Mapping[str, Any] | None = None
    attrs_out: Mapping[str, Any] | None = None
    #: ``trace_id`` / ``span_id`` / ``parent_span_id`` of the span the source made for the call
    span_ids: Mapping[str, str | None] | None = None
    #: False: the source saw sizes, not texts (an OTLP span): nothing is counted or previewed, a token count the
    #: provider did not report is unknown (``token_source = none``, no tokenizer), an unnamed tool call has no name
    texts_observed: bool = True

    @property
    def stage_in(self) -> Stage:
        return Stage.S1 if self.round == 1 else Stage.S5


def input_parts(call: LLMCall) -> list[Part]:
    """The prompt's parts as counted locally (``call.parts``, or ``call.pieces`` counted with the tokenizer)."""
    if call.parts is not None:
        return list(call.parts)
    keys = call.schema_keys or {}
    count = call.tokenizer.count
    return [
        Part(p.origin, keys.get(p.key, p.key) if p.origin is Origin.SCHEMAS else p.key, count(p.text))
        for p in call.pieces
    ]


def _n_tools(call: LLMCall) -> int:
    if call.n_tools is not None:
        return call.n_tools
    return sum(1 for p in call.pieces if p.origin is Origin.SCHEMAS)


def _total_ms(call: LLMCall) -> float:
    return max(call.total_ms if call.total_ms is not None else call.start.ms_to(call.end), 0.0)


def _prompt_ms(call: LLMCall) -> float | None:
    """The prefill, clamped to [0, total]: one split rule for measured and server-reported prefills."""
    prompt = call.prompt_ms
    if prompt is None and call.output is not None:
        prompt = call.output.prompt_ms
    return None if prompt is None else min(max(prompt, 0.0), _total_ms(call))


def _usage(call: LLMCall) -> Usage | None:
    if call.usage is not None:
        return call.usage
    return call.output.usage if call.output is not None else None


def _common(call: LLMCall) -> dict[str, Any]:
    return {
        "round": call.round,
        "model": call.model,
        "provider": call.provider,
        "tokenizer": call.tokenizer.name if call.texts_observed else None,
        "context_window": call.context_window,
        **(call.span_ids or {}),
    }


def _prompt_text(call: LLMCall) -> str | None:
    if call.prompt_text is not None:
        return call.prompt_text
    return next((p.text for p in call.pieces if p.origin is Origin.USER and p.key == "prompt"), None)


def llm_input_event(call: LLMCall) -> Event:
    """The input event (S1/S5) of ``call`` (counts tokens: call it off the hot path)."""
    parts = input_parts(call)
    local = sum(p.tokens for p in parts)
    attrs: dict[str, Any] = {"n_tools": _n_tools(call)}
    if call.round == 1 and call.put_text is not None and (text := _prompt_text(call)) is not None:
        attrs["content"] = call.put_text("prompt", text)
    if call.failure is not None:  # no response: the whole call on the input event, tokens unknown
        attrs.update({"tokens_in_estimate": local, **call.failure.attrs, **(call.attrs_in or {})})
        return Event(
            stage=call.stage_in,
            t_start_ns=call.start.wall_ns,
            t_end_ns=max(call.end.wall_ns, call.start.wall_ns),
            latency_ms=_total_ms(call),
            resp_preview=call.failure.message if call.texts_observed else None,
            attrs=attrs,
            **outcome(call.failure),
            **_common(call),
        )
    usage = _usage(call)
    token_source = call.tokenizer.source
    if usage is not None and usage.input_tokens is not None:
        token_source = usage.source
        if usage.input_tokens != local:
            attrs["tokens_in_estimate"] = local
            attrs["origin_scale"] = round(usage.input_tokens / local, 6) if local else None
            parts = scale_parts(parts, usage.input_tokens)
    cache: dict[str, Any] = {}
    if usage is not None:
        attrs.update(usage_attrs(usage))
        cache = usage_columns(usage)
    attrs.update(call.attrs_in or {})
    unknown = not call.texts_observed and (usage is None or usage.input_tokens is None)
    prompt_ms = _prompt_ms(call)
    return Event(
        stage=call.stage_in,
        parts=None if unknown else parts,
        token_source=TokenSource.NONE if unknown else token_source,
        t_start_ns=call.start.wall_ns,
        t_end_ns=call.start.plus_ms(prompt_ms).wall_ns if prompt_ms is not None else call.start.wall_ns,
        latency_ms=prompt_ms,
        timing_quality=TimingQuality.EXACT if prompt_ms is not None else TimingQuality.NONE,
        attrs=attrs,
        **cache,
        **_common(call),
    )


def usage_attrs(usage: Usage) -> dict[str, Any]:
    """The input event's attrs for a provider usage: ``usage`` = every field as reported. (The importers'
    builder uses it too.)"""
    return {"usage": usage.reported} if usage.reported else {}


def usage_columns(usage: Usage) -> dict[str, Any]:
    """The input event's cache columns for a provider usage (every source fills them through this): reads and
    writes (0 when the provider reported a usage but no cache use: the call was not cached), and the 5-minute /
    1-hour write split where the provider gives it."""
    if usage.input_tokens is None:
        return {}
    return {
        "cache_read_tokens": usage.cache_read_tokens or 0,
        "cache_write_tokens": usage.cache_write_tokens or 0,
        "cache_write_5m_tokens": usage.cache_write_5m_tokens,
        "cache_write_1h_tokens": usage.cache_write_1h_tokens,
    }


def output_text(output: Output) -> str:
    """What the model generated, as counted: the tool calls as JSON ``[{"name", "arguments"}]``, else the text."""
    if output.tool_calls:
        calls = [{"name": c.name, "arguments": c.join_arguments} for c in output.tool_calls]
        return json.dumps(calls, ensure_ascii=False)
    return output.text


def llm_output_event(call: LLMCall) -> Event | None:
    """The output event (S2/S6) of ``call``; ``None`` when the call failed (counts tokens: off the hot path)."""
    out = call.output
    if call.failure is not None or out is None:
        return None
    calls = out.tool_calls
    stage = Stage.S2 if calls else Stage.S6
    attrs: dict[str, Any] = {"finish_reason": out.finish_reason}
    if out.response_id:
        attrs["response_id"] = out.response_id
    if out.model and out.model != call.model:
        attrs["response_model"] = out.model
    if len(calls) > 1:
        attrs["tool_call_ids"] = [c.id for c in calls]
    text = output_text(out)
    usage = _usage(call)
    tokens_out: int | None
    if usage is not None and usage.output_tokens is not None:
        tokens_out, source = usage.output_tokens, usage.source
    elif not call.texts_observed:
        tokens_out, source = None, TokenSource.NONE
    else:
        tokens_out, source = call.tokenizer.count(text), call.tokenizer.source
    attrs.update(out.timings)
    attrs.update(call.attrs_out or {})
    if stage is Stage.S6 and call.put_text is not None:
        attrs["content"] = call.put_text("answer", text)
    prompt_ms = _prompt_ms(call)
    split = call.start.plus_ms(prompt_ms) if prompt_ms is not None else call.start
    if not call.texts_observed:
        tool_call_id, tool = (calls[0].id or None, calls[0].name or None) if calls else (None, None)
    else:
        tool_call_id, tool = (calls[0].id, calls[0].name) if calls else (None, None)
    if source is TokenSource.NONE and tokens_out is not None:
        source = TokenSource.TOKENIZER
    return Event(
        stage=stage,
        tokens_out=tokens_out,
        reasoning_tokens=usage.reasoning_tokens if usage is not None else None,
        token_source=source,
        t_start_ns=split.wall_ns,
        t_end_ns=max(call.end.wall_ns, split.wall_ns),
        latency_ms=max(_total_ms(call) - (prompt_ms or 0.0), 0.0),
        tool_call_id=tool_call_id,
        tool=tool,
        resp_preview=text if call.texts_observed else None,
        attrs=attrs,
        **_common(call),
    )


def llm_call_events(call: LLMCall) -> list[Event]:
    """The call's events in order: the input event, then the output event (absent for a failed call)."""
    out = llm_output_event(call)
    return [llm_input_event(call)] if out is None else [llm_input_event(call), out]


def context_overflow_event(call: LLMCall, parts: Sequence[Part] | None = None) -> Event | None:
    """The ``context_overflow`` input event when the prompt (``parts``, default :func:`input_parts`) plus one token
    to generate does not fit ``call.context_window``; ``None`` when it fits or the window is unknown.
    ``attrs.overflow_by`` is the prompt's tokens minus the window (0: the prompt fills it, no room to generate)."""
    window = call.context_window
    parts = list(parts) if parts is not None else input_parts(call)
    local = sum(p.tokens for p in parts)
    if window is None or local + 1 <= window:
        return None
    return Event(
        stage=call.stage_in,
        parts=parts,
        token_source=call.tokenizer.source,
        status=Status.CONTEXT_OVERFLOW,
        error_type="context_overflow",
        t_start_ns=call.start.wall_ns,
        t_end_ns=call.start.wall_ns,
        timing_quality=TimingQuality.NONE,
        attrs={"n_tools": _n_tools(call), "overflow_by": local - window, **(call.attrs_in or {})},
        **_common(call),
    )
