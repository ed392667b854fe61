"""A provider's own count of a server's tools, where the user has a key and asks for it
(``--tokenizers anthropic:count_tokens``): Anthropic's ``POST /v1/messages/count_tokens`` through the anthropic SDK,
which reads ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` from the environment (the key is never stored).

Rule (docs/footprint.md): with the tools ``T`` as Anthropic takes them (``name``, ``description``,
``input_schema``) and one fixed user message ``m``,

* **total** = count(m, T) − count(m): every token the tools add to a request, Anthropic's tool-use system prompt
  included (it is added once when any tool is offered);
* **per tool** = count(m, T) − count(m, T without the tool): what keeping that tool costs, exactly.

That is ``len(T) + 2`` requests (run four at a time). The per-tool figures add up to the total less the tool-use
prompt (reported as ``overhead``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from promcp.errors import ConfigError

__all__ = [
    "ANTHROPIC_COUNT",
    "DEFAULT_ANTHROPIC_MODEL",
    "ExactCount",
    "exact_count",
    "is_exact",
    "split_names",
]

ANTHROPIC_COUNT: Final = "anthropic:count_tokens"
#: the model counted against unless the name says another (``anthropic:count_tokens:<model>``)
DEFAULT_ANTHROPIC_MODEL: Final = "claude-sonnet-4-5"
_MESSAGE: Final = [{"role": "user", "content": "x"}]
_WORKERS: Final = 4


class ExactCountError(ConfigError):
    """The provider could not count (no key, the API refused or failed): one line, no traceback."""


@dataclass(frozen=True)
class ExactCount:
    """A provider's count of a tool list: per tool (by name), the total, and the tool-use prompt it adds once."""

    name: str  # as given in --tokenizers
    model: str
    per_tool: dict[str, int]
    total: int

    @property
    def overhead(self) -> int:
        return self.total - sum(self.per_tool.values())


def is_exact(name: str) -> bool:
    """A ``--tokenizers`` name that asks a provider to count (not a local tokenizer)."""
    return name == ANTHROPIC_COUNT or name.startswith(ANTHROPIC_COUNT + ":")


def split_names(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(local tokenizers, provider counts) of a ``--tokenizers`` list, each in its order."""
    return [n for n in names if not is_exact(n)], [n for n in names if is_exact(n)]


def _anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema") or {}
    out: dict[str, Any] = {
        "name": str(tool.get("name")),
        "input_schema": dict(schema) if isinstance(schema, Mapping) else {"type": "object"},
    }
    out["input_schema"].setdefault("type", "object")
    if tool.get("description"):
        out["description"] = str(tool["description"])
    return out


def exact_count(
    name: str, tools: Sequence[Mapping[str, Any]], *, timeout_s: float = 30.0, client: Any = None
) -> ExactCount:
    """Ask the provider of ``name`` to count ``tools`` (host form: name, description, inputSchema). Raises
    :class:`ExactCountError` with one line when there is no key or the API fails."""
    if not is_exact(name):
        raise ExactCountError(f"{name!r} is not a provider count", source="--tokenizers")
    model = name[len(ANTHROPIC_COUNT) + 1 :] or DEFAULT_ANTHROPIC_MODEL
    if client is None:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ExactCountError(
                f"{name}: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a gateway) to count with Anthropic",
                source="--tokenizers",
            )
        try:
            import anthropic
        except ImportError:
            raise ExactCountError(
                f"{name}: the anthropic package is not installed (pip install anthropic)",
                source="--tokenizers",
            ) from None
        client = anthropic.Anthropic(timeout=timeout_s, max_retries=2)
    listed = [_anthropic_tool(t) for t in tools]
    count = _counter(name, client, model)
    requests: list[list[dict[str, Any]]] = [[], listed] + [
        listed[:i] + listed[i + 1 :] for i in range(len(listed))
    ]
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        counts = list(pool.map(count, requests))
    base, full, without = counts[0], counts[1], counts[2:]
    per_tool = {str(t["name"]): full - w for t, w in zip(listed, without, strict=True)}
    return ExactCount(name=name, model=model, per_tool=per_tool, total=full - base if listed else 0)


def _counter(name: str, client: Any, model: str) -> Callable[[list[dict[str, Any]]], int]:
    def count(tools: list[dict[str, Any]]) -> int:
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        try:
            result = client.messages.count_tokens(model=model, messages=_MESSAGE, **extra)
        except Exception as exc:  # the SDK's errors (auth, rate limit, connection…): one line each
            status = getattr(exc, "status_code", None)
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            where = f"HTTP {status}: " if status else ""
            raise ExactCountError(
                f"{name}: Anthropic's count_tokens failed: {where}{str(message).splitlines()[0][:200]}",
                source="--tokenizers",
            ) from None
        tokens = getattr(result, "input_tokens", None)
        if not isinstance(tokens, int):
            raise ExactCountError(f"{name}: count_tokens answered no input_tokens", source="--tokenizers")
        return tokens

    return count
