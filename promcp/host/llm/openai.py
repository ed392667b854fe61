"""``openai``: any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp server, LM Studio…).

Request: ``messages`` (system, user, assistant with ``tool_calls``, ``tool`` results with ``tool_call_id``), ``tools``
as ``{"type": "function", "function": {name, description, parameters}}``, ``tool_choice``, sampling, non-streaming.
Usage: ``prompt_tokens`` (includes ``prompt_tokens_details.cached_tokens``) and ``completion_tokens`` are the
provider's counts (``token_source = provider``); local counts under the model's tiktoken encoding are kept as the
estimate. Timing: the call's wall time only (no prefill split in a non-streaming response).
Key: ``OPENAI_API_KEY`` (or ``llm.api_key``); not required for local servers (a base URL on localhost).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from promcp import tokenizers
from promcp.events import TokenSource
from promcp.host.llm._http import (
    DEFAULT_TIMEOUT_S,
    HttpBackendMixin,
    api_key,
    need,
    parse_arguments,
    reject_unknown,
)
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolCall, ToolSpec, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"


def _is_local(url: str) -> bool:
    return (urlsplit(url).hostname or "") in {"127.0.0.1", "localhost", "::1"}


class OpenAIBackend(HttpBackendMixin, LLMBackend):
    name = "openai"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        tokenizer: str | None = None,
        timeout_s: float | None = None,
        max_tokens_field: str = "max_tokens",
        **extra: Any,
    ) -> None:
        reject_unknown("openai", extra)
        self.model = model or DEFAULT_MODEL
        self._base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        key = _key(api_key, self._base_url)
        self._headers = {"content-type": "application/json"} | (
            {"authorization": f"Bearer {key}"} if key else {}
        )
        self._timeout_s = timeout_s or DEFAULT_TIMEOUT_S
        self._max_tokens_field = max_tokens_field
        host = urlsplit(self._base_url).hostname or "openai"
        self.provider = "openai" if host == "api.openai.com" else host
        self.tokenizer = tokenizers.get(tokenizer or tokenizers.for_model(self.model, default="o200k_base"))
        self.context_window = context_window

    def payload(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(m) for m in messages],
            "temperature": sampling.temperature,
            self._max_tokens_field: sampling.max_tokens,
            "stream": False,
        }
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in tools
            ]
            body["tool_choice"] = sampling.tool_choice
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        return body

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> Response:
        doc, elapsed_ms, headers = await self._post_json(
            "/chat/completions", self.payload(messages, tools, sampling)
        )
        message = need(doc, "choices.0.message", self.provider)
        calls = []
        for i, c in enumerate(message.get("tool_calls") or []):
            fn = need(c, "function", self.provider)
            args, raw = parse_arguments(fn.get("arguments", ""))
            calls.append(
                ToolCall(
                    id=c.get("id") or f"call_{i}",
                    name=need(fn, "name", self.provider),
                    arguments=args,
                    raw_arguments=raw,
                )
            )
        usage = doc.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        has_usage = usage.get("prompt_tokens") is not None
        return Response(
            content=message.get("content"),
            tool_calls=calls,
            usage=Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                cache_read_tokens=int(cached),
                source=TokenSource.PROVIDER if has_usage else TokenSource.NONE,
            ),
            timing=Timing(total_ms=elapsed_ms),
            finish_reason=need(doc, "choices.0", self.provider).get("finish_reason"),
            model=doc.get("model"),
            attrs={
                k: v for k, v in {"request_id": doc.get("id") or headers.get("x-request-id")}.items() if v
            },
        )


def _key(explicit: str | None, base_url: str) -> str | None:
    return api_key(explicit, "OPENAI_API_KEY", "openai", required=not _is_local(base_url))


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content if (m.content or not m.tool_calls) else None}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments or _compact(c.arguments)},
            }
            for c in m.tool_calls
        ]
    return out


def _compact(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
