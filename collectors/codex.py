"""Codex CLI session files (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``, default
``~/.codex/sessions``) → one conversation each.

A rollout is append-only JSONL, one ``{timestamp, type, payload}`` line per thing Codex recorded (0.169.0):
``session_meta`` (session id, CLI version, provider, ``base_instructions.text`` — the system prompt as sent),
``turn_context`` (the model of the turn), ``response_item`` (the Responses items exactly as they go to and come back
from the model: ``message`` with role ``developer`` / ``user`` / ``assistant``, ``reasoning``, ``function_call``
with ``namespace`` for an MCP tool, ``function_call_output``, ``custom_tool_call`` and its output),
``token_usage_record`` (one per model response: its ``usage`` — ``input_tokens`` with ``cached_input_tokens`` in
it, ``output_tokens`` with ``reasoning_output_tokens`` in it) and ``event_msg`` (``task_started`` /
``task_complete`` with the turn's ``duration_ms`` and ``time_to_first_token_ms``, ``item_completed`` with each
tool run's ``started_at_ms`` / ``completed_at_ms`` and, for an MCP call, its ``server`` and ``tool``). Older
versions write ``event_msg`` ``token_count`` (``info.last_token_usage``) and ``mcp_tool_call_end`` (``invocation``
and ``duration``) instead: both are read.

What becomes what: ``base_instructions`` is the conversation's ``system``; a ``developer`` message and Codex's own
context sent as user messages (``<environment_context>``, ``<user_instructions>``, AGENTS.md —
:data:`promcp.wire.openai_responses.CLIENT_CONTEXT`) are injected context of every later task; any other user
message starts a task; the output items up to a response's usage line are one LLM call, its usage the provider's;
a namespaced call (``mcp__everything`` + ``echo``) is the MCP tool ``everything/echo``.

Timing, stated for what the file shows: lines carry Codex's wall clock (ms) when each was written. A tool run's
``started_at_ms`` → ``completed_at_ms`` (or an older end event's ``duration``) is Codex's own measurement around
the call: S4 ``exact``. An LLM call runs from the prompt or the results it answers to its usage line
(``bounded``: Codex's own time included; no prefill / generation split), except that the first call of a turn
gets a prefill span from the turn's start to Codex's ``time_to_first_token_ms`` (``bounded``). A tool run without
those figures is bounded by its call and output lines. What the file does not show: the tool definitions
(schemas: Codex sends them, does not write them), reasoning text (encrypted), MCP server start-up, and anything
about a request that failed before a response.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.collectors._problems import INTERNAL, Problems
from promcp.collectors._stream import as_dict, as_list, as_text, iter_jsonl, to_ns
from promcp.events import TimingQuality
from promcp.wire import Usage
from promcp.wire.openai_responses import CLIENT_CONTEXT, namespaced

__all__ = ["looks_like", "parse_file", "parse_session", "read", "sessions_locations"]

#: output items of a model response (each belongs to the call whose usage line follows)
_OUTPUT_ITEMS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
    }
)
_RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
_KNOWN_LINES = frozenset(
    {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "token_usage_record",
        "world_state",
        "compacted",
    }
)


def sessions_locations() -> list[Path]:
    """Where Codex keeps its rollouts: ``$CODEX_HOME/sessions`` when set, else ``~/.codex/sessions``."""
    home = (os.environ.get("CODEX_HOME") or "").strip()
    return [Path(home).expanduser() / "sessions" if home else Path.home() / ".codex" / "sessions"]


def looks_like(text: str) -> bool:
    """Whether the first bytes (whitespace removed) are a Codex rollout."""
    return '"type":"session_meta"' in text or ('"type":"response_item"' in text and '"payload"' in text)


def _count(raw: dict[str, Any], key: str) -> int | None:
    value = raw.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(raw: Any) -> Usage | None:
    """Codex's usage (``input_tokens`` includes ``cached_input_tokens``; ``output_tokens`` includes
    ``reasoning_output_tokens``, as on the Responses wire)."""
    raw = as_dict(raw)
    prompt, output = _count(raw, "input_tokens"), _count(raw, "output_tokens")
    if prompt is None and output is None:
        return None
    return Usage(
        input_tokens=prompt,
        output_tokens=output or 0,
        cache_read_tokens=_count(raw, "cached_input_tokens"),
        cache_write_tokens=_count(raw, "cache_write_input_tokens") or None,
        reasoning_tokens=_count(raw, "reasoning_output_tokens"),
        reported=raw,
    )


def _text(content: Any) -> str:
    """The text of a message's content or a tool output (a string or ``input_text`` / ``output_text`` items)."""
    if isinstance(content, str):
        return as_text(content)
    pieces = []
    for item in as_list(content):
        item = as_dict(item)
        if isinstance(item.get("text"), str):
            pieces.append(as_text(item["text"]))
        elif item.get("type") == "input_image":
            pieces.append("[image]")
    return "\n".join(pieces)


