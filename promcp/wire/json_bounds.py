"""JSON from the wire, bounded: every body a live source decodes goes through :func:`loads`.

A JSON text nested thousands deep is a few kilobytes and makes Python's parser — or any recursive walk of what it
returns (token counting, redaction, schema readers) — raise :class:`RecursionError`, which is not a ``ValueError``
and escapes the "not JSON" paths. :func:`loads` turns it, and any document nested deeper than :data:`MAX_DEPTH`, into
:class:`JSONTooDeep`, a ``ValueError`` naming the bound: callers record an ``unparsed_*`` event or answer 400 as
for any other bad body. The size bound belongs to each reader (its body limit).
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["MAX_DEPTH", "JSONTooDeep", "loads"]

#: Deepest nesting of objects and arrays accepted (real API and MCP messages stay well under 64).
MAX_DEPTH: Final = 256


class JSONTooDeep(ValueError):
    """A JSON document nested deeper than :data:`MAX_DEPTH`."""


def loads(data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that raises :class:`JSONTooDeep` (a ``ValueError``) instead of :class:`RecursionError`, and
    for any document nested deeper than ``max_depth``: what it returns is safe to walk recursively."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise JSONTooDeep(f"JSON nested deeper than {max_depth} levels") from None
    if isinstance(value, dict | list) and depth_over(value, max_depth):
        raise JSONTooDeep(f"JSON nested deeper than {max_depth} levels")
    return value


def depth_over(value: Any, limit: int) -> bool:
    """Whether ``value``'s objects and arrays nest deeper than ``limit`` (an iterative walk: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False
