"""Claude.ai / Claude Desktop ``conversations.json`` (and its JSONL variant) → normalized conversations.

Every vintage (export-formats.md §1.7): legacy messages without content blocks (human and assistant share one
``created_at``: no usable timing), content blocks with ``start_timestamp``/``stop_timestamp``, 2026 blocks whose
``tool_result`` timestamps are null, parallel calls with or without ids. The active branch follows
``parent_message_uuid`` up from the current leaf (``current_leaf_message_uuid`` or the last message).

Timing (§1.6): a call's output runs from its first block's start to its last block's stop (``exact``, one server
clock); the prompt→first-block gap bounds the first call's prompt processing (``bounded``: it includes queueing
and network). ``tool_result.start_timestamp``, when present, is the dispatch time (S3); the result's arrival is
only bounded above by the next block's start (or the message's ``created_at``): S4 is ``bounded``.
"""

from __future__ import annotations

from typing import Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.collectors._problems import Problems, ShapeError
from promcp.collectors._stream import as_list, as_text, clean_text, to_ns
from promcp.events import TimingQuality

ROOT = "00000000-0000-4000-8000-000000000000"
IGNORED_BLOCKS = frozenset({"token_budget", "voice_note"})


def active_branch(messages: list[Any], leaf_id: Any = None) -> tuple[list[dict[str, Any]], int]:
    """The messages of the current branch, oldest first, and how many were left off it."""
    msgs = [m for m in messages if isinstance(m, dict)]
    if any(m.get("parent_message_uuid") for m in msgs):
        by_id = {as_text(m.get("uuid")): m for m in msgs}
        leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
        node: dict[str, Any] | None = leaf if leaf is not None else (msgs[-1] if msgs else None)
        chain: list[dict[str, Any]] = []
        seen: set[int] = set()
        while node is not None and id(node) not in seen:
            chain.append(node)
            seen.add(id(node))
            parent = node.get("parent_message_uuid")
            node = by_id.get(parent) if isinstance(parent, str) and parent != ROOT else None
        return chain[::-1], len(msgs) - len(chain)
    order = sorted(
        range(len(msgs)),
        key=lambda i: (to_ns(msgs[i].get("created_at")) or 0, msgs[i].get("sender") != "human", i),
    )
    return [msgs[i] for i in order], 0


def tool_identity(block: dict[str, Any]) -> tuple[str, str, str | None, bool]:
    """(client name, tool, server, is MCP) of a ``tool_use``/``tool_result`` block (§1.5)."""
    name = as_text(block.get("name")) or "unknown"
    integration = block.get("integration_name")
    mcp = (
        ":" in name
        or integration is not None
        or block.get("is_mcp_app") is not None
        or block.get("mcp_server_url") is not None
    )
    prefix, sep, tool = name.partition(":")
    if not sep:
        tool, prefix = name, ""
    server_name = as_text(integration) or prefix or as_text(block.get("mcp_server_url"))
    server = normalize_server(server_name) if mcp and server_name else None
    return name, tool, server, mcp


def normalize_server(name: str) -> str:
    """Connector names vary in case and spacing for one service: ``Google Drive`` and ``google drive`` match."""
    return "-".join(name.strip().lower().split())


def result_text(block: dict[str, Any]) -> str:
    """What the model saw of a tool result: text and knowledge items (not ``display_content``)."""
    content = block.get("content")
    if content is None:
        content = block.get("text")  # hand-made shapes put it here
    if isinstance(content, str):
        return clean_text(content)
    pieces: list[str] = []
    for item in content if isinstance(content, list) else [content]:
        if isinstance(item, dict):
            kind = as_text(item.get("type"))
            if kind == "knowledge":
                pieces.append(
                    "\n".join(as_text(item.get(k)) for k in ("title", "url", "text") if item.get(k))
                )
            elif isinstance(item.get("text"), str):
                pieces.append(clean_text(item["text"]))
            elif kind == "image":
                pieces.append("[image]")
        elif item is not None:
            pieces.append(as_text(item))
    return "\n".join(p for p in pieces if p)


def _call_id(block: dict[str, Any]) -> str | None:
    for value in (block.get("id"), block.get("tool_use_id")):
        if isinstance(value, str) and value:
            return value
    data = block.get("input")
    if isinstance(data, dict) and isinstance(data.get("_tool_call_id"), str):
        return str(data["_tool_call_id"])
    return None


