"""``anthropic``: the Messages API, ``POST /v1/messages`` (the ``c-cust`` topology).

Request: top-level ``system``; ``messages`` alternate user/assistant; the model's calls are ``tool_use`` blocks
and their results go back as ``tool_result`` blocks in the next user message (consecutive results merged into one
message, as the API requires); ``tools`` as ``{name, description, input_schema}``; ``tool_choice`` ``auto`` /
``any`` / ``none``.
Usage is ground truth: ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` is the call's
input (``token_source = provider``), with cache reads/writes kept apart; local counts use the labelled Claude
approximation (``approx:claude``) and are stored as ``attrs.tokens_in_estimate`` beside the provider numbers.
Key: ``ANTHROPIC_API_KEY`` (or ``llm.api_key``), sent as ``x-api-key`` with ``anthropic-version``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from promcp.errors import LLMError
from promcp.events import TokenSource
from promcp.host.llm._http import (
    HttpBackendMixin,
    api_key,
    default_base_url,
    need,
    original_names,
    reject_unknown,
    restore_names,
    wire_name,
)
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolCall, ToolSpec, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
#: Claude 3+ context window
DEFAULT_CONTEXT = 200_000

_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


class AnthropicBackend(HttpBackendMixin, LLMBackend):
    name = "anthropic"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        tokenizer: str | None = None,
        timeout_s: float | None = None,
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
        )
        self.provider = "anthropic"

    def render_tool(self, tool: ToolSpec) -> str:
        """A tool as the Messages API receives it (``input_schema``), for the local estimate."""
        return json.dumps(_tool(tool), ensure_ascii=False, separators=(",", ":"))

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
        blocks = need(doc, "content", self.provider)
        if not isinstance(blocks, list):
            raise LLMError(
                "anthropic: malformed response: 'content' is not a list", error_type="bad_response"
            )
        texts, calls = [], []
        for i, block in enumerate(blocks):
            kind = need(doc, f"content.{i}.type", self.provider)
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                args = need(doc, f"content.{i}.input", self.provider)
                calls.append(
                    ToolCall(
                        id=need(doc, f"content.{i}.id", self.provider),
                        name=need(doc, f"content.{i}.name", self.provider),
                        arguments=args if isinstance(args, dict) else {},
                        raw_arguments=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
                    )
                )
            # other blocks (thinking, redacted_thinking, server tool results) carry no text or call for the host
        usage = need(doc, "usage", self.provider)
        cache_read = _count(usage, "cache_read_input_tokens", required=False)
        cache_write = _count(usage, "cache_creation_input_tokens", required=False)
        return Response(
            content="".join(texts) or None,
            tool_calls=restore_names(calls, original_names(tools, messages)),
            usage=Usage(
                input_tokens=_count(usage, "input_tokens") + cache_read + cache_write,
                output_tokens=_count(usage, "output_tokens"),
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
                source=TokenSource.PROVIDER,
            ),
            timing=Timing(total_ms=elapsed_ms),
            finish_reason=doc.get("stop_reason"),
            model=doc.get("model"),
            attrs={k: v for k, v in {"request_id": headers.get("request-id") or doc.get("id")}.items() if v},
        )


def _count(usage: Any, key: str, *, required: bool = True) -> int:
    """A token count of the ``usage`` block (absent optional counts are 0), or LLMError naming the field."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if value is None and not required:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise LLMError(
            f"anthropic: malformed response: usage.{key} is {'missing' if value is None else repr(value)}",
            error_type="bad_response",
        )
    return value


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
