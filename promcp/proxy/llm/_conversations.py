"""Which task and round an LLM request belongs to, told from raw traffic alone.

A client sends whole conversations, one request per LLM call. A request **continues** a conversation when the
conversation's previous request is contained in it, in order (:func:`promcp.wire.is_subsequence` over
:func:`promcp.wire.conversation_blocks`; with the Responses API also when ``previous_response_id`` names the
conversation's last response), in the same client session (the ``X-Claude-Code-Session-Id`` header, where the
client sends one). Then:

* after a call that asked for tools, it is the next **round** of the same task (S5);
* after a final answer, it carries a new user turn: a **new task** (S1) in the same conversation;
* after a call that failed, it is a **retry** (next round, marked); the very same conversation again after a
  call that succeeded is the same prompt run anew: a new task.

A request that continues no conversation starts one. If another conversation of the same session is waiting for
its tool results at that moment (Claude Code's Agent tool runs a subagent), the new conversation is that task's
**subagent**: its own task id ``<parent>/sub<k>`` (so its rounds never mix with the parent's), ``parent_task`` set;
otherwise it is a new task. Parallel subagents are apart because each continues only its own conversation.

Known limit: two conversations of one session that start with exactly the same blocks (two subagents given the
same prompt, in flight together) cannot be told apart until they diverge: a later request is placed in the one
used last.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from promcp.stages.clock import Instant
from promcp.wire import ToolCall, is_subsequence

__all__ = ["MAX_OPEN", "Conversations", "Placement"]

#: conversations remembered (least recently used ones are forgotten past this)
MAX_OPEN = 256


@dataclass
class _Conversation:
    id: int
    session: str | None
    task_id: str
    blocks: list[str]
    rounds: int = 0
    ok: bool = True
    pending: list[ToolCall] = field(default_factory=list)  # the last call's tool calls, not yet answered
    end: Instant | None = None  # when the last call's response ended
    response_id: str | None = None
    subagents: int = 0
    used: int = 0


@dataclass(frozen=True)
class Placement:
    """Where a request goes. ``answered`` lists the tool calls of the conversation's previous call that this
    request answers (with the instant that call's response ended and its round)."""

    task_id: str
    round: int
    conversation: int
    new_task: bool
    parent_task: str | None = None
    retry: bool = False
    answered: tuple[ToolCall, ...] = ()
    answered_since: Instant | None = None
    answered_round: int | None = None


class Conversations:
    """The open conversations of one proxy (not thread-safe: one recorder thread places every request)."""

    def __init__(self, max_open: int = MAX_OPEN) -> None:
        self._open: dict[int, _Conversation] = {}
        self._ids = itertools.count(1)
        self._tasks: dict[str | None, int] = {}
        self._clock = itertools.count()
        self.max_open = max_open

    def _task_id(self, session: str | None) -> str:
        n = self._tasks.get(session, 0) + 1
        self._tasks[session] = n
        return f"{session[:8]}-{n:03d}" if session else f"task-{n:03d}"

    def _continued(
        self, session: str | None, blocks: Sequence[str], previous_response_id: str | None
    ) -> _Conversation | None:
        if previous_response_id:
            for conv in self._open.values():
                if conv.response_id == previous_response_id:
                    return conv
        best: _Conversation | None = None
        for conv in self._open.values():
            if conv.session != session or not conv.blocks or len(conv.blocks) > len(blocks):
                continue
            if best is not None and (len(conv.blocks), conv.used) <= (len(best.blocks), best.used):
                continue
            if is_subsequence(conv.blocks, blocks):
                best = conv
        return best

    def place(
        self, session: str | None, blocks: Sequence[str], *, previous_response_id: str | None = None
    ) -> Placement:
        """The task and round of a request with these conversation ``blocks`` (call :meth:`answered` after)."""
        conv = self._continued(session, blocks, previous_response_id)
        if conv is not None and list(blocks) == conv.blocks and conv.ok:
            conv = None  # the same conversation again after it succeeded: the same prompt run anew
        if conv is not None:
            conv.used = next(self._clock)
            if conv.ok and not conv.pending:  # after a final answer: a new user turn
                conv.task_id, conv.rounds = self._task_id(session), 1
                conv.blocks = list(blocks)
                return Placement(conv.task_id, 1, conv.id, new_task=True)
            answered = tuple(conv.pending) if conv.ok else ()
            placement = Placement(
                conv.task_id,
                conv.rounds + 1,
                conv.id,
                new_task=False,
                retry=not conv.ok,
                answered=answered,
                answered_since=conv.end if answered else None,
                answered_round=conv.rounds if answered else None,
            )
            conv.blocks = list(blocks)
            conv.rounds += 1
            return placement
        parent = self._waiting_parent(session)
        if parent is not None:
            parent.subagents += 1
            task_id, parent_task = f"{parent.task_id}/sub{parent.subagents}", parent.task_id
        else:
            task_id, parent_task = self._task_id(session), None
        conv = _Conversation(
            next(self._ids), session, task_id, list(blocks), rounds=1, used=next(self._clock)
        )
        self._open[conv.id] = conv
        self._forget()
        return Placement(task_id, 1, conv.id, new_task=True, parent_task=parent_task)

    def _waiting_parent(self, session: str | None) -> _Conversation | None:
        waiting = [c for c in self._open.values() if c.session == session and c.ok and c.pending]
        return max(waiting, key=lambda c: c.used) if waiting else None

    def answered(
        self,
        placement: Placement,
        *,
        ok: bool,
        tool_calls: Sequence[ToolCall] = (),
        end: Instant | None = None,
        response_id: str | None = None,
    ) -> None:
        """Record how the placed call ended: whether it succeeded, the tool calls it asked for, when it ended."""
        conv = self._open.get(placement.conversation)
        if conv is None:
            return
        conv.ok = ok
        if ok:
            conv.pending = list(tool_calls)
            conv.response_id = response_id
        conv.end = end

    def _forget(self) -> None:
        while len(self._open) > self.max_open:
            oldest = min(self._open.values(), key=lambda c: c.used)
            del self._open[oldest.id]
