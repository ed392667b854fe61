"""A provider's own count of a server's tools, where the user has a key and asks for it:

* ``anthropic:count_tokens[:MODEL]`` — Anthropic's ``POST /v1/messages/count_tokens`` through the anthropic SDK,
  which reads ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` from the environment;
* ``gemini:count_tokens[:MODEL]`` — the Gemini API's ``POST /v1beta/models/{model}:countTokens`` (httpx), with
  ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``) and ``GOOGLE_GEMINI_BASE_URL`` as the Gemini CLI reads them; the tools
  as function declarations the way the CLI sends them (``parametersJsonSchema``).

The key is never stored. Rule (docs/footprint.md): with the tools ``T`` in the provider's shape and one fixed user
message ``m``,

* **total** = count(m, T) − count(m): every token the tools add to a request, a tool-use system prompt the
  provider adds once when any tool is offered included;
* **per tool** = count(m, T) − count(m, T without the tool): what keeping that tool costs, exactly.

That is ``len(T) + 2`` requests (run four at a time). The per-tool figures add up to the total less the provider's
fixed part (reported as ``overhead``).
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
    "DEFAULT_MODELS",
    "GEMINI_COUNT",
    "ExactCount",
    "exact_count",
    "is_exact",
    "split_names",
]

ANTHROPIC_COUNT: Final = "anthropic:count_tokens"
GEMINI_COUNT: Final = "gemini:count_tokens"
#: the model counted against unless the name says another (``anthropic:count_tokens:<model>``)
DEFAULT_MODELS: Final = {ANTHROPIC_COUNT: "claude-sonnet-4-5", GEMINI_COUNT: "gemini-2.5-flash"}
GEMINI_API: Final = "https://generativelanguage.googleapis.com"
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

    @property
    def api(self) -> str:
        """The endpoint that counted, as the output names it."""
        if self.name.startswith(GEMINI_COUNT):
            return "the Gemini API's models/{model}:countTokens".replace("{model}", self.model)
        return f"Anthropic's POST /v1/messages/count_tokens for {self.model}"


def _provider(name: str) -> str | None:
    return next((p for p in DEFAULT_MODELS if name == p or name.startswith(p + ":")), None)


def is_exact(name: str) -> bool:
    """A ``--tokenizers`` name that asks a provider to count (not a local tokenizer)."""
    return _provider(name) is not None


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


def _gemini_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema")
    out: dict[str, Any] = {"name": str(tool.get("name")), "description": str(tool.get("description") or "")}
    if isinstance(schema, Mapping) and schema:
        out["parametersJsonSchema"] = dict(schema)
    return out


def exact_count(
    name: str, tools: Sequence[Mapping[str, Any]], *, timeout_s: float = 30.0, client: Any = None
) -> ExactCount:
    """Ask the provider of ``name`` to count ``tools`` (host form: name, description, inputSchema). Raises
    :class:`ExactCountError` with one line when there is no key or the API fails."""
    provider = _provider(name)
    if provider is None:
        raise ExactCountError(f"{name!r} is not a provider count", source="--tokenizers")
    model = name[len(provider) + 1 :] or DEFAULT_MODELS[provider]
    if provider == GEMINI_COUNT:
        listed = [_gemini_tool(t) for t in tools]
        count = _gemini_counter(name, model, timeout_s)
    else:
        listed = [_anthropic_tool(t) for t in tools]
        count = _counter(name, client or _anthropic_client(name, timeout_s), model)
    requests: list[list[dict[str, Any]]] = [[], listed] + [
        listed[:i] + listed[i + 1 :] for i in range(len(listed))
    ]
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        counts = list(pool.map(count, requests))
    base, full, without = counts[0], counts[1], counts[2:]
    per_tool = {str(t["name"]): full - w for t, w in zip(listed, without, strict=True)}
    return ExactCount(name=name, model=model, per_tool=per_tool, total=full - base if listed else 0)


def _anthropic_client(name: str, timeout_s: float) -> Any:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise ExactCountError(
            f"{name}: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a gateway) to count with Anthropic",
            source="--tokenizers",
        )
    try:
        import anthropic
    except ImportError:
        raise ExactCountError(
            f"{name}: the anthropic package is not installed (pip install anthropic)", source="--tokenizers"
        ) from None
    return anthropic.Anthropic(timeout=timeout_s, max_retries=2)


def _gemini_counter(name: str, model: str, timeout_s: float) -> Callable[[list[dict[str, Any]]], int]:
    import httpx2 as httpx

    key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
    if not key:
        raise ExactCountError(
            f"{name}: set GEMINI_API_KEY (and GOOGLE_GEMINI_BASE_URL for a gateway) to count with the Gemini API",
            source="--tokenizers",
        )
    base = (os.environ.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_API).rstrip("/")
    url = f"{base}/v1beta/models/{model}:countTokens"

    def count(tools: list[dict[str, Any]]) -> int:
        request: dict[str, Any] = {
            "model": f"models/{model}",
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        }
        if tools:
            request["tools"] = [{"functionDeclarations": tools}]
        try:
            resp = httpx.post(
                url,
                json={"generateContentRequest": request},
                headers={"x-goog-api-key": key},
                timeout=timeout_s,
            )
        except httpx.HTTPError as exc:
            raise ExactCountError(
                f"{name}: the Gemini API's countTokens failed: {type(exc).__name__}: {str(exc)[:200]}",
                source="--tokenizers",
            ) from None
        try:
            doc = resp.json()
        except ValueError:
            doc = None
        if resp.status_code != 200:
            error = doc.get("error") if isinstance(doc, dict) else None
            message = error.get("message") if isinstance(error, dict) else resp.text[:200]
            raise ExactCountError(
                f"{name}: the Gemini API's countTokens failed: HTTP {resp.status_code}: "
                f"{str(message).splitlines()[0][:200] if message else ''}",
                source="--tokenizers",
            )
        tokens = doc.get("totalTokens") if isinstance(doc, dict) else None
        if not isinstance(tokens, int):
            raise ExactCountError(f"{name}: countTokens answered no totalTokens", source="--tokenizers")
        return tokens

    return count


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