def _context_key(text: str) -> str | None:
    head = text.lstrip()
    for start, key in CLIENT_CONTEXT.items():
        if head.startswith(start):
            return key
    return None


def _mcp_name(namespace: str, name: str) -> tuple[str | None, str, bool]:
    """(server, tool, is MCP) of a call: ``mcp__<server>`` namespaces are MCP servers."""
    if namespace.startswith("mcp__") and len(namespace) > 5:
        return namespace[5:], name, True
    return None, name, False


class _Session:
    def __init__(self, conv: Conversation, problems: Problems) -> None:
        self.conv = conv
        self.problems = problems
        self.context: list[
            tuple[str, str]
        ] = []  # (key, text): Codex's context so far, injected into each task
        self.task: Task | None = None
        self.call: Call | None = None  # the call whose output is being read (closed by its usage line)
        self.anchor: int | None = None  # when the model's input was last complete (prompt, last result)
        self.model: str | None = None
        self.uses: dict[str, ToolUse] = {}  # call_id → tool use (results and timings pair with it)
        self.turn_start: int | None = None
        self.usage_records = False  # token_usage_record lines seen: token_count lines are then repeats
        self.last_total: Any = None

    def feed(self, number: int, line: Any) -> None:
        if not isinstance(line, dict) or "type" not in line:
            self.problems.add(
                "bad_line",
                "a line that is not a rollout item ({timestamp, type, payload}) skipped",
                line=number,
                conversation=self.conv.id,
                detail="not-item",
            )
            return
        kind, payload, ts = (
            as_text(line.get("type")),
            as_dict(line.get("payload")),
            to_ns(line.get("timestamp")),
        )
        if kind == "session_meta":
            self._meta(payload)
        elif kind == "turn_context":
            self.model = as_text(payload.get("model")) or self.model
        elif kind == "response_item":
            self._item(payload, ts, number)
        elif kind == "token_usage_record":
            self.usage_records = True
            self._usage(_usage(payload.get("usage")), ts, as_text(payload.get("response_id")) or None)
        elif kind == "event_msg":
            self._event(payload, ts)
        elif kind not in _KNOWN_LINES:
            self.problems.add(
                "unknown_line",
                f"unknown rollout line type {kind!r} ignored",
                line=number,
                conversation=self.conv.id,
                detail=f"line:{kind}",
            )

    def _meta(self, payload: dict[str, Any]) -> None:
        self.conv.id = as_text(payload.get("id") or payload.get("session_id")) or self.conv.id
        self.conv.created = to_ns(payload.get("timestamp")) or self.conv.created
        instructions = as_dict(payload.get("base_instructions")).get("text")
        if isinstance(instructions, str) and instructions:
            self.conv.system = as_text(instructions)
        elif isinstance(payload.get("instructions"), str):  # older versions
            self.conv.system = as_text(payload["instructions"])

    # -- response items (what the model saw and said) ---------------------------------------------------------

    def _item(self, item: dict[str, Any], ts: int | None, number: int) -> None:
        kind = as_text(item.get("type"))
        role = as_text(item.get("role"))
        if kind == "message" and role in ("developer", "system"):
            self._input_done(ts)
            self.context.append((role, _text(item.get("content"))))
        elif kind == "message" and role == "user":
            self._input_done(ts)
            text = _text(item.get("content"))
            key = _context_key(text)
            if key is not None:
                self.context.append((key, text))
            else:
                self._new_task(text, ts)
        elif kind == "message" and role == "assistant":
            call = self._open_call(ts, number)
            call.output_text += _text(item.get("content"))
            self._written(call, ts)
        elif kind in _OUTPUT_ITEMS:
            call = self._open_call(ts, number)
            if kind == "reasoning":
                summary = [as_text(as_dict(s).get("text")) for s in as_list(item.get("summary"))]
                call.thinking += "\n".join(s for s in summary if s)
            elif kind == "web_search_call":  # the provider's own tool: no call of Codex's, no result item
                call.attrs["web_searches"] = call.attrs.get("web_searches", 0) + 1
            else:
                self._tool_call(call, item, kind, ts)
            self._written(call, ts)
        elif kind in _RESULT_ITEMS:
            self._input_done(ts)
            self._result(item, ts, number)
        elif kind == "compaction" or kind == "compacted":
            self._input_done(ts)

    def _new_task(self, prompt: str, ts: int | None) -> None:
        self.task = Task(prompt=prompt, at=ts, injected=list(self.context))
        self.conv.tasks.append(self.task)
        self.anchor = ts

    def _input_done(self, ts: int | None) -> None:
        """Input items close the call being read (a response without a usage line: aborted or older)."""
        self.call = None
        if ts is not None:
            self.anchor = ts

    def _open_call(self, ts: int | None, number: int) -> Call:
        if self.call is not None:
            return self.call
        if self.task is None:
            self.problems.add(
                "no_prompt",
                "model output before any prompt: a task with an unknown prompt was made",
                conversation=self.conv.id,
                line=number,
            )
            self._new_task("", None)
            assert self.task is not None
            self.task.attrs["prompt_missing"] = True
        call = Call(model=self.model)
        call.span = Span(self.anchor, ts, TimingQuality.NONE)
        if not self.task.calls and self.turn_start is not None:
            call.attrs["turn_started_ns"] = self.turn_start
        self.task.calls.append(call)
        self.call = call
        return call

    @staticmethod
    def _written(call: Call, ts: int | None) -> None:
        if ts is not None and (call.span.end is None or ts > call.span.end):
            call.span.end = ts

    def _tool_call(self, call: Call, item: dict[str, Any], kind: str, ts: int | None) -> None:
        name = as_text(item.get("name")) or kind
        namespace = as_text(item.get("namespace"))
        server, tool, mcp = _mcp_name(namespace, name)
        if kind == "function_call":
            arguments = as_text(item.get("arguments"))
        elif kind == "custom_tool_call":
            arguments = as_text(item.get("input"))
        else:
            arguments = as_text(item.get("action") or item.get("arguments") or {})
        use = ToolUse(
            call_id=as_text(item.get("call_id") or item.get("id")) or None,
            name=namespaced(namespace, name),
            tool=tool,
            server=server,
            mcp=mcp,
            arguments=arguments,
            call_span=Span(ts, ts, TimingQuality.NONE),
        )
        call.tools.append(use)
        if use.call_id:
            self.uses[use.call_id] = use

    def _result(self, item: dict[str, Any], ts: int | None, number: int) -> None:
        ref = as_text(item.get("call_id"))
        use = self.uses.get(ref)
        output = item.get("output")
        if isinstance(output, dict):  # older: {"content": …, "success": bool}
            text = _text(output.get("content"))
            failed = output.get("success") is False
        else:
            text, failed = _text(output), False
        if use is None:
            self.problems.add(
                "orphan_result",
                "tool output without its call: kept as context only",
                conversation=self.conv.id,
                line=number,
                detail=f"orphan:{ref}",
            )
            if self.task is not None and self.task.calls:
                self.task.calls[-1].extra_context.append((f"orphan:{ref}", text))
            return
        use.result = text
        use.is_error = use.is_error or failed
        if use.result_span.quality is not TimingQuality.EXACT:  # Codex's own figure, when it gave one, stays
            sent = use.call_span.start
            ordered = sent is not None and ts is not None and ts >= sent
            use.result_span = Span(sent, ts, TimingQuality.BOUNDED if ordered else TimingQuality.NONE)

    # -- usage and Codex's own events ------------------------------------------------------------------------

    def _usage(self, usage: Usage | None, ts: int | None, response_id: str | None) -> None:
        call = self.call
        if usage is None:
            return
        if call is None and self.task is not None and self.task.calls:  # results written before the usage
            call = self.task.calls[-1]
        if call is None or call.usage is not None:
            self.problems.add(
                "usage_without_output",
                "a response's usage with no output item before it: not counted",
                conversation=self.conv.id,
                detail="usage",
            )
            return
        call.usage = usage
        if response_id:
            call.attrs["response_id"] = response_id
        self._written(call, ts)
        self.call = None

    def _event(self, payload: dict[str, Any], ts: int | None) -> None:
        kind = as_text(payload.get("type"))
        if kind == "task_started":
            self.turn_start = ts
        elif kind == "task_complete" and self.task is not None:
            ms = payload.get("duration_ms")
            if isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0:
                self.task.check_ms = float(ms)
            ttft = payload.get("time_to_first_token_ms")
            first = self.task.calls[0] if self.task.calls else None
            start = first.attrs.pop("turn_started_ns", None) if first else None
            if (
                first is not None
                and isinstance(ttft, int)
                and not isinstance(ttft, bool)
                and start is not None
            ):
                first.prefill = Span(start, start + ttft * 1_000_000, TimingQuality.BOUNDED)
                first.attrs["client_ttft_ms"] = ttft
                if first.span.end is not None and start + ttft * 1_000_000 <= first.span.end:
                    first.span.start = first.prefill.end  # generation: first token → response written
        elif kind == "token_count" and not self.usage_records:
            info = as_dict(payload.get("info"))
            total = info.get("total_token_usage")
            if total is not None and total != self.last_total:  # the same totals again: a rate-limit update
                self.last_total = total
                self._usage(_usage(info.get("last_token_usage")), ts, None)
        elif kind == "item_completed":
            self._tool_timing(as_dict(payload.get("item")), payload)
        elif kind == "mcp_tool_call_end":  # older versions
            self._older_mcp_end(payload, ts)

    def _tool_timing(self, item: dict[str, Any], event: dict[str, Any]) -> None:
        use = self.uses.get(as_text(item.get("id")))
        if use is None:
            return
        if item.get("type") == "McpToolCall":
            server, tool = as_text(item.get("server")), as_text(item.get("tool"))
            if server and tool:
                use.server, use.tool, use.mcp = server, tool, True
            if as_text(item.get("status")) == "failed" or as_dict(item.get("result")).get("isError") is True:
                use.is_error = True
        start, end = to_ns_ms(event.get("started_at_ms")), to_ns_ms(event.get("completed_at_ms"))
        if start is not None and end is not None and end >= start:
            use.call_span = Span(start, start, TimingQuality.EXACT)
            use.result_span = Span(start, end, TimingQuality.EXACT)

    def _older_mcp_end(self, payload: dict[str, Any], ts: int | None) -> None:
        use = self.uses.get(as_text(payload.get("call_id")))
        if use is None:
            return
        invocation = as_dict(payload.get("invocation"))
        server, tool = as_text(invocation.get("server")), as_text(invocation.get("tool"))
        if server and tool:
            use.server, use.tool, use.mcp = server, tool, True
        duration = as_dict(payload.get("duration"))
        secs, nanos = _count(duration, "secs"), _count(duration, "nanos")
        if ts is not None and secs is not None:
            took = secs * 1_000_000_000 + (nanos or 0)
            use.call_span = Span(ts - took, ts - took, TimingQuality.EXACT)
            use.result_span = Span(ts - took, ts, TimingQuality.EXACT)

    def finish(self) -> Conversation:
        for task in self.conv.tasks:
            for call in task.calls:
                call.attrs.pop("turn_started_ns", None)
                s = call.span
                ordered = s.start is not None and s.end is not None and s.end >= s.start
                s.quality = TimingQuality.BOUNDED if ordered else TimingQuality.NONE
        self.conv.model = self.model
        if self.conv.tasks:
            self.conv.updated = max(
                (c.span.end for t in self.conv.tasks for c in t.calls if c.span.end is not None),
                default=None,
            )
        return self.conv


