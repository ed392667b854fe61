"""The strategies: one small pure function each, from tool definitions (and a ranking) to what one LLM call sends.

Each function returns a :class:`Payload`: the texts that take the place of the tool definitions in one LLM call,
and the tools the model can call in that call. Counting tokens is left to the caller (one tokenizer, cached), so
the functions stay pure and testable without a tokenizer.

``ranking`` arguments are tool indices, best first, from :class:`promcp.analysis.whatif.Router`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promcp.analysis.whatif._schema import (
    dedup_tools,
    dumps,
    slim_tool,
    tool_key,
    tool_name,
    tool_summary,
    wire_tool,
)

STRATEGIES = ("full", "slim", "dedup", "topk", "search-tool", "two-phase", "result-fields")
#: Strategies that need a ranking of the tools for the call's query.
ROUTED = frozenset({"topk", "search-tool", "two-phase"})

#: The one tool definition the ``search-tool`` strategy sends in place of the catalog (mcpgw-style).
SEARCH_TOOL: dict[str, Any] = {
    "name": "search_tools",
    "description": "Search the available tools by what you need to do. Returns the full definitions of the best "
    "matching tools; call them by name afterwards.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what the tool should do"},
            "limit": {"type": "integer", "description": "how many tools to return"},
        },
        "required": ["query"],
    },
}


@dataclass(frozen=True)
class Payload:
    """What one LLM call carries in place of the tool definitions."""

    texts: tuple[str, ...]
    visible: frozenset[str]

    def tokens(self, count: Callable[[str], int]) -> int:
        return sum(count(t) for t in self.texts)


def _visible(tools: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    return frozenset(tool_key(t) for t in tools)


def full(tools: Sequence[Mapping[str, Any]]) -> Payload:
    """Baseline: every tool definition, as listed."""
    return Payload(tuple(dumps(wire_tool(t)) for t in tools), _visible(tools))


def slim(tools: Sequence[Mapping[str, Any]]) -> Payload:
    """Every tool, without display metadata, output schemas and optional schema keywords (see ``slim_tool``)."""
    return Payload(tuple(dumps(slim_tool(t)) for t in tools), _visible(tools))


def dedup(tools: Sequence[Mapping[str, Any]]) -> Payload:
    """Every tool with repeated sub-schemas replaced by ``$ref``; the shared ``$defs`` block is counted too."""
    rewritten, defs = dedup_tools(tools)
    texts = [dumps(t) for t in rewritten]
    if defs:
        texts.append(dumps(defs))
    return Payload(tuple(texts), _visible(tools))


def topk(tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], k: int) -> Payload:
    """Only the ``k`` best-ranked tools, with full definitions (tool-rot's semantic routing)."""
    chosen = [tools[i] for i in ranking[:k]]
    return Payload(tuple(dumps(wire_tool(t)) for t in chosen), _visible(chosen))


def search_tool(
    tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], query: str, n_results: int
) -> Payload:
    """One ``search_tools`` definition, the model's search call, and the call's result: ``n_results`` definitions.

    This is the cost of a turn in which the model searches once (mcpgw's measure); the returned tools are the
    ones it can call.
    """
    chosen = [tools[i] for i in ranking[:n_results]]
    call = dumps({"name": SEARCH_TOOL["name"], "arguments": {"query": query, "limit": n_results}})
    result = dumps([wire_tool(t) for t in chosen])
    return Payload((dumps(SEARCH_TOOL), call, result), _visible(chosen))


def summary_pool(tools: Sequence[Mapping[str, Any]]) -> str:
    """The always-resident phase-1 pool: one ``name: summary`` line per tool."""
    return "\n".join(f"{tool_name(t)}: {tool_summary(t)}" for t in tools)


def two_phase(tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], k: int) -> Payload:
    """Tool Attention: the summary pool for every tool plus full definitions of the ``k`` best-ranked tools.

    Only the promoted ``k`` tools are callable (the paper's state gate rejects calls to the others).
    """
    chosen = [tools[i] for i in ranking[:k]]
    return Payload((summary_pool(tools), *(dumps(wire_tool(t)) for t in chosen)), _visible(chosen))


# -- result-fields ------------------------------------------------------------------------------------------------

_MIN_LEAF_CHARS = 3


def _used(value: Any, used_text: str) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(text.strip()) >= _MIN_LEAF_CHARS and text.strip() in used_text


def _keep(obj: Any, used_text: str) -> Any:
    """``obj`` reduced to the leaves found in ``used_text`` (with the keys/indices leading to them), or ``None``."""
    if isinstance(obj, dict):
        kept = {k: v for k, v in ((k, _keep(v, used_text)) for k, v in obj.items()) if v is not None}
        return kept or None
    if isinstance(obj, list):
        items = [v for v in (_keep(v, used_text) for v in obj) if v is not None]
        return items or None
    return obj if _used(obj, used_text) else None


def result_fields(result_text: str, used_texts: Sequence[str]) -> str:
    """A tool result reduced to what the model used afterwards: an upper bound on output-field filtering.

    JSON results keep only the leaves whose value appears verbatim in ``used_texts`` (the later tool-call
    arguments and answer), with the keys leading to them; plain text keeps only such lines. An oracle knows which
    fields will be used, so the saving is the most a real field selector could achieve.
    """
    used_text = "\n".join(used_texts)
    try:
        parsed = json.loads(result_text)
    except (ValueError, TypeError):
        lines = [ln for ln in result_text.splitlines() if ln.strip() and _line_used(ln, used_text)]
        return "\n".join(lines)
    if not isinstance(parsed, dict | list):
        return result_text if _used(parsed, used_text) else ""
    kept = _keep(parsed, used_text)
    return "" if kept is None else dumps(kept)


def _line_used(line: str, used_text: str) -> bool:
    stripped = line.strip()
    if stripped in used_text:
        return True
    return any(len(w) >= 4 and w in used_text for w in stripped.split())
