"""What an MCP host puts in front of the model, as text, so its tokens can be counted.

Pure helpers shared by the ``promcp run`` host and the ``promcp.instrument()`` shims (one implementation, one
footprint definition):

* :func:`result_text` — the text of a ``tools/call`` result that a host forwards to the model: the text blocks of
  ``content`` joined by newlines, other blocks summarized as ``[<type> content omitted]``, and the
  ``structuredContent`` JSON only when there is no content at all. Never the JSON-RPC envelope nor ``_meta``
  (so the profiler's own ``traceparent`` is not counted).
* :func:`tool_text` — one tool definition as a host renders it into a prompt (compact JSON of name, description and
  input schema, the OpenAI-style ``parameters`` key).
* :func:`arguments_text` — a ``tools/call`` request's arguments as compact JSON (the S3 footprint).
* :func:`tool_list_footprint` — per-tool and total tokens/bytes of a ``tools/list`` result.

They accept both the SDK's typed models (``CallToolResult``, ``Tool``) and the raw JSON dicts seen on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["arguments_text", "compact_json", "result_text", "tool_list_footprint", "tool_text"]


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _get(obj: Any, snake: str, camel: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(camel, obj.get(snake))
    return getattr(obj, snake, None)


def result_text(result: Any) -> str:
    """The text a host forwards to the model for a ``tools/call`` result (typed ``CallToolResult`` or raw dict)."""
    parts: list[str] = []
    for block in _get(result, "content", "content") or ():
        kind = _get(block, "type", "type")
        if kind == "text":
            parts.append(str(_get(block, "text", "text") or ""))
        else:
            parts.append(f"[{kind or 'content'} content omitted]")
    if not parts:
        structured = _get(result, "structured_content", "structuredContent")
        if structured is not None:
            parts.append(compact_json(structured))
    return "\n".join(parts)


def arguments_text(arguments: Mapping[str, Any] | None) -> str:
    """A tools/call request's arguments as the compact JSON the model produced/the host sends (``{}`` if none)."""
    return compact_json(dict(arguments or {}))


def tool_text(name: str, description: str | None, input_schema: Mapping[str, Any] | None) -> str:
    """One tool definition as rendered into a prompt (the host backends' default rendering)."""
    return compact_json(
        {"name": name, "description": description or "", "parameters": dict(input_schema or {})}
    )


def tool_text_of(tool: Any) -> tuple[str, str]:
    """``(name, text)`` of a typed ``Tool`` or a raw tools/list entry."""
    name = str(_get(tool, "name", "name"))
    return name, tool_text(
        name, _get(tool, "description", "description"), _get(tool, "input_schema", "inputSchema")
    )


def tool_list_footprint(
    tools: Sequence[tuple[str, str]], count: Callable[[str], int]
) -> tuple[int, int, dict[str, dict[str, int]]]:
    """``(tokens, bytes, {name: {"tokens", "bytes"}})`` of rendered tools ``[(name, text), ...]``."""
    per_tool: dict[str, dict[str, int]] = {}
    for name, text in tools:
        per_tool[name] = {"tokens": count(text), "bytes": len(text.encode())}
    return (
        sum(v["tokens"] for v in per_tool.values()),
        sum(v["bytes"] for v in per_tool.values()),
        per_tool,
    )