def parse_conversation(
    doc: Any, problems: Problems, index: int = 0, offset: int | None = None
) -> Conversation:
    """One export conversation object → its tasks (``index`` names conversations without a uuid)."""
    if not isinstance(doc, dict):
        raise ShapeError("a conversation is not a JSON object")
    conv_id = as_text(doc.get("uuid")) or f"#{index}"
    conv = Conversation(
        id=conv_id,
        title=as_text(doc.get("name")),
        created=to_ns(doc.get("created_at")),
        updated=to_ns(doc.get("updated_at")),
        model=as_text(doc.get("model")) or None,
    )
    messages = doc.get("chat_messages")
    if not isinstance(messages, list):
        problems.add("no_messages", "no chat_messages list", conversation=conv_id, offset=offset)
        return conv
    branch, conv.branches = active_branch(messages, doc.get("current_leaf_message_uuid"))
    task: Task | None = None
    for msg in branch:
        sender = as_text(msg.get("sender"))
        blocks = as_list(msg.get("content"))
        created = to_ns(msg.get("created_at"))
        if sender == "human":
            task = _human(msg, blocks, created, conv_id, problems, offset)
            conv.tasks.append(task)
        elif sender == "assistant":
            if task is None:
                problems.add(
                    "no_prompt",
                    "assistant message before any human message: a task with an unknown prompt was made",
                    conversation=conv_id,
                    offset=offset,
                )
                task = Task(prompt="", at=None, attrs={"prompt_missing": True})
                conv.tasks.append(task)
            _assistant(msg, blocks, created, task, conv_id, problems, offset)
        else:
            problems.add(
                "unknown_sender",
                f"message with sender {sender!r} skipped",
                conversation=conv_id,
                offset=offset,
            )
    return conv


def _human(
    msg: dict[str, Any],
    blocks: list[Any],
    created: int | None,
    conv_id: str,
    problems: Problems,
    offset: int | None,
) -> Task:
    texts: list[str] = []
    task = Task(prompt="", at=created)
    for b in blocks:
        if not isinstance(b, dict):
            continue
        kind = as_text(b.get("type"))
        if kind == "text":
            texts.append(as_text(b.get("text")))
        elif kind == "injected_prompt_block":
            task.injected.append((as_text(b.get("injection_source")) or "injected", as_text(b.get("prompt"))))
        elif kind in ("file", "image"):
            task.attrs.setdefault("file_refs", []).append(as_text(b.get("file_name")) or kind)
        elif kind not in IGNORED_BLOCKS:
            problems.add(
                "unknown_block",
                f"unknown block type {kind!r} in a human message ignored",
                conversation=conv_id,
                offset=offset,
                detail=f"human:{kind}",
            )
    task.prompt = "\n".join(t for t in texts if t) if texts else as_text(msg.get("text"))
    for att in as_list(msg.get("attachments")):
        if isinstance(att, dict):
            name = as_text(att.get("file_name")) or "attachment"
            task.attachments.append((name, as_text(att.get("extracted_content"))))
    files = [f for f in as_list(msg.get("files")) if isinstance(f, dict)]
    if files:
        task.attrs["file_refs"] = [
            *task.attrs.get("file_refs", []),
            *(as_text(f.get("file_name")) for f in files),
        ]
    return task


