"""What the network backends share: one pooled HTTP client per backend, error mapping, timing, option checks.

Wire formats are written out explicitly in each backend (no vendor SDK), so the exact request a run sends is in
this repository and the stub servers in ``tests/stubs`` can replay each provider's recorded shapes. Retries are
not done here: the host applies the evaluation card's policy (:func:`promcp.host.llm.base.call_with_retries`) and
:func:`promcp.host.llm.base.is_retryable` decides from ``LLMError.status_code`` / ``error_type``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

import httpx2 as httpx

from promcp import tokenizers
from promcp.errors import ConfigError, LLMError
from promcp.host.llm.base import ToolCall, ToolSpec
from promcp.tokenizers import CachedTokenizer

DEFAULT_TIMEOUT_S = 600.0

#: HTTP status → promcp error_type (status codes the host retries are in base._RETRY_STATUS)
_STATUS_TYPES = {
    400: "bad_request",
    401: "auth",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "too_large",
    429: "rate_limit",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "timeout",
    529: "overloaded",
}


def reject_unknown(backend: str, extra: dict[str, Any]) -> None:
    if extra:
        raise ConfigError(f"unknown {backend} option(s): {', '.join(sorted(extra))}", key="llm.options")


def api_key(explicit: str | None, env_var: str, backend: str, *, required: bool) -> str | None:
    key = explicit or os.environ.get(env_var)
    if required and not key:
        raise ConfigError(
            f"the {backend} backend needs an API key: set {env_var} (or llm.api_key: ${{{env_var}}})",
            key="llm.api_key",
        )
    return key


def _error_message(body: bytes) -> str:
    """The provider's own error text from an error body (OpenAI, Anthropic and Ollama shapes), else the raw start."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            kind = err.get("type") or err.get("code")
            msg = err.get("message") or json.dumps(err)[:300]
            return f"{kind}: {msg}" if kind else str(msg)
        if isinstance(err, str):
            return err
    return json.dumps(doc)[:300]


class HttpBackendMixin:
    """A pooled ``httpx2.AsyncClient`` and a JSON POST that maps failures onto :class:`LLMError`."""

    provider: str
    model: str
    tokenizer: CachedTokenizer
    context_window: int | None
    _client: httpx.AsyncClient | None = None
    _base_url: str
    _headers: dict[str, str]
    _timeout_s: float

    def _setup_http(
        self,
        *,
        model: str,
        base_url: str,
        headers: dict[str, str],
        timeout_s: float | None,
        tokenizer: str | None,
        default_tokenizer: str,
        context_window: int | None,
    ) -> None:
        """The attributes every network backend sets (see the LLMBackend contract)."""
        self.model = model
        self._base_url = base_url.rstrip("/")
        self._headers = {"content-type": "application/json", **headers}
        self._timeout_s = timeout_s or DEFAULT_TIMEOUT_S
        self.tokenizer = tokenizers.get(tokenizer or default_tokenizer)
        self.context_window = context_window

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self._base_url, headers=self._headers, timeout=httpx.Timeout(self._timeout_s)
            )
        return self._client

    async def _post_json(
        self, path: str, payload: dict[str, Any]
    ) -> tuple[dict[str, Any], float, dict[str, str]]:
        """POST ``payload``; return the decoded JSON object, the wall time in ms, and the response headers."""
        t0 = time.perf_counter_ns()
        try:
            resp = await self._http().post(path, json=payload)
        except httpx.TimeoutException as exc:
            raise LLMError(
                f"{self.provider}: request timed out after {self._timeout_s:g} s", error_type="timeout"
            ) from exc
        except httpx.TransportError as exc:
            raise LLMError(
                f"{self.provider}: cannot reach {self._base_url}: {exc}", error_type="connection"
            ) from exc
        elapsed_ms = (time.perf_counter_ns() - t0) / 1e6
        if resp.status_code >= 400:
            retry_after = resp.headers.get("retry-after")
            hint = f" (retry-after {retry_after} s)" if retry_after else ""
            raise LLMError(
                f"{self.provider}: HTTP {resp.status_code}: {_error_message(resp.content)}{hint}",
                error_type=_STATUS_TYPES.get(resp.status_code, "http_error"),
                status_code=resp.status_code,
            )
        try:
            doc = resp.json()
        except ValueError as exc:
            raise LLMError(
                f"{self.provider}: response is not JSON: {resp.content[:120]!r}", error_type="bad_response"
            ) from exc
        if not isinstance(doc, dict):
            raise LLMError(f"{self.provider}: response is not a JSON object", error_type="bad_response")
        return doc, elapsed_ms, dict(resp.headers)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def function_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tools in the ``{"type": "function", "function": {...}}`` shape shared by OpenAI and Ollama."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


def function_calls(message: dict[str, Any], provider: str) -> list[ToolCall]:
    """The ``tool_calls`` of an OpenAI- or Ollama-shaped assistant message (ids numbered when absent)."""
    calls = []
    for i, c in enumerate(message.get("tool_calls") or []):
        fn = need(c, "function", provider)
        args, raw = parse_arguments(fn.get("arguments", ""))
        calls.append(
            ToolCall(
                id=c.get("id") or f"call_{i}",
                name=need(fn, "name", provider),
                arguments=args,
                raw_arguments=raw,
            )
        )
    return calls


def need(doc: Any, path: str, provider: str) -> Any:
    """``doc[a][b]…`` for ``path`` "a.b…" (integers index lists), or LLMError naming what is missing."""
    cur = doc
    for part in path.split("."):
        try:
            cur = cur[int(part)] if isinstance(cur, list) else cur[part]
        except (KeyError, IndexError, TypeError, ValueError):
            raise LLMError(
                f"{provider}: malformed response: no {path!r}", error_type="bad_response"
            ) from None
    return cur


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str]:
    """Tool-call arguments as (object, raw text). Invalid JSON or a non-object gives ``{}`` with the raw text kept:
    the host answers such a call with an error message, as a real client does (see ``arguments_are_valid_json``)."""
    if isinstance(raw, dict):
        return raw, json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        value = json.loads(text) if text.strip() else {}
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
