"""Claude Code session JSONL (``~/.claude/projects/<slug>/<session>.jsonl``, subagent files too) → conversations.

The one format with real ``usage``. Claude Code writes one line per content block and each line repeats
``message.id`` and ``usage`` with an *intermediate* ``output_tokens``; resumes duplicate lines. So lines are
deduplicated by ``uuid``, blocks are merged per ``message.id``, and the usage kept is the final one (the largest
``output_tokens``) — summing every line over-counts 2–4×. MCP tools are ``mcp__<server>__<tool>``; results pair
with their call by ``tool_use_id``; ``system/turn_duration`` is kept as a check of the reconstructed turn.
Timestamps are the client's clock when each line was written: S4 (tool_use line → tool_result line) is ``exact``;
an LLM call (prompt or last result → its last block written) is ``bounded`` (it includes client time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.collectors._problems import Problems
from promcp.collectors._stream import as_dict, as_list, as_text, clean_text, to_ns
from promcp.events import TimingQuality
from promcp.wire import Usage, anthropic


def split_mcp(name: str) -> tuple[str | None, str, bool]:
    """``mcp__server__tool`` → (server, tool, True); other names → (None, name, False)."""
    if name.startswith("mcp__"):
        server, sep, tool = name[5:].partition("__")
        if sep and server and tool:
            return server, tool, True
    return None, name, False


def _usage(raw: Any) -> Usage | None:
    """The message's Anthropic ``usage`` (:func:`promcp.wire.anthropic.parse_usage`: input includes cache reads
    and writes; every field kept as reported); None without input and output counts."""
    if not isinstance(raw, dict):
        return None
    usage = anthropic.parse_usage(raw)
    if usage is None:
        return None
    cached = (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)
    return replace(usage, input_tokens=usage.input_tokens or cached, output_tokens=usage.output_tokens or 0)


def result_text(content: Any) -> str:
    """The text of a tool_result's content (a string or MCP content blocks; images as a placeholder)."""
    if isinstance(content, str):
        return clean_text(content)
    pieces: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                pieces.append(clean_text(block["text"]))
            elif block.get("type") == "image":
                pieces.append("[image]")
        elif isinstance(block, str):
            pieces.append(clean_text(block))
    return "\n".join(pieces)


