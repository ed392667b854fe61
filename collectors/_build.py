"""Normalized conversations → promcp events, following the accounting rules (docs/accounting.md).

Per task: the first LLM call's input is S1, later ones S5; each call's output is S2 (it asked for tools) or S6
(it answered); each tool use is S3 + S4 joined by ``tool_call_id``. The input of each call is rebuilt the way the
client re-sends a conversation: system/injected context (``system``), earlier prompts and outputs (``history``,
keys ``msg:<index>``), results of every earlier tool call (``tool_results``, key = call id), and this task's prompt
and attachments (``user``, ``prompt`` / ``attachment:<name>``). Exports hold no tool definitions, so ``schemas``
is not observable (``attrs.schemas_observable = false``) unless a source saw them for a call
(``Call.context``: the Gemini CLI's spans carry its function declarations and system instruction). With provider usage (Claude Code) ``tokens_in`` is the
provider total. The export lacks what the client sent besides the conversation (its system prompt, the tool
definitions, project memory), so when the provider total exceeds the local counts the difference is recorded as a
``system`` part keyed ``unobserved`` instead of being spread over the observed origins; only when the local counts
exceed the total (an over-estimating tokenizer) are they scaled down to it (``attrs.origin_scale``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.events import Event, Origin, Part, Stage, Status, TimingQuality, TokenSource, scale_parts
from promcp.stages import PutText, usage_attrs, usage_columns
from promcp.tokenizers import CachedTokenizer


def _timing(span: Span) -> dict[str, Any]:
    ms = span.ms
    if ms is None:
        return {
            "t_start_ns": span.start,
            "t_end_ns": span.end if _ordered(span) else None,
            "latency_ms": None,
            "timing_quality": TimingQuality.NONE,
        }
    return {"t_start_ns": span.start, "t_end_ns": span.end, "latency_ms": ms, "timing_quality": span.quality}


def _ordered(span: Span) -> bool:
    return span.start is not None and span.end is not None and span.end >= span.start


class Builder:
    """Builds the events of conversations for one import (one tokenizer, one provider label)."""

    def __init__(self, tokenizer: CachedTokenizer, *, provider: str, put_text: PutText | None = None) -> None:
        self.tok = tokenizer
        self.provider = provider
        self.put_text = put_text
        self.tasks = 0

    def count(self, text: str) -> int:
        return self.tok.count(text) if text else 0

    def events(self, conv: Conversation) -> Iterator[Event]:
        history: list[Part] = []  # what earlier tasks left in the context
        msg_index = [0]
        for n, task in enumerate(conv.tasks, start=1):
            yield from self._task(conv, task, f"{conv.id}#{n}", history, msg_index)
            self.tasks += 1

    def _task(
        self, conv: Conversation, task: Task, task_id: str, history: list[Part], msg_index: list[int]
    ) -> Iterator[Event]:
        common: dict[str, Any] = {"task_id": task_id, "provider": self.provider, "tokenizer": self.tok.name}
        system: list[Part] = []
        if conv.system:
            system.append(Part(Origin.SYSTEM, "system", self.count(conv.system)))
        for source, text in task.injected:
            system.append(Part(Origin.SYSTEM, f"injected:{source}", self.count(text)))
        user = [Part(Origin.USER, "prompt", self.count(task.prompt))]
        for name, text in task.attachments:
            user.append(Part(Origin.USER, f"attachment:{name}", self.count(text)))
        for name, tokens in task.attachment_tokens:
            user.append(Part(Origin.USER, f"attachment:{name}", max(int(tokens), 0)))
        prompt_hash = self.put_text("prompt", task.prompt) if self.put_text and task.prompt else None
        this_task: list[Part] = []
        for rnd, call in enumerate(task.calls, start=1):
            model = call.model or conv.model
            for key, text in call.extra_context:
                this_task.append(Part(Origin.TOOL_RESULTS, key, self.count(text)))
            seen = [Part(p.origin, p.key, self.count(p.text)) for p in call.context]
            yield self._input(
                conv,
                task,
                call,
                rnd,
                [*system, *seen, *history, *user, *this_task],
                prompt_hash,
                model,
                common,
            )
            out_text = _output_text(call)
            yield self._output(task, call, rnd, out_text, model, common)
            msg_index[0] += 1
            this_task.append(Part(Origin.HISTORY, f"msg:{msg_index[0]}", self.count(out_text)))
            for i, use in enumerate(call.tools):
                key = use.call_id or f"{task_id}:{rnd}:{i}"
                yield from self._tool(use, key, rnd, model, common)
                if use.result is not None:
                    this_task.append(Part(Origin.TOOL_RESULTS, key, self.count(use.result)))
        for i, use in enumerate(
            task.unplaced
        ):  # no call to hang them on: S3/S4 without a round, said in attrs
            use.attrs["unplaced"] = True
            yield from self._tool(use, use.call_id or f"{task_id}:unplaced:{i}", None, None, common)
        # the next task sees this prompt (and attachments) as history, this task's outputs and results as they were
        msg_index[0] += 1
        history.append(Part(Origin.HISTORY, f"msg:{msg_index[0]}", sum(p.tokens for p in user)))
        history.extend(this_task)

    def _input(
        self,
        conv: Conversation,
        task: Task,
        call: Call,
        rnd: int,
        parts: list[Part],
        prompt_hash: str | None,
        model: str | None,
        common: dict[str, Any],
    ) -> Event:
        schemas = any(p.origin is Origin.SCHEMAS for p in call.context)
        attrs: dict[str, Any] = {"conversation": conv.id, "schemas_observable": schemas}
        if rnd == 1 and prompt_hash:
            attrs["content"] = prompt_hash
        if task.attrs.get("prompt_missing"):
            attrs["prompt_missing"] = True
        source = self.tok.source
        tokenizer: str | None = self.tok.name
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
                attrs["origin_scale"] = round(total / local, 6) if local else None
                parts = scale_parts(parts, total)
            source = TokenSource.PROVIDER
        timing = _timing(call.prefill)
        if timing["latency_ms"] is None:  # split unknown: the whole call is on the output event
            start = task.at if rnd == 1 else None
            timing = {
                "t_start_ns": start,
                "t_end_ns": start,
                "latency_ms": None,
                "timing_quality": TimingQuality.NONE,
            }
        return Event(
            stage=Stage.S1 if rnd == 1 else Stage.S5,
            round=rnd,
            parts=parts,
            token_source=source,
            model=model,
            attrs=attrs,
            **cache,
            **{**common, "tokenizer": tokenizer},
            **timing,
        )

    def _output(
        self, task: Task, call: Call, rnd: int, out_text: str, model: str | None, common: dict[str, Any]
    ) -> Event:
        final = not call.tools
        attrs: dict[str, Any] = dict(call.attrs)
        reasoning: int | None = None
        if call.usage is not None and call.usage.output_tokens is not None:
            tokens, source = call.usage.output_tokens, TokenSource.PROVIDER
            reasoning = call.usage.reasoning_tokens
            attrs["tokens_out_estimate"] = self.count(out_text)
        else:
            tokens, source = self.count(out_text), self.tok.source
        if call.thinking:
            attrs["thinking_tokens_estimate"] = self.count(call.thinking)
        if final and self.put_text and call.output_text:
            attrs["content"] = self.put_text("answer", call.output_text)
        if final and task.check_ms is not None:
            attrs["turn_duration_ms"] = task.check_ms
            if task.at is not None and call.span.end is not None:
                attrs["reconstructed_turn_ms"] = round((call.span.end - task.at) / 1e6, 3)
        first = call.tools[0] if call.tools else None
        return Event(
            stage=Stage.S6 if final else Stage.S2,
            round=rnd,
            tokens_out=max(int(tokens), 0),
            reasoning_tokens=reasoning,
            token_source=source,
            model=model,
            resp_preview=out_text or None,
            tool_call_id=(first.call_id if first else None),
            tool=(first.tool if first else None),
            server=(first.server if first else None),
            attrs=attrs or None,
            **common,
            **_timing(call.span),
        )

    def _tool(
        self, use: ToolUse, key: str, rnd: int | None, model: str | None, common: dict[str, Any]
    ) -> Iterator[Event]:
        who: dict[str, Any] = {
            "server": use.server,
            "tool": use.tool,
            "tool_call_id": key,
            "mcp_method": "tools/call" if use.mcp else None,
            "round": rnd,
            "model": model,
            "token_source": self.tok.source,
        }
        attrs: dict[str, Any] = {"mcp": use.mcp, "client_name": use.name, **use.attrs}
        # telemetry gives sizes, not texts: bytes as reported, tokens unknown
        seen = use.attrs.get("texts_observed") is not False
        yield Event(
            stage=Stage.S3,
            footprint_tokens=self.count(use.arguments) if seen else None,
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
                error_type="no_result",
                attrs={**attrs, "note": "the export holds no result for this call (stopped or lost)"},
                timing_quality=TimingQuality.NONE,
                **who,
                **common,
            )
            return
        result_attrs = dict(attrs)
        if self.put_text and seen:
            result_attrs["content"] = self.put_text("result", use.result)
        yield Event(
            stage=Stage.S4,
            footprint_tokens=self.count(use.result) if seen else None,
            footprint_bytes=len(use.result.encode("utf-8", "replace"))
            if seen
            else use.attrs.get("result_bytes"),
            resp_preview=use.result or None,
            status=Status.ERROR if use.is_error else Status.OK,
            error_type=(str(use.attrs.get("error_type") or "is_error") if use.is_error else None),
            attrs=result_attrs,
            **who,
            **common,
            **_timing(use.result_span),
        )


def _output_text(call: Call) -> str:
    """What the model generated: thinking, text and each tool call (name + arguments as JSON)."""
    pieces = [p for p in (call.thinking, call.output_text) if p]
    for use in call.tools:
        pieces.append(json.dumps({"name": use.name, "input": use.arguments}, ensure_ascii=False))
    return "\n".join(pieces)
