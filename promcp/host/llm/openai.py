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

import httpx2 as httpx

from promcp import tokenizers
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.events import TokenSource
from promcp.host.llm._http import (
    HttpBackendMixin,
    check_base_url,
    default_base_url,
    function_tools,
    original_names,
    reject_unknown,
    restore_names,
    wire_name,
)
from promcp.host.llm._http import api_key as api_key_for
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolSpec
from promcp.stages import Clock
from promcp.wire import Usage, compact_json
from promcp.wire import openai as wire_format

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"


def _is_local(url: str) -> bool:
    return (urlsplit(url).hostname or "") in {"127.0.0.1", "localhost", "::1"}


class OpenAIBackend(HttpBackendMixin, LLMBackend):
    name = "openai"
    wire_api = "openai"

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
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        **extra: Any,
    ) -> None:
        reject_unknown("openai", extra)
        url = check_base_url(base_url or default_base_url("OPENAI_BASE_URL", DEFAULT_BASE_URL), "openai")
        key = api_key_for(api_key, "OPENAI_API_KEY", "openai", required=not _is_local(url))
        self._setup_http(
            model=model or DEFAULT_MODEL,
            base_url=url,
            headers={"authorization": f"Bearer {key}"} if key else {},
            timeout_s=timeout_s,
            tokenizer=tokenizer,
            default_tokenizer=tokenizers.for_model(model or DEFAULT_MODEL, default=DEFAULT_TOKENIZER),
            context_window=context_window,
            secret=key,
            transport=transport,
            clock=clock,
        )
        self._max_tokens_field = max_tokens_field
        host = urlsplit(self._base_url).hostname or "openai"
        self.provider = "openai" if host == "api.openai.com" else host

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
            body["tools"] = function_tools(tools)
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
        out = self._parse(lambda: wire_format.parse_response(doc, strict=True))
        return Response(
            content=out.text or None,
            tool_calls=restore_names(out.tool_calls, original_names(tools, messages)),
            usage=out.usage or Usage(source=TokenSource.NONE),
            timing=Timing(total_ms=elapsed_ms),
            finish_reason=out.finish_reason,
            model=out.model,
            response_id=out.response_id,
            attrs={"request_id": headers["x-request-id"]} if headers.get("x-request-id") else {},
        )


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content if (m.content or not m.tool_calls) else None}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": wire_name(c.name),
                    "arguments": c.raw_arguments or compact_json(c.arguments),
                },
            }
            for c in m.tool_calls
        ]
    return out
