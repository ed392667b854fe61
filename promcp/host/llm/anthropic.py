"""``anthropic``: the Messages API, ``POST /v1/messages`` (the ``c-cust`` topology).

Request: top-level ``system``; ``messages`` alternate user/assistant; the model's calls are ``tool_use`` blocks
and their results go back as ``tool_result`` blocks in the next user message (consecutive results merged into one
message, as the API requires); ``tools`` as ``{name, description, input_schema}``; ``tool_choice`` ``auto`` /
``any`` / ``none``.
The response is read by :mod:`promcp.wire.anthropic` (strict): usage is ground truth, ``input_tokens +
cache_read_input_tokens + cache_creation_input_tokens`` is the call's input (``token_source = provider``), with
cache reads/writes kept apart; local counts use the labelled Claude approximation (``approx:claude``) and are stored
as ``attrs.tokens_in_estimate`` beside the provider numbers.
Key: ``ANTHROPIC_API_KEY`` (or ``llm.api_key``), sent as ``x-api-key`` with ``anthropic-version``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx2 as httpx

from promcp.host.llm._http import (
    HttpBackendMixin,
    api_key,
    default_base_url,
    original_names,
    reject_unknown,
    restore_names,
    wire_name,
)
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolSpec
from promcp.stages import Clock
from promcp.wire import anthropic as wire_format

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
#: Claude 3+ context window
DEFAULT_CONTEXT = 200_000

_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


class AnthropicBackend(HttpBackendMixin, LLMBackend):
    name = "anthropic"
    wire_api = "anthropic"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        tokenizer: str | None = None,
        timeout_s: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        **extra: Any,
    ) -> None:
        reject_unknown("anthropic", extra)
        key = _api_key(api_key)
        self._setup_http(
            model=model or DEFAULT_MODEL,
            base_url=base_url or default_base_url("ANTHROPIC_BASE_URL", DEFAULT_BASE_URL),
            headers={"anthropic-version": API_VERSION, "x-api-key": key},
            timeout_s=timeout_s,
            tokenizer=tokenizer,
            default_tokenizer="approx:claude",
            context_window=context_window or DEFAULT_CONTEXT,
            secret=key,
            transport=transport,
            clock=clock,
        )
        self.provider = "anthropic"

    def payload(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "messages": _messages([m for m in messages if m.role != "system"]),
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [_tool(t) for t in tools]
            body["tool_choice"] = _TOOL_CHOICE.get(sampling.tool_choice, {"type": "auto"})
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.stop:
            body["stop_sequences"] = list(sampling.stop)
        return body

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> Response:
        doc, elapsed_ms, headers = await self._post_json(
            "/v1/messages", self.payload(messages, tools, sampling)
        )
        out = self._parse(lambda: wire_format.parse_response(doc, strict=True))
        assert out.usage is not None  # strict parsing requires it
        return Response(
            content=out.text or None,
            tool_calls=restore_names(out.tool_calls, original_names(tools, messages)),
            usage=out.usage,
            timing=Timing(total_ms=elapsed_ms),
            finish_reason=out.finish_reason,
            model=out.model,
            response_id=out.response_id,
            attrs={"request_id": headers["request-id"]} if headers.get("request-id") else {},
        )


def _api_key(explicit: str | None) -> str:
    key = api_key(explicit, "ANTHROPIC_API_KEY", "anthropic", required=True)
    assert key is not None
    return key


def _tool(t: ToolSpec) -> dict[str, Any]:
    return {"name": wire_name(t.name), "description": t.description, "input_schema": t.input_schema}


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """promcp messages → Messages API turns (tool results merged into user turns)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.content,
            }
            if m.is_error:
                block["is_error"] = True
            if (
                out
                and out[-1]["role"] == "user"
                and isinstance(out[-1]["content"], list)
                and all(b.get("type") == "tool_result" for b in out[-1]["content"])
            ):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant":
            content: list[dict[str, Any]] = []
            if m.content:
                content.append({"type": "text", "text": m.content})
            content += [
                {"type": "tool_use", "id": c.id, "name": wire_name(c.name), "input": c.arguments}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": content or [{"type": "text", "text": ""}]})
        else:
            out.append({"role": "user", "content": m.content})
    return out
