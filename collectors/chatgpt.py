"""ChatGPT ``conversations.json`` → conversations.

The ``mapping`` tree is walked up from ``current_node`` (the active branch), then read in tree order (timestamps
are not monotonic along it). Hidden system/context nodes become system context. A tool call is an assistant
message whose ``recipient`` is not ``all``; the following ``tool`` message (``author.name``) is its result — there
are no call ids, so pairing is by tree adjacency. Identity: ``api_tool.call_tool`` connector calls carry
``{"path": "/<App>/<link>::<connector_id>/<tool>"}`` (MCP-backed apps), ``<domain>__jit_plugin.<op>`` is a GPT
Action, everything else (``python``, ``web.run``, ``canmore.*``…) is first-party. Times are server-side Unix
seconds: a call ends at its last message's ``update_time`` (``create_time`` if null); S4 runs from the call
message to the tool message (``bounded``), or is ``exact`` from python's ``aggregate_result`` start/end.
"""

from __future__ import annotations

import json
from typing import Any

from promcp.collectors._model import Call, Conversation, Span, Task, ToolUse
from promcp.collectors._problems import Problems, ShapeError
from promcp.collectors._stream import as_dict, as_list, as_text, to_ns
from promcp.events import TimingQuality


def active_path(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The messages from the root to ``current_node`` (non-null messages only), oldest first."""
    node = mapping.get(current) if isinstance(current, str) else None
    if node is None:  # no current node: follow the last child from the root
        roots = [n for n in mapping.values() if isinstance(n, dict) and not n.get("parent")]
        node = roots[0] if roots else None
        while isinstance(node, dict) and isinstance(node.get("children"), list) and node["children"]:
            last = node["children"][-1]
            nxt = mapping.get(last) if isinstance(last, str) else None
            if not isinstance(nxt, dict):
                break
            node = nxt
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    while isinstance(node, dict) and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node.get("message"), dict):
            chain.append(node["message"])
        parent = node.get("parent")
        node = mapping.get(parent) if isinstance(parent, str) else None
    return chain[::-1]


def content_text(content: Any) -> str:
    if not isinstance(content, dict):
        return as_text(content)
    kind = as_text(content.get("content_type"))
    if kind in ("text", "multimodal_text"):
        parts = content.get("parts")
        return "\n".join(
            as_text(p) if isinstance(p, str) else "[attachment]"
            for p in (parts if isinstance(parts, list) else [parts])
        )
    if kind in ("code", "execution_output", "tether_quote", "tether_browsing_display", "system_error"):
        return as_text(content.get("text") or content.get("result"))
    if kind == "thoughts":
        return "\n".join(
            as_text(t.get("content") or t.get("summary"))
            for t in as_list(content.get("thoughts"))
            if isinstance(t, dict)
        )
    if kind == "reasoning_recap":
        return ""
    if kind == "user_editable_context":
        return "\n".join(
            as_text(content.get(k)) for k in ("user_profile", "user_instructions") if content.get(k)
        )
    return as_text(content.get("text") or content.get("parts") or "")


def tool_identity(recipient: str, arguments: str) -> tuple[str | None, str, bool, dict[str, Any]]:
    """(server, tool, is MCP-backed, attrs) of a ChatGPT tool call."""
    if recipient.startswith("api_tool"):
        try:
            data = json.loads(arguments)
        except ValueError:
            data = None
        path = as_text(data.get("path")) if isinstance(data, dict) else ""
        if path:
            segments = [s for s in path.split("/") if s]
            tool = segments[-1] if segments else recipient
            connector = next((seg.partition("::")[2] for seg in segments if "::" in seg), "")
            app = segments[0].partition("::")[0] if len(segments) > 1 else ""
            server = "-".join((app or "connector").strip().lower().split())
            return server, tool, True, {"connector_path": path, "connector_id": connector or None}
        return "api_tool", recipient.partition(".")[2] or recipient, True, {}
    if "__jit_plugin." in recipient:
        domain, _, op = recipient.partition("__jit_plugin.")
        return domain, op, False, {"gpt_action": True}
    return None, recipient, False, {}


def _time(msg: dict[str, Any], end: bool) -> int | None:
    if end:
        return to_ns(msg.get("update_time")) or to_ns(msg.get("create_time"))
    return to_ns(msg.get("create_time"))


def parse_conversation(
    doc: Any, problems: Problems, index: int = 0, offset: int | None = None
) -> Conversation:
    if not isinstance(doc, dict):
        raise ShapeError("a conversation is not a JSON object")
    conv_id = as_text(doc.get("conversation_id") or doc.get("id")) or f"#{index}"
    conv = Conversation(
        id=conv_id,
        title=as_text(doc.get("title")),
        created=to_ns(doc.get("create_time")),
        updated=to_ns(doc.get("update_time")),
        model=as_text(doc.get("default_model_slug")) or None,
    )
    mapping = doc.get("mapping")
    if not isinstance(mapping, dict):
        problems.add("no_messages", "no mapping tree", conversation=conv_id, offset=offset)
        return conv
    system: list[str] = []
    task: Task | None = None
    call: Call | None = None
    open_uses: list[ToolUse] = []
    anchor: int | None = None
    for msg in active_path(mapping, doc.get("current_node")):
        author = as_dict(msg.get("author"))
        role = as_text(author.get("role"))
        meta = as_dict(msg.get("metadata"))
        content = msg.get("content")
        text = content_text(content)
        kind = as_text(content.get("content_type")) if isinstance(content, dict) else None
        if (
            role == "system"
            or meta.get("is_visually_hidden_from_conversation")
            or kind == "user_editable_context"
        ):
            if text:
                system.append(text)
            continue
        if role == "user":
            task = Task(prompt=text, at=_time(msg, False))
            for att in as_list(meta.get("attachments")):
                if isinstance(att, dict) and isinstance(att.get("file_token_size"), int):
                    task.attachment_tokens.append(
                        (as_text(att.get("name")) or "file", att["file_token_size"])
                    )
            conv.tasks.append(task)
            call, open_uses, anchor = None, [], task.at
            continue
        if task is None:
            problems.add(
                "no_prompt",
                "messages before any user prompt: a task with an unknown prompt was made",
                conversation=conv_id,
                offset=offset,
            )
            task = Task(prompt="", at=None, attrs={"prompt_missing": True})
            conv.tasks.append(task)
        if role == "assistant":
            if call is None or open_uses or (call.tools and all(u.result is not None for u in call.tools)):
                call = Call(model=as_text(meta.get("model_slug")) or None)
                call.span = Span(anchor, None, TimingQuality.NONE)
                task.calls.append(call)
                open_uses = []
            end = _time(msg, True)
            if end is not None and (call.span.end is None or end > call.span.end):
                call.span.end = end
            recipient = as_text(msg.get("recipient")) or "all"
            if kind in ("thoughts", "reasoning_recap"):
                call.thinking += text
                secs = meta.get("finished_duration_sec")
                if isinstance(secs, int | float) and not isinstance(secs, bool):
                    call.attrs["thinking_ms"] = float(secs) * 1000
            elif recipient in ("all", "assistant", "user"):
                call.output_text += text
            else:
                server, tool, mcp, attrs = tool_identity(recipient, text)
                use = ToolUse(
                    call_id=as_text(msg.get("id")) or None,
                    name=recipient,
                    tool=tool,
                    server=server,
                    mcp=mcp,
                    arguments=text,
                    attrs=attrs,
                )
                use.call_span = Span(end, end, TimingQuality.NONE)
                call.tools.append(use)
        elif role == "tool":
            name = as_text(author.get("name"))
            pending = [u for u in (call.tools if call else []) if u.result is None]
            found = next((u for u in pending if u.name == name), pending[0] if pending else None)
            if found is None:
                problems.add(
                    "orphan_result",
                    f"a result from {name!r} without its call: kept as context only",
                    conversation=conv_id,
                    offset=offset,
                    detail=f"orphan:{name}",
                )
                if call is not None:
                    call.extra_context.append((f"orphan:{as_text(msg.get('id'))}", text))
                continue
            use = found
            use.result = text
            at = _time(msg, False)
            agg = meta.get("aggregate_result") if isinstance(meta.get("aggregate_result"), dict) else None
            start = to_ns(agg.get("start_time")) if agg else None
            stop = to_ns(agg.get("end_time")) if agg else None
            if start is not None and stop is not None and stop >= start:
                use.result_span = Span(start, stop, TimingQuality.EXACT)
                use.is_error = agg.get("status") not in (None, "success") if agg else False
            elif use.call_span.start is not None and at is not None and at >= use.call_span.start:
                use.result_span = Span(use.call_span.start, at, TimingQuality.BOUNDED)
            else:
                use.result_span = Span(use.call_span.start, at, TimingQuality.NONE)
            if isinstance(content, dict) and content.get("content_type") == "system_error":
                use.is_error = True
            open_uses.append(use)
            anchor = at or anchor
        else:
            problems.add(
                "unknown_role", f"message with role {role!r} skipped", conversation=conv_id, offset=offset
            )
    for t in conv.tasks:
        for c in t.calls:
            if c.span.start is not None and c.span.end is not None and c.span.end >= c.span.start:
                c.span.quality = TimingQuality.BOUNDED
    conv.system = "\n".join(system)
    return conv
