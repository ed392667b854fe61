"""Deterministic synthetic tool results for replay servers (used when no recorded response matches a call).

A synthetic result is derived from the tool alone (name, description, ``outputSchema``) and the call's arguments,
seeded by their hash: the same call always gets the same bytes. With an ``outputSchema`` the result is an instance
of it (``structuredContent`` + the same JSON as text); without one it is a JSON object echoing the arguments with a
list of records built from the description's words, sized to ``target_bytes`` (x0.5 to x1.5, seeded). Every
synthetic result carries ``_meta: {"promcp/synthetic": true}``: it is shaped like the real server's output, it is
not what the real server would have said.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

SYNTHETIC_META_KEY = "promcp/synthetic"
_WORD = re.compile(r"[A-Za-z][A-Za-z-]{2,}")
_FALLBACK_WORDS = ("result", "record", "value", "entry", "source", "detail", "summary", "status")


def call_seed(server: str, tool: str, arguments: dict[str, Any], seed: int = 0) -> int:
    text = json.dumps([seed, server, tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _words(tool: dict[str, Any]) -> list[str]:
    words = [w.lower() for w in _WORD.findall(str(tool.get("description") or ""))]
    return words or list(_FALLBACK_WORDS)


def _sentence(rng: random.Random, words: list[str], n: int) -> str:
    text = " ".join(rng.choice(words) for _ in range(n))
    return text[:1].upper() + text[1:] + "."


def instance(schema: Any, rng: random.Random, words: list[str], depth: int = 0) -> Any:
    """A value satisfying the common JSON Schema keywords of ``schema`` (type, properties, items, enum)."""
    if not isinstance(schema, dict):
        return _sentence(rng, words, 4)
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key, []) if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return instance(options[0], rng, words, depth)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        found = schema.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        if depth > 4:
            return {}
        return {name: instance(sub, rng, words, depth + 1) for name, sub in props.items()}
    if kind == "array":
        return [instance(schema.get("items", {}), rng, words, depth + 1) for _ in range(rng.randint(2, 4))]
    if kind == "integer":
        lo, hi = int(schema.get("minimum", 0)), int(schema.get("maximum", 1000))
        return rng.randint(lo, max(lo, hi))
    if kind == "number":
        low, high = float(schema.get("minimum", 0.0)), float(schema.get("maximum", 1000.0))
        return round(rng.uniform(low, max(low, high)), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _sentence(rng, words, rng.randint(3, 8))


def synthetic_result(
    server: str, tool: dict[str, Any], arguments: dict[str, Any], *, target_bytes: int = 1500, seed: int = 0
) -> dict[str, Any]:
    """A ``CallToolResult`` dict for one call of ``tool`` (a wire tool dict), marked synthetic in ``_meta``."""
    name = str(tool.get("name"))
    rng = random.Random(call_seed(server, name, arguments, seed))
    words = _words(tool)
    meta = {SYNTHETIC_META_KEY: True}
    output_schema = tool.get("outputSchema")
    if isinstance(output_schema, dict):
        structured = instance(output_schema, rng, words)
        if not isinstance(structured, dict):
            structured = {"result": structured}
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": False,
            "_meta": meta,
        }
    budget = max(64, int(target_bytes * rng.uniform(0.5, 1.5)))
    body: dict[str, Any] = {"tool": name, "arguments": arguments, "results": []}
    i = 0
    while len(json.dumps(body, ensure_ascii=False)) < budget:
        i += 1
        body["results"].append(
            {
                "id": i,
                "title": _sentence(rng, words, rng.randint(2, 5)).rstrip("."),
                "summary": _sentence(rng, words, rng.randint(8, 24)),
                "score": round(rng.random(), 3),
            }
        )
    text = json.dumps(body, ensure_ascii=False, indent=2)
    return {"content": [{"type": "text", "text": text}], "isError": False, "_meta": meta}