def _assistant(
    msg: dict[str, Any],
    blocks: list[Any],
    created: int | None,
    task: Task,
    conv_id: str,
    problems: Problems,
    offset: int | None,
) -> None:
    if not blocks:  # legacy: the reply is `text`, the timestamp is shared with the prompt: no timing
        legacy = Call(output_text=as_text(msg.get("text")))
        legacy.span = Span(created, created, TimingQuality.NONE)
        task.calls.append(legacy)
        return
    calls: list[Call] = []
    call: Call | None = None
    after_result = False
    by_id: dict[str, ToolUse] = {}
    next_start: dict[int, int | None] = {}  # id(ToolUse) -> upper bound of its result's arrival
    waiting: list[ToolUse] = []  # results arrived, arrival not yet bounded
    for b in blocks:
        if not isinstance(b, dict):
            continue
        kind = as_text(b.get("type"))
        start, stop = to_ns(b.get("start_timestamp")), to_ns(b.get("stop_timestamp"))
        if kind in ("text", "thinking", "tool_use", "redacted_thinking") and (call is None or after_result):
            for use in waiting:
                next_start[id(use)] = start if start is not None else created
            waiting = []
            call = Call(model=task.attrs.get("model"))
            calls.append(call)
            after_result = False
        if call is not None and call.span.start is None and start is not None and kind != "tool_result":
            call.span.start = start
        if kind in ("text", "thinking", "redacted_thinking"):
            assert call is not None
            if kind == "text":
                call.output_text += as_text(b.get("text"))
            else:
                thought = as_text(b.get("thinking"))
                if not thought and isinstance(b.get("summaries"), list):
                    thought = "\n".join(
                        as_text(s.get("summary")) for s in b["summaries"] if isinstance(s, dict)
                    )
                call.thinking += thought
                if start is not None and stop is not None and stop >= start:
                    call.attrs["thinking_ms"] = call.attrs.get("thinking_ms", 0.0) + (stop - start) / 1e6
            if stop is not None:
                call.span.end = stop
        elif kind == "tool_use":
            assert call is not None
            name, tool, server, mcp = tool_identity(b)
            data = b.get("input")
            args = as_text(data if data is not None else {})
            use = ToolUse(call_id=_call_id(b), name=name, tool=tool, server=server, mcp=mcp, arguments=args)
            for key in ("integration_name", "mcp_server_url", "is_mcp_app"):
                if b.get(key) is not None:
                    use.attrs[key] = b[key]
            if stop is not None:
                call.span.end = stop
                use.call_span = Span(stop, stop, TimingQuality.NONE)
            call.tools.append(use)
            if use.call_id:
                by_id[use.call_id] = use
        elif kind == "tool_result":
            after_result = call is not None
            matched = _match(b, by_id, call)
            if matched is None:
                problems.add(
                    "orphan_result",
                    "tool_result without its tool_use: its text is kept as context only",
                    conversation=conv_id,
                    offset=offset,
                    detail=f"orphan:{_call_id(b)}",
                )
                if call is not None:
                    call.extra_context.append(
                        (f"orphan:{_call_id(b) or len(call.extra_context)}", result_text(b))
                    )
                continue
            use = matched
            use.result = result_text(b)
            use.is_error = b.get("is_error") is True
            meta = b.get("meta")
            if isinstance(meta, dict) and meta.get("error_type"):
                use.attrs["error_type"] = as_text(meta.get("error_type"))
            dispatched = start
            if (
                dispatched is not None
                and use.call_span.start is not None
                and dispatched >= use.call_span.start
            ):
                use.call_span = Span(use.call_span.start, dispatched, TimingQuality.EXACT)
            use.result_span.start = dispatched if dispatched is not None else use.call_span.start
            waiting.append(use)
        elif kind not in IGNORED_BLOCKS:
            problems.add(
                "unknown_block",
                f"unknown block type {kind!r} ignored (the rest of the message was kept)",
                conversation=conv_id,
                offset=offset,
                detail=f"assistant:{kind}",
            )
    for use in waiting:
        next_start[id(use)] = created
    for c in calls:
        if c.span.start is not None and c.span.end is not None and c.span.end >= c.span.start:
            c.span.quality = TimingQuality.EXACT
        for use in c.tools:
            bound = next_start.get(id(use))
            start = use.result_span.start
            if use.result is not None and start is not None and bound is not None and bound >= start:
                use.result_span = Span(start, bound, TimingQuality.BOUNDED)
    if (
        calls
        and calls[-1].span.end is None
        and created is not None
        and len(calls) == 1
        and task.at is not None
    ):
        calls[0].span = Span(
            task.at, created, TimingQuality.BOUNDED if created >= task.at else TimingQuality.NONE
        )
    elif calls and task.at is not None and not task.calls and calls[0].span.start is not None:
        first = calls[0]
        if first.span.start is not None and first.span.start >= task.at:
            first.prefill = Span(task.at, first.span.start, TimingQuality.BOUNDED)
    task.calls.extend(calls)


def _match(block: dict[str, Any], by_id: dict[str, ToolUse], call: Call | None) -> ToolUse | None:
    ref = _call_id(block)
    if ref is not None and ref in by_id and by_id[ref].result is None:
        return by_id[ref]
    if call is None:
        return None
    # no id (older captures, 2026 parallel calls whose results lack ids): the first open call with the same name,
    # else the first open call (results arrive in completion order, so this pairing is a guess: flagged)
    name = as_text(block.get("name"))
    open_uses = [u for u in call.tools if u.result is None]
    for use in open_uses:
        if ref is None and (not name or use.name == name):
            use.attrs["paired_by"] = "adjacency"
            return use
    return None
