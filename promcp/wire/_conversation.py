"""A request's conversation as a sequence of block digests: what tells an observer of raw traffic (the LLM proxy)
which earlier request a new one continues.

Each message of the conversation is cut into blocks (Anthropic content blocks and Gemini parts; one block per
OpenAI / Ollama message or Responses input item), and each block becomes a short digest of its role and canonical JSON, with
``cache_control`` marks dropped (clients move them from turn to turn). System messages and the system prompt are
left out: clients rewrite them between calls (Claude Code updates its list of deferred tools). A request continues
another when the other's blocks are a subsequence of its own — not necessarily a prefix: Claude Code merges
consecutive assistant turns (and their tool results) into one message between two calls of the same task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from promcp.wire._common import canonical_json, get

__all__ = ["conversation_blocks", "is_subsequence"]

_SYSTEM_ROLES = frozenset({"system", "developer"})


def _digest(role: Any, block: Any) -> str:
    if isinstance(block, Mapping) and "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    text = f"{role}\x00{canonical_json(block) if not isinstance(block, str) else block}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def conversation_blocks(api: str, body: Mapping[str, Any]) -> list[str]:
    """The digests of the conversation blocks of a request ``body`` of ``api`` (see the module docstring)."""
    out: list[str] = []
    if api == "gemini":  # one block per part: the CLI sends a turn's texts as one content or several
        for content in body.get("contents") or ():
            role = get(content, "role", "user")
            out.extend(_digest(role, _gemini_part(part)) for part in get(content, "parts") or ())
        return out
    if api == "openai-responses":
        items = body.get("input")
        if isinstance(items, str):
            return [_digest("user", items)]
        for item in items or ():
            if get(item, "role") not in _SYSTEM_ROLES:
                out.append(_digest(get(item, "role") or get(item, "type"), item))
        return out
    for msg in body.get("messages") or ():
        role = get(msg, "role")
        if role in _SYSTEM_ROLES:
            continue
        content = get(msg, "content") if api == "anthropic" else None
        if api == "anthropic" and not isinstance(content, str):
            out.extend(_digest(role, block) for block in content or ())
        elif api == "anthropic":
            out.append(_digest(role, {"type": "text", "text": content}))
        else:
            out.append(_digest(role, msg))
    return out


def _gemini_part(part: Any) -> Any:
    """A Gemini part as compared: a call's client-made ``id`` and its ``thoughtSignature`` left out (the CLI adds
    the first to the model's call when it puts it into the history)."""
    if not isinstance(part, Mapping):
        return part
    part = {k: v for k, v in part.items() if k != "thoughtSignature"}
    call = part.get("functionCall")
    if isinstance(call, Mapping):
        part["functionCall"] = {k: v for k, v in call.items() if k != "id"}
    return part


def is_subsequence(earlier: Sequence[str], later: Sequence[str]) -> bool:
    """Whether ``earlier`` appears in ``later`` in order (not necessarily contiguously)."""
    it = iter(later)
    return all(any(x == y for y in it) for x in earlier)
