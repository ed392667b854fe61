"""What every wire module shares: reading a field of a JSON dict *or* an SDK object, strict paths, JSON text rules.

The parsers accept plain decoded JSON (what an HTTP client or a proxy sees) and the vendor SDKs' typed objects
(pydantic models with the same field names) alike, through :func:`get`. Strict parsing (the host's backends) goes
through :func:`need` / :func:`count`, which raise :class:`~promcp.errors.WireFormatError` naming the path.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

from promcp.errors import WireFormatError
from promcp.wire.json_bounds import loads

_MISSING = object()


def get(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an SDK object; ``default`` when absent or ``None``."""
    value = obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)
    return default if value is None else value


def need(doc: Any, path: str, *, at: str = "") -> Any:
    """``doc[a][b]…`` for ``path`` "a.b…" (integers index lists), or WireFormatError naming what is missing
    (``at`` is the path of ``doc`` itself in the response, for the message)."""
    cur = doc
    for part in path.split("."):
        try:
            cur = cur[int(part)] if isinstance(cur, list) else cur[part]
        except (KeyError, IndexError, TypeError, ValueError):
            where = f"{at}.{path}" if at else path
            raise WireFormatError(f"malformed response: no {where!r}", path=where) from None
    return cur


def count(usage: Any, key: str, *, required: bool = True, at: str = "usage") -> int | None:
    """A token count of a usage block: a non-negative int, ``None`` when absent and optional, else WireFormatError."""
    value = get(usage, key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        shown = "missing" if value is None else repr(value)
        raise WireFormatError(f"malformed response: {at}.{key} is {shown}", path=f"{at}.{key}")
    return value


def opt_int(obj: Any, name: str) -> int | None:
    """A count that may be absent (lenient parsing: anything that is not a non-negative int is ``None``)."""
    value = get(obj, name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def as_dict(obj: Any) -> dict[str, Any]:
    """A JSON-able dict of a mapping (as is) or an SDK object (``model_dump`` without its unset null fields)."""
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        value = dump(exclude_none=True)
        return dict(value) if isinstance(value, Mapping) else {}
    return {}


def compact_json(value: Any) -> str:
    """JSON as promcp counts it everywhere: compact separators, UTF-8 kept (``ensure_ascii=False``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def arguments_digest(arguments: Any) -> str:
    """A short digest of tool-call arguments (of their :func:`canonical_json`): what an S2 and the S3 that carries
    it out are joined on when the two are recorded by different processes (an LLM proxy and an MCP proxy)."""
    return hashlib.blake2b(
        canonical_json(arguments).encode("utf-8", "surrogatepass"), digest_size=8
    ).hexdigest()


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal arguments give equal text however the model ordered them."""
    if isinstance(value, str):
        value = loads_or_raw(value)
    return json.dumps(value or {}, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def loads_or_raw(raw: str) -> Any:
    try:
        return loads(raw)
    except ValueError:
        return raw


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str]:
    """Tool-call arguments as (object, raw text). Invalid JSON or a non-object gives ``{}`` with the raw text kept:
    a host answers such a call with an error message, as a real client does (see :func:`arguments_are_valid_json`)."""
    if isinstance(raw, Mapping):
        obj = dict(raw)
        return obj, compact_json(obj)
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        value = loads(text) if text.strip() else {}
    except ValueError:
        return {}, text
    return (value, text) if isinstance(value, dict) else ({}, text)


def arguments_are_valid_json(raw: str | None) -> bool:
    """Whether a tool call's raw arguments text is a JSON object (``None``/empty: no text to check)."""
    if raw is None or not raw.strip():
        return True
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


def text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of blocks (text kept, other blocks summarized).

    Understands the block shapes of every supported API: ``text`` / ``input_text`` / ``output_text`` blocks,
    Anthropic ``tool_result`` (its own content, recursively), ``tool_use`` (name + input as compact JSON) and
    ``tool_reference`` (a tool search result: the tool's name; the API loads its definition, which counts as a
    schema); anything else (images, documents, audio) is ``[<type> content omitted]``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping) or not hasattr(content, "__iter__"):
        content = [content]
    out: list[str] = []
    for block in content:
        if isinstance(block, str):
            out.append(block)
            continue
        kind = get(block, "type")
        if kind in ("text", "input_text", "output_text") or (kind is None and get(block, "text") is not None):
            out.append(str(get(block, "text", "")))
        elif kind == "tool_result":
            out.append(text_of(get(block, "content")))
        elif kind == "tool_use":
            out.append(compact_json({"name": get(block, "name"), "input": get(block, "input", {})}))
        elif kind == "tool_reference":
            out.append(f"[tool_reference {get(block, 'tool_name', '')}]")
        else:
            out.append(f"[{kind or 'content'} content omitted]")
    return "\n".join(out)


_fallback_ids = itertools.count()


def next_call_id() -> str:
    """A tool-call id for a response that carries none (older Ollama): unique in this process, so S2/S3/S4 join
    and the ``tool_results`` part keys of different rounds never collide (every source uses this one counter)."""
    return f"call_{next(_fallback_ids)}"


IdFactory = Callable[[], str]