class _Session:
    def __init__(self, conv: Conversation, problems: Problems, file: str) -> None:
        self.conv = conv
        self.problems = problems
        self.file = file
        self.task: Task | None = None
        self.anchor: int | None = None
        self.calls: dict[str, Call] = {}  # message.id → call (usage, blocks merged)
        self.seen_blocks: dict[str, set[str]] = {}
        self.pending: dict[str, tuple[ToolUse, Call]] = {}
        self.seen_lines: set[str] = set()
        self.duplicates = 0
        self.sidechain = 0

    def feed(self, number: int, line: Any, sidechain_file: bool) -> None:
        if not isinstance(line, dict):
            self.problems.add(
                "bad_line",
                "a line that is not a JSON object skipped",
                line=number,
                conversation=self.conv.id,
                detail="not-object",
            )
            return
        uid = line.get("uuid")
        if isinstance(uid, str):
            if uid in self.seen_lines:
                self.duplicates += 1
                return
            self.seen_lines.add(uid)
        if line.get("isSidechain") and not sidechain_file:
            self.sidechain += 1
            return
        kind = as_text(line.get("type"))
        ts = to_ns(line.get("timestamp"))
        message = as_dict(line.get("message"))
        if kind == "user" and not line.get("isMeta"):
            self._user(message.get("content"), ts, number)
        elif kind == "assistant":
            self._assistant(message, ts, number)
            cost = line.get(
                "costUSD"
            )  # what Claude Code itself charged for the message (some versions write it)
            if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
                call = self.calls[as_text(message.get("id")) or f"line{number}"]
                call.attrs["client_cost_usd"] = max(float(cost), call.attrs.get("client_cost_usd", 0.0))
        elif kind == "system" and line.get("subtype") == "turn_duration" and self.task is not None:
            ms = line.get("durationMs")
            if isinstance(ms, int | float) and not isinstance(ms, bool):
                self.task.check_ms = float(ms)

    def _new_task(self, prompt: str, ts: int | None, missing: bool = False) -> Task:
        self.task = Task(prompt=prompt, at=ts, attrs={"prompt_missing": True} if missing else {})
        self.conv.tasks.append(self.task)
        self.anchor = ts
        return self.task

    def _user(self, content: Any, ts: int | None, number: int) -> None:
        if isinstance(content, str):
            self._new_task(clean_text(content), ts)
            return
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        texts = [as_text(b.get("text")) for b in blocks if b.get("type") == "text"]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for block in results:
            ref = as_text(block.get("tool_use_id"))
            found = self.pending.pop(ref, None)
            if found is None:
                self.problems.add(
                    "orphan_result",
                    "tool_result without its tool_use: kept as context only",
                    conversation=self.conv.id,
                    line=number,
                    detail=f"orphan:{ref}",
                )
                if self.task is not None and self.task.calls:
                    self.task.calls[-1].extra_context.append(
                        (f"orphan:{ref}", result_text(block.get("content")))
                    )
                continue
            use, _call = found
            use.result = result_text(block.get("content"))
            use.is_error = block.get("is_error") is True
            sent = use.call_span.start
            if sent is not None and ts is not None and ts >= sent:
                use.result_span = Span(sent, ts, TimingQuality.EXACT)
            else:
                use.result_span = Span(sent, ts, TimingQuality.NONE)
        if results:
            self.anchor = ts
        elif texts or any(b.get("type") in ("image", "document") for b in blocks):
            self._new_task("\n".join(texts), ts)

    def _assistant(self, message: dict[str, Any], ts: int | None, number: int) -> None:
        mid = as_text(message.get("id")) or f"line{number}"
        call = self.calls.get(mid)
        if call is None:
            if self.task is None:
                self.problems.add(
                    "no_prompt",
                    "assistant lines before any prompt: a task with an unknown prompt was made",
                    conversation=self.conv.id,
                    line=number,
                )
                self._new_task("", None, missing=True)
            assert self.task is not None
            call = Call(model=as_text(message.get("model")) or None)
            call.span = Span(self.anchor, ts, TimingQuality.NONE)
            self.calls[mid] = call
            self.seen_blocks[mid] = set()
            self.task.calls.append(call)
        usage = _usage(message.get("usage"))
        if usage is not None and (
            call.usage is None or (usage.output_tokens or 0) >= (call.usage.output_tokens or 0)
        ):
            call.usage = usage
        if ts is not None and (call.span.end is None or ts > call.span.end):
            call.span.end = ts
        seen = self.seen_blocks[mid]
        for block in as_list(message.get("content")):
            if not isinstance(block, dict):
                continue
            kind = as_text(block.get("type"))
            key = f"{kind}:{block.get('id') or as_text(block.get('text') or block.get('thinking'))[:200]}"
            if key in seen:
                continue
            seen.add(key)
            if kind == "text":
                call.output_text += as_text(block.get("text"))
            elif kind == "thinking":
                call.thinking += as_text(block.get("thinking"))
            elif kind == "tool_use":
                name = as_text(block.get("name")) or "unknown"
                server, tool, mcp = split_mcp(name)
                use = ToolUse(
                    call_id=as_text(block.get("id")) or None,
                    name=name,
                    tool=tool,
                    server=server,
                    mcp=mcp,
                    arguments=as_text(block.get("input") if block.get("input") is not None else {}),
                    call_span=Span(ts, ts, TimingQuality.NONE),
                )
                call.tools.append(use)
                if use.call_id:
                    self.pending[use.call_id] = (use, call)
            elif kind not in ("redacted_thinking", "server_tool_use", "web_search_tool_result"):
                self.problems.add(
                    "unknown_block",
                    f"unknown block type {kind!r} ignored",
                    conversation=self.conv.id,
                    line=number,
                    detail=f"block:{kind}",
                )

    def finish(self) -> Conversation:
        for task in self.conv.tasks:
            for call in task.calls:
                s = call.span
                s.quality = TimingQuality.BOUNDED if _ordered(s.start, s.end) else TimingQuality.NONE
        if self.duplicates:
            self.problems.add(
                "duplicate",
                f"{self.duplicates} duplicated line(s) (same uuid) ignored",
                conversation=self.conv.id,
            )
        if self.sidechain:
            self.problems.add(
                "sidechain",
                f"{self.sidechain} inline subagent (sidechain) line(s) left out of the main thread",
                conversation=self.conv.id,
            )
        return self.conv


def _ordered(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and b >= a


def parse_session(lines: Iterable[tuple[int, Any]], problems: Problems, file: Path) -> Conversation:
    """The lines of one session file → one conversation (id = sessionId, ``/agent-…`` for subagent files)."""
    sidechain_file = file.stem.startswith("agent-") or file.parent.name == "subagents"
    session: _Session | None = None
    for number, line in lines:
        if session is None:
            sid = as_text(line.get("sessionId")) if isinstance(line, dict) else ""
            if not sid and isinstance(line, dict) and line.get("type") not in ("user", "assistant", "system"):
                sid = ""
            cid = sid or file.stem
            if sidechain_file and sid:
                cid = f"{sid}/{file.stem}"
            if (
                not sid
                and isinstance(line, dict)
                and line.get("type") in ("summary", "file-history-snapshot")
            ):
                pending = (number, line)
                session = _Session(Conversation(id=cid), problems, file.name)
                session.feed(*pending, sidechain_file)
                continue
            session = _Session(Conversation(id=cid), problems, file.name)
        elif not session.conv.tasks and session.conv.id == file.stem and isinstance(line, dict):
            sid = as_text(line.get("sessionId"))
            if sid:
                session.conv.id = f"{sid}/{file.stem}" if sidechain_file else sid
        session.feed(number, line, sidechain_file)
    if session is None:
        return Conversation(id=file.stem)
    return session.finish()