def to_ns_ms(value: Any) -> int | None:
    """Wall-clock ns from Unix milliseconds (Codex's ``*_at_ms``); else None."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 10**14:
        return None
    return value * 1_000_000


def parse_session(lines: Iterable[tuple[int, Any]], problems: Problems, file: Path) -> Conversation:
    """The lines of one rollout file → one conversation (id = the session id, else the file name)."""
    session = _Session(Conversation(id=file.stem), problems)
    for number, line in lines:
        try:
            session.feed(number, line)
        except Exception as exc:  # a bug here, not bad input: that line is lost, never the session
            problems.add(
                INTERNAL,
                f"line not read ({type(exc).__name__}: {exc}); this is a bug in promcp's importer, please report it",
                line=number,
                conversation=session.conv.id,
            )
    return session.finish()


def parse_file(reader: Any, problems: Problems, file: Path) -> Iterator[Conversation]:
    """One rollout file from ``reader`` (collectors/_stream.py)."""
    yield parse_session(iter_jsonl(reader, problems), problems, file)


def read(ctx: Any) -> Iterator[Conversation]:
    """The format registry's reader (``ctx``: a collectors/_formats.py ``ReadContext``)."""
    for conv in parse_file(ctx.reader, ctx.problems, ctx.file):
        ctx.seen()
        yield conv
