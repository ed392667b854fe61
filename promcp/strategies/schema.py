"""Tool definitions as a host sends them, and the two data-layer rewrites: slimming and ``$ref`` deduplication.

A *tool* here is a plain dict as ``tools/list`` returns it (``name``, ``description``, ``inputSchema`` and whatever
else the server sent: ``title``, ``outputSchema``, ``annotations``, ``_meta``, ``icons``). Every function is pure:
it returns new objects and never mutates its input.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Tool = dict[str, Any]

#: Keys a catalog file adds around a tool that a server never sends (dropped by :func:`wire_tool`).
CATALOG_ONLY_KEYS = frozenset(
    {"server", "server_name", "_form", "benchmark", "source", "id", "summary", "full_schema"}
)

#: Tool-level keys :func:`slim_tool` drops: display metadata and the output schema (the model never needs them to
#: call the tool; ``outputSchema`` only validates ``structuredContent``).
SLIM_TOOL_KEYS = frozenset({"title", "annotations", "outputSchema", "icons", "_meta", "execution"})

#: JSON-Schema keywords :func:`slim_tool` drops at every level of ``inputSchema`` (keywords only: a *property*
#: called ``title`` or ``default`` is kept). ``additionalProperties`` is dropped only when it is ``false``.
SLIM_SCHEMA_KEYWORDS = frozenset(
    {"$schema", "$id", "$comment", "title", "default", "examples", "deprecated", "readOnly", "writeOnly"}
)

#: Keywords whose value is a map of names to sub-schemas (names are data, not keywords).
_NAMED_SUBSCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
#: Keywords whose value is a sub-schema or a list of sub-schemas.
_SUBSCHEMA = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
)
_SUBSCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})

#: A repeated sub-schema shorter than this (compact JSON characters) is not worth a ``$ref``.
DEDUP_MIN_CHARS = 96


def dumps(obj: Any) -> str:
    """Compact JSON, the form hosts put tool definitions in (no spaces, non-ASCII kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def wire_tool(raw: Mapping[str, Any]) -> Tool:
    """The tool as its server listed it: catalog wrappers unwrapped, catalog-only keys removed.

    Accepts ``{"full_schema": {...}}`` (Tool Attention), ``input_schema`` (MCP-Bench dumps) and ``parameters``
    (the host's rendered form) as well.
    """
    if isinstance(raw.get("full_schema"), Mapping):
        raw = raw["full_schema"]
    tool = {k: v for k, v in raw.items() if k not in CATALOG_ONLY_KEYS}
    for alias in ("input_schema", "parameters"):
        if "inputSchema" not in tool and alias in tool:
            tool["inputSchema"] = tool.pop(alias)
    return tool


def tool_name(raw: Mapping[str, Any]) -> str:
    """The tool's name (``full_schema.name`` for Tool Attention entries)."""
    inner = raw.get("full_schema")
    name = raw.get("name") if not isinstance(inner, Mapping) else inner.get("name", raw.get("id"))
    return str(name if name is not None else raw.get("id", ""))


def tool_key(raw: Mapping[str, Any]) -> str:
    """``"<server>/<tool>"`` (the key of a schemas part) when the server is known, else the tool name."""
    server = raw.get("server") or raw.get("server_name")
    name = tool_name(raw)
    return f"{server}/{name}" if server else name


def tool_texts(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """One compact JSON text per tool, as sent."""
    return [dumps(wire_tool(t)) for t in tools]


# -- slimming -----------------------------------------------------------------------------------------------------


def _slim_schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_slim_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SLIM_SCHEMA_KEYWORDS:
            continue
        if key == "additionalProperties" and value is False:
            continue
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            out[key] = {name: _slim_schema(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA or key in _SUBSCHEMA_LISTS:
            out[key] = _slim_schema(value)
        else:
            out[key] = value
    return out


def slim_tool(raw: Mapping[str, Any]) -> Tool:
    """The tool without :data:`SLIM_TOOL_KEYS` and without :data:`SLIM_SCHEMA_KEYWORDS` anywhere in its schema."""
    tool = {k: v for k, v in wire_tool(raw).items() if k not in SLIM_TOOL_KEYS}
    if "inputSchema" in tool:
        tool["inputSchema"] = _slim_schema(tool["inputSchema"])
    return tool


# -- $ref deduplication -------------------------------------------------------------------------------------------


def _subschemas(schema: Any) -> Iterable[dict[str, Any]]:
    """Every sub-schema below ``schema`` (not ``schema`` itself), pre-order."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        children: list[Any] = []
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            children = list(value.values())
        elif key in _SUBSCHEMA:
            children = [value]
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            children = value
        for child in children:
            if isinstance(child, dict):
                yield child
                yield from _subschemas(child)


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _replace(schema: Any, refs: Mapping[str, str], used: Counter[str]) -> Any:
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            out[key] = {n: _ref_or_walk(s, refs, used) for n, s in value.items()}
        elif key in _SUBSCHEMA:
            out[key] = _ref_or_walk(value, refs, used)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_ref_or_walk(s, refs, used) for s in value]
        else:
            out[key] = value
    return out


def _ref_or_walk(sub: Any, refs: Mapping[str, str], used: Counter[str]) -> Any:
    if isinstance(sub, dict):
        name = refs.get(_canon(sub))
        if name is not None:
            used[name] += 1
            return {"$ref": f"#/$defs/{name}"}
    return _replace(sub, refs, used)


def dedup_tools(
    tools: Sequence[Mapping[str, Any]], min_chars: int = DEDUP_MIN_CHARS
) -> tuple[list[Tool], Tool]:
    """Replace sub-schemas repeated across ``tools`` by ``{"$ref": "#/$defs/dN"}``.

    Returns the rewritten tools and the shared definitions block ``{"$defs": {...}}`` (empty dict when nothing
    repeats). Only sub-schemas of at least ``min_chars`` compact-JSON characters that end up referenced at least
    twice become definitions; the outermost repeated sub-schema wins over the ones nested inside it.
    """
    wired = [wire_tool(t) for t in tools]
    counts: Counter[str] = Counter()
    for tool in wired:
        for sub in _subschemas(tool.get("inputSchema")):
            counts[_canon(sub)] += 1
    candidates = [c for c, n in counts.items() if n >= 2 and len(c) >= min_chars]
    candidates.sort(key=lambda c: (-len(c), c))
    for _ in range(4):  # drop definitions that the outermost-first rewrite leaves referenced only once
        refs = {c: f"d{i}" for i, c in enumerate(candidates)}
        used: Counter[str] = Counter()
        rewritten = [{**t, "inputSchema": _replace(t.get("inputSchema"), refs, used)} for t in wired]
        keep = [c for c in candidates if used[refs[c]] >= 2]
        if len(keep) == len(candidates):
            break
        candidates = keep
    refs = {c: f"d{i}" for i, c in enumerate(candidates)}
    used = Counter()
    rewritten = [
        {**t, "inputSchema": _replace(t.get("inputSchema"), refs, used)} if "inputSchema" in t else t
        for t in wired
    ]
    defs: Tool = {"$defs": {name: json.loads(c) for c, name in refs.items()}} if refs else {}
    return rewritten, defs


# -- summaries ----------------------------------------------------------------------------------------------------

#: Longest summary :func:`tool_summary` derives from a description (characters).
SUMMARY_MAX_CHARS = 120


def tool_summary(raw: Mapping[str, Any]) -> str:
    """A one-line summary: the catalog's own ``summary`` when it has one, else the description's first sentence."""
    given = raw.get("summary")
    if isinstance(given, str) and given.strip():
        return given.strip()
    desc = str(wire_tool(raw).get("description") or "").strip()
    first = desc.split("\n", 1)[0]
    for stop in (". ", "? ", "! "):
        head, sep, _ = first.partition(stop)
        if sep:
            first = head + stop.strip()
            break
    if len(first) > SUMMARY_MAX_CHARS:
        first = first[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"
    return first


# -- wire forms ---------------------------------------------------------------------------------------------------

#: The forms a host puts a definition in: MCP's own, the ``parameters`` form most hosts render (promcp's host,
#: :func:`promcp.wire.mcp.tool_text`), and OpenAI's ``{"type": "function", "function": …}``.
FORMS = ("mcp", "parameters", "openai")


def form_of(raw: Mapping[str, Any]) -> str:
    """Which of :data:`FORMS` a definition as sent is in."""
    if isinstance(raw.get("function"), Mapping):
        return "openai"
    return "parameters" if "parameters" in raw and "inputSchema" not in raw else "mcp"


def render(tool: Mapping[str, Any], form: str = "mcp") -> str:
    """A wire-form definition (:func:`wire_tool`) as compact JSON in ``form``: the text the host sends."""
    if form == "mcp":
        return dumps(tool)
    body = {"name": tool.get("name"), "description": tool.get("description") or "",
            "parameters": dict(tool.get("inputSchema") or {})}  # fmt: skip
    return dumps(body if form == "parameters" else {"type": "function", "function": body})
