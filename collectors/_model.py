"""The normalized shape every export parser produces, before it becomes events (:mod:`._build`).

A parser turns one export conversation into a :class:`Conversation`: its tasks (one per user prompt on the active
branch), each task's LLM calls (:class:`Call`) and each call's tool uses (:class:`ToolUse`). Times are wall-clock
nanoseconds with an explicit quality; token numbers are provider usage or left to the builder to count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from promcp.events import TimingQuality
from promcp.wire import Piece, Usage


@dataclass
class Span:
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


@dataclass
class ToolUse:
    """One tool call the model made and (if it came back) its result."""

    call_id: str | None
    name: str  # as the client names it (``Linear:save_issue``, ``mcp__github__create_issue``, ``python``)
    tool: str  # the tool's own name
    server: str | None  # MCP server / connector / integration; None for a first-party tool
    mcp: bool
    arguments: str  # the request as the model wrote it (JSON text)
    result: str | None = None  # the result content the model saw; None: no result (stopped, lost)
    is_error: bool = False
    call_span: Span = field(default_factory=Span)  # S3: dispatch
    result_span: Span = field(default_factory=Span)  # S4: dispatch → result
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Call:
    """One LLM call: what it wrote (text, thinking) and the tools it asked for (none: the final answer).

    ``span`` is its output (generation, or the whole call when the split is unknown); ``prefill`` bounds the
    prompt processing when a source shows when the first output block started.
    """

    output_text: str = ""
    thinking: str = ""
    tools: list[ToolUse] = field(default_factory=list)
    span: Span = field(default_factory=Span)
    prefill: Span = field(default_factory=Span)
    usage: Usage | None = None  # provider usage (Claude Code); input_tokens includes cache reads and writes
    model: str | None = None
    extra_context: list[tuple[str, str]] = field(default_factory=list)  # (key, text): orphan results etc.
    #: what a source saw of this call's input besides the conversation (the Gemini CLI's spans: its system
    #: instruction and function declarations), re-sent with every call: counted for this call only
    context: list[Piece] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


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
