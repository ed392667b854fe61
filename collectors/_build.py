"""Normalized conversations → promcp events: the importer's part of docs/accounting.md, the context each call saw.

Per task: the first LLM call's input is S1, later ones S5; each call's output is S2 (it asked for tools) or S6
(it answered); each tool use is S3 + S4 joined by ``tool_call_id``. The input of each call is rebuilt the way the
client re-sends a conversation: system/injected context (``system``), earlier prompts and outputs (``history``,
keys ``msg:<index>``), results of every earlier tool call (``tool_results``, key = call id), and this task's prompt
and attachments (``user``, ``prompt`` / ``attachment:<name>``), plus what a source saw of the call's input besides the
conversation (``Call.context``: the Gemini CLI's spans carry its function declarations and system instruction). That
context and the call go to the stage builders
of :mod:`promcp.stages.imported`, which decide the events (provider totals, the ``unobserved`` part, timing, tool
results): no event is built here.
"""

from __future__ import annotations

from collections.abc import Iterator

from promcp.collectors._model import Conversation, Task
from promcp.events import Event, Origin, Part
from promcp.stages import PutText
from promcp.stages.imported import (
    ImportContext,
    imported_input_event,
    imported_output_event,
    imported_output_text,
    imported_tool_events,
)
from promcp.tokenizers import CachedTokenizer


class Builder:
    """Builds the events of conversations for one import (one tokenizer, one provider label): rebuilds each call's
    context and hands it, with the call, to the stage builders (:mod:`promcp.stages.imported`)."""

    def __init__(self, tokenizer: CachedTokenizer, *, provider: str, put_text: PutText | None = None) -> None:
        self.tok = tokenizer
        self.provider = provider
        self.put_text = put_text
        self.ctx = ImportContext(tokenizer, provider, put_text)
        self.tasks = 0

    def count(self, text: str) -> int:
        return self.ctx.count(text)

    def events(self, conv: Conversation) -> Iterator[Event]:
        history: list[Part] = []  # what earlier tasks left in the context
        msg_index = [0]
        for n, task in enumerate(conv.tasks, start=1):
            yield from self._task(conv, task, f"{conv.id}#{n}", history, msg_index)
            self.tasks += 1

    def _task(
        self, conv: Conversation, task: Task, task_id: str, history: list[Part], msg_index: list[int]
    ) -> Iterator[Event]:
        ctx = self.ctx
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
            yield imported_input_event(
                ctx,
                call,
                task_id=task_id,
                round=rnd,
                parts=[*system, *seen, *history, *user, *this_task],
                model=model,
                conversation=conv.id,
                prompt_at=task.at,
                prompt_content=prompt_hash,
                prompt_missing=bool(task.attrs.get("prompt_missing")),
            )
            out_text = imported_output_text(call)
            yield imported_output_event(
                ctx,
                call,
                task_id=task_id,
                round=rnd,
                text=out_text,
                model=model,
                prompt_at=task.at,
                turn_ms=task.check_ms,
            )
            msg_index[0] += 1
            this_task.append(Part(Origin.HISTORY, f"msg:{msg_index[0]}", self.count(out_text)))
            for i, use in enumerate(call.tools):
                key = use.call_id or f"{task_id}:{rnd}:{i}"
                yield from imported_tool_events(ctx, use, task_id=task_id, key=key, round=rnd, model=model)
                if use.result is not None:
                    this_task.append(Part(Origin.TOOL_RESULTS, key, self.count(use.result)))
        for i, use in enumerate(
            task.unplaced
        ):  # no call to hang them on: S3/S4 without a round, said in attrs
            use.attrs["unplaced"] = True
            key = use.call_id or f"{task_id}:unplaced:{i}"
            yield from imported_tool_events(ctx, use, task_id=task_id, key=key, round=None, model=None)
        # the next task sees this prompt (and attachments) as history, this task's outputs and results as they were
        msg_index[0] += 1
        history.append(Part(Origin.HISTORY, f"msg:{msg_index[0]}", sum(p.tokens for p in user)))
        history.extend(this_task)
