"""What the network backends share: one pooled HTTP client per backend, error mapping, timing, option checks.

Wire formats are written out explicitly in each backend (no vendor SDK), so the exact request a run sends is in
this repository and the stub servers in ``tests/stubs`` can replay each provider's recorded shapes. Retries are
not done here: the host applies the evaluation card's policy (:func:`promcp.host.llm.base.call_with_retries`),
:func:`promcp.host.llm.base.is_retryable` decides from ``LLMError.status_code`` / ``error_type``, and a server's
``Retry-After`` (seconds, HTTP date, or OpenAI's ``retry-after-ms``; capped at :data:`MAX_RETRY_AFTER_S`) travels
on :class:`~promcp.errors.LLMHTTPError` so the wait is at least what the server asked for.

API keys live only in the client's headers: they are never put in events, and an error message that echoes the key
(some providers quote the rejected key) is scrubbed before it leaves the backend.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import os
import re
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx

from promcp import tokenizers
from promcp.errors import ConfigError, LLMError, LLMHTTPError
from promcp.host.llm.base import Message, ToolCall, ToolSpec
from promcp.tokenizers import CachedTokenizer
from promcp.wire import error_message, http_error_type

DEFAULT_TIMEOUT_S = 600.0
#: longest Retry-After honoured (a server asking for more is waited on this long; the per-task timeout still applies)
MAX_RETRY_AFTER_S = 60.0


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


def default_base_url(env_var: str, default: str) -> str:
    """The base URL when the benchmark file and CLI give none: ``env_var`` (as the vendor SDKs and the ollama CLI
    read it; a bare ``host:port`` gets ``http://``), else ``default``."""
    value = os.environ.get(env_var, "").strip()
    if not value:
        return default
    return value if "://" in value else f"http://{value}"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context (certifi roots) for every client: loading the roots takes 0.1-0.3 s per client otherwise."""
    return httpx.create_ssl_context()


def check_base_url(url: str, backend: str) -> str:
    """``url`` without a trailing slash, or ConfigError when it is not an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{backend} base_url {url!r} is not an http:// or https:// URL with a host", key="llm.base_url"
        )
    return url.rstrip("/")


def retry_after_s(headers: httpx.Headers, *, now: datetime | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date (capped)."""
    seconds: float | None = None
    if ms := headers.get("retry-after-ms"):
        try:
            seconds = float(ms) / 1000
        except ValueError:
            seconds = None
    if seconds is None and (value := headers.get("retry-after")):
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds is None:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


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
    _secret: str | None = None
    _call_ids: Iterator[int]

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
        secret: str | None = None,
    ) -> None:
        """The attributes every network backend sets (see the LLMBackend contract); ``secret`` is the API key."""
        self.model = model
        self._base_url = check_base_url(base_url, getattr(self, "name", "llm"))
        self._secret = secret
        self._call_ids = itertools.count()
        self._headers = {"content-type": "application/json", **headers}
        self._timeout_s = timeout_s or DEFAULT_TIMEOUT_S
        self.tokenizer = tokenizers.get(tokenizer or default_tokenizer)
        self.context_window = context_window
        self._http()  # built now, not inside the first timed LLM call

    def _scrub(self, text: str) -> str:
        """``text`` with the API key (if it appears) masked."""
        return text.replace(self._secret, "***") if self._secret else text

    def _fallback_call_id(self) -> str:
        """A tool-call id for providers that send none (older Ollama): unique for this backend's whole run, so
        S2/S3/S4 join and the ``tool_results`` part keys of different rounds never collide."""
        return f"call_{next(self._call_ids)}"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self._base_url,
                headers=self._headers,
                timeout=httpx.Timeout(self._timeout_s),
                verify=_tls_context(),
            )
        return self._client

    async def _post_json(
        self, path: str, payload: dict[str, Any]
    ) -> tuple[dict[str, Any], float, dict[str, str]]:
        """POST ``payload``; return the decoded JSON object, the wall time in ms, and the response headers."""
        client = self._http()  # (re)built outside the timed call
        t0 = time.perf_counter_ns()
        try:
            resp = await client.post(path, json=payload)
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
            wait = retry_after_s(resp.headers)
            hint = f" (retry-after {wait:g} s)" if wait is not None else ""
            raise LLMHTTPError(
                self._scrub(f"{self.provider}: HTTP {resp.status_code}: {error_message(resp.content)}{hint}"),
                error_type=http_error_type(resp.status_code),
                status_code=resp.status_code,
                retry_after_s=wait,
            )
        try:
            doc = resp.json()
        except ValueError as exc:
            raise LLMError(
                self._scrub(f"{self.provider}: response is not JSON: {resp.content[:120]!r}"),
                error_type="bad_response",
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
            "function": {
                "name": wire_name(t.name),
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in tools
    ]


def function_calls(
    message: dict[str, Any], provider: str, fallback_id: Callable[[], str], *, where: str = "message"
) -> list[ToolCall]:
    """The ``tool_calls`` of an OpenAI- or Ollama-shaped assistant message (``fallback_id()`` when one has no id).
    ``where`` is the message's path in the response, for error messages."""
    calls = []
    for i, c in enumerate(message.get("tool_calls") or []):
        fn = need(message, f"tool_calls.{i}.function", provider, at=where)
        name = need(message, f"tool_calls.{i}.function.name", provider, at=where)
        if not isinstance(name, str) or not name:
            raise LLMError(
                f"{provider}: malformed response: {where}.tool_calls.{i}.function.name is not a name",
                error_type="bad_response",
            )
        args, raw = parse_arguments(fn.get("arguments", ""))
        calls.append(ToolCall(id=c.get("id") or fallback_id(), name=name, arguments=args, raw_arguments=raw))
    return calls


def need(doc: Any, path: str, provider: str, *, at: str = "") -> Any:
    """``doc[a][b]…`` for ``path`` "a.b…" (integers index lists), or LLMError naming what is missing (``at`` is the
    path of ``doc`` itself in the response, for the message)."""
    cur = doc
    for part in path.split("."):
        try:
            cur = cur[int(part)] if isinstance(cur, list) else cur[part]
        except (KeyError, IndexError, TypeError, ValueError):
            where = f"{at}.{path}" if at else path
            raise LLMError(
                f"{provider}: malformed response: no {where!r}", error_type="bad_response"
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


# -- tool names on the wire ------------------------------------------------------------------------------------

#: what OpenAI, Anthropic and Ollama's OpenAI-style templates accept as a function/tool name
_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def wire_name(name: str) -> str:
    """``name`` as sent to the provider. MCP allows tool names the APIs reject (``.``, ``/``, over 64 characters);
    such names are made safe and suffixed with a short hash of the original, so they stay unique and stable."""
    if _WIRE_NAME.fullmatch(name):
        return name
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:55]
    return f"{safe}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def original_names(tools: Sequence[ToolSpec], messages: Sequence[Message]) -> dict[str, str]:
    """wire name → name, for the tools offered and every call in the conversation."""
    names = {t.name for t in tools} | {c.name for m in messages for c in m.tool_calls}
    return {wire_name(n): n for n in names}


def restore_names(calls: list[ToolCall], names: dict[str, str]) -> list[ToolCall]:
    """Calls with the host's tool names back (a name the model invented is kept as is: the host answers it)."""
    return [dataclasses.replace(c, name=names.get(c.name, c.name)) for c in calls]
