"""The normalized shape every export parser produces, before it becomes events (:mod:`._build`).

A parser turns one export conversation into a :class:`Conversation`: its tasks (one per user prompt on the active
branch), each task's LLM calls (:class:`Call`) and each call's tool uses (:class:`ToolUse`). Times are wall-clock
nanoseconds with an explicit quality; token numbers are provider usage or left to the builder to count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from promcp.stages.imported import ImportedCall, ImportedToolUse, Interval

#: the facts a parser hands to the stage builders (:mod:`promcp.stages.imported`), under the parsers' names
Span = Interval
ToolUse = ImportedToolUse
Call = ImportedCall


@dataclass
class Task:
    """One user prompt and everything it caused."""

    prompt: str
    at: int | None  # wall-clock ns of the prompt
    attachments: list[tuple[str, str]] = field(default_factory=list)  # (name, text that entered the context)
    injected: list[tuple[str, str]] = field(default_factory=list)  # (source, text) platform-injected context
    attachment_tokens: list[tuple[str, int]] = field(default_factory=list)  # counts an export gives directly
    calls: list[Call] = field(default_factory=list)
    check_ms: float | None = None  # the source's own duration of the whole turn (Claude Code turn_duration)
    attrs: dict[str, Any] = field(default_factory=dict)
    #: tool uses the source reported but no call of this task can be matched to: kept as events of their own
    unplaced: list[ToolUse] = field(default_factory=list)


@dataclass
class Conversation:
    id: str
    title: str = ""
    created: int | None = None
    updated: int | None = None
    tasks: list[Task] = field(default_factory=list)
    model: str | None = None
    system: str = ""  # hidden system/context text the client put before the conversation
    branches: int = 0  # messages off the active branch (edits/retries), left out
