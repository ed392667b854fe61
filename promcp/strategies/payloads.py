"""The strategies: one small pure function each, from tool definitions (and a ranking) to what one LLM call sends.

Each function returns a :class:`Payload`: the texts that take the place of the tool definitions in one LLM call,
and the tools the model can call in that call. Counting tokens is left to the caller (one tokenizer, cached), so
the functions stay pure and testable without a tokenizer.

``ranking`` arguments are tool indices, best first, from :class:`promcp.strategies.routing.Router`.
The what-if (:mod:`promcp.analysis.whatif`) counts them; the live paths (``promcp run --strategy``,
:mod:`promcp.strategies.live`) send them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promcp.strategies.schema import (
    Tool,
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


#: The host-served definition two-phase adds live: promote a tool from the summary pool to its full definition.
LOAD_TOOL: dict[str, Any] = {
    "name": "load_tool",
    "description": "Load the full definition of a tool listed in the tool summaries, so you can call it next.",
    "inputSchema": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the tool's name as listed"}},
        "required": ["name"],
    },
}

#: Index of a definition in :attr:`Payload.sent` that is not one of the catalog's tools (a meta tool).
META = -1


@dataclass(frozen=True)
class Payload:
    """What one LLM call carries in place of the tool definitions.

    ``texts``: every text that takes their place, as counted; ``visible``: the keys of the catalog tools the model
    can call; ``sent``: the definitions the call offers as tools, each with its index in the catalog (:data:`META`
    for a meta tool), in the wire form :func:`~promcp.strategies.schema.wire_tool` gives; ``extra``: the texts that
    are not tool definitions (dedup's ``$defs`` block, two-phase's summary pool; the projected search call and
    result), which a live host puts into the prompt beside the tools.
    """

    texts: tuple[str, ...]
    visible: frozenset[str]
    sent: tuple[tuple[int, Tool], ...] = ()
    extra: tuple[str, ...] = ()

    def tokens(self, count: Callable[[str], int], render: Callable[[Tool], str] | None = None) -> int:
        """The tokens of :attr:`texts`; with ``render``, each sent definition is counted in the form ``render``
        gives it (a host's own wire form, e.g. ``parameters`` for ``inputSchema``) and the other texts as they are."""
        if render is None:
            return sum(count(t) for t in self.texts)
        return sum(count(render(d)) for _i, d in self.sent) + sum(count(t) for t in self.extra)


def _visible(tools: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    return frozenset(tool_key(t) for t in tools)


def _of(defs: Sequence[tuple[int, Tool]], extra: Sequence[str] = (), visible: frozenset[str] | None = None,
        tools: Sequence[Mapping[str, Any]] = ()) -> Payload:  # fmt: skip
    texts = (*(dumps(d) for _i, d in defs), *extra)
    seen = visible if visible is not None else _visible(tools[i] for i, _d in defs if i != META)
    return Payload(texts, seen, tuple(defs), tuple(extra))


def full(tools: Sequence[Mapping[str, Any]]) -> Payload:
    """Baseline: every tool definition, as listed."""
    return _of([(i, wire_tool(t)) for i, t in enumerate(tools)], tools=tools)


def slim(tools: Sequence[Mapping[str, Any]]) -> Payload:
    """Every tool, without display metadata, output schemas and optional schema keywords (see ``slim_tool``)."""
    return _of([(i, slim_tool(t)) for i, t in enumerate(tools)], tools=tools)


def dedup(tools: Sequence[Mapping[str, Any]]) -> Payload:
    """Every tool with repeated sub-schemas replaced by ``$ref``; the shared ``$defs`` block is counted too."""
    rewritten, defs = dedup_tools(tools)
    return _of(list(enumerate(rewritten)), [dumps(defs)] if defs else [], tools=tools)


def topk(tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], k: int) -> Payload:
    """Only the ``k`` best-ranked tools, with full definitions (tool-rot's semantic routing)."""
    return _of([(i, wire_tool(tools[i])) for i in ranking[:k]], tools=tools)


def search_results(tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], limit: int) -> list[Tool]:
    """What one ``search_tools`` call returns: the ``limit`` best-ranked definitions (the projection counts this
    result; a live host returns it as the meta tool's result)."""
    return [wire_tool(tools[i]) for i in ranking[:limit]]


def search_tool(
    tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], query: str, n_results: int
) -> Payload:
    """One ``search_tools`` definition, the model's search call, and the call's result: ``n_results`` definitions.

    This is the cost of a turn in which the model searches once (mcpgw's measure); the returned tools are the
    ones it can call.
    """
    chosen = [tools[i] for i in ranking[:n_results]]
    call = dumps({"name": SEARCH_TOOL["name"], "arguments": {"query": query, "limit": n_results}})
    result = dumps(search_results(tools, ranking, n_results))
    return _of([(META, dict(SEARCH_TOOL))], [call, result], _visible(chosen))


def summary_pool(tools: Sequence[Mapping[str, Any]]) -> str:
    """The always-resident phase-1 pool: one ``name: summary`` line per tool."""
    return "\n".join(f"{tool_name(t)}: {tool_summary(t)}" for t in tools)


def two_phase(tools: Sequence[Mapping[str, Any]], ranking: Sequence[int], k: int) -> Payload:
    """Tool Attention: the summary pool for every tool plus full definitions of the ``k`` best-ranked tools.

    Only the promoted ``k`` tools are callable (the paper's state gate rejects calls to the others).
    """
    defs = [(i, wire_tool(tools[i])) for i in ranking[:k]]
    pool = summary_pool(tools)
    visible = _visible(tools[i] for i, _d in defs)
    return Payload((pool, *(dumps(d) for _i, d in defs)), visible, tuple(defs), (pool,))


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
