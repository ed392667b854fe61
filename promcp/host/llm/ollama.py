"""``ollama``: Ollama's HTTP API, ``POST /api/chat`` with ``tools`` and ``stream: false`` (how the paper ran L-Cust).

Usage: ``prompt_eval_count`` / ``eval_count`` are the server's own token counts (``token_source = provider``).
Timing: ``prompt_eval_duration`` is the prefill (input event latency) and ``eval_duration`` the generation; the
host keeps its own wall time as the call total, so load time and HTTP overhead are not lost. Ollama tool calls
carry no id in older servers: promcp numbers them ``call_<n>``, unique across the run.
Options: ``model`` (e.g. ``qwen2.5:7b``), ``base_url`` (default ``http://127.0.0.1:11434``), ``context_window``
(sent as ``options.num_ctx``), ``tokenizer`` (for the local estimates; a ``gguf:`` path of the same model gives
exact ones), ``keep_alive``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from promcp import tokenizers
from promcp.errors import LLMError
from promcp.events import TokenSource
from promcp.host.llm._http import (
    HttpBackendMixin,
    default_base_url,
    function_calls,
    function_tools,
    need,
    original_names,
    reject_unknown,
    restore_names,
    wire_name,
)
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolSpec, Usage

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen2.5:7b"


class OllamaBackend(HttpBackendMixin, LLMBackend):
    name = "ollama"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        tokenizer: str | None = None,
        timeout_s: float | None = None,
        keep_alive: str | None = None,
        **extra: Any,
    ) -> None:
        reject_unknown("ollama", extra)
        self._setup_http(
            model=model or DEFAULT_MODEL,
            base_url=base_url or default_base_url("OLLAMA_HOST", DEFAULT_BASE_URL),
            headers={"authorization": f"Bearer {api_key}"} if api_key else {},
            timeout_s=timeout_s,
            tokenizer=tokenizer,
            default_tokenizer=tokenizers.for_model(model or DEFAULT_MODEL, default="o200k_base"),
            context_window=context_window,
            secret=api_key,
        )
        self._keep_alive = keep_alive
        self.provider = "ollama"

    def payload(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": sampling.temperature, "num_predict": sampling.max_tokens}
        if sampling.top_p is not None:
            options["top_p"] = sampling.top_p
        if sampling.seed is not None:
            options["seed"] = sampling.seed
        if sampling.stop:
            options["stop"] = list(sampling.stop)
        if self.context_window:
            options["num_ctx"] = self.context_window
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(m) for m in messages],
            "stream": False,
            "options": options,
        }
        if tools and sampling.tool_choice != "none":
            body["tools"] = function_tools(tools)
        if self._keep_alive is not None:
            body["keep_alive"] = self._keep_alive
        return body

    async def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], sampling: Sampling
    ) -> Response:
        doc, elapsed_ms, _ = await self._post_json("/api/chat", self.payload(messages, tools, sampling))
        if doc.get("error"):  # an error reported in a 200 body
            raise LLMError(self._scrub(f"ollama: {doc['error']}"), error_type="server_error")
        message = need(doc, "message", self.provider)
        calls = restore_names(
            function_calls(message, self.provider, self._fallback_call_id), original_names(tools, messages)
        )
        prompt_ns = doc.get("prompt_eval_duration")
        eval_ns = doc.get("eval_duration")
        has_usage = doc.get("prompt_eval_count") is not None
        return Response(
            content=message.get("content") or None,
            tool_calls=calls,
            usage=Usage(
                input_tokens=doc.get("prompt_eval_count"),
                output_tokens=doc.get("eval_count"),
                source=TokenSource.PROVIDER if has_usage else TokenSource.NONE,
            ),
            timing=Timing(total_ms=elapsed_ms, prompt_ms=prompt_ns / 1e6 if prompt_ns is not None else None),
            finish_reason=doc.get("done_reason"),
            model=doc.get("model"),
            attrs={
                k: v
                for k, v in {
                    "generation_ms": eval_ns / 1e6 if eval_ns is not None else None,
                    "load_ms": (doc.get("load_duration") or 0) / 1e6 or None,
                    "server_total_ms": (doc.get("total_duration") or 0) / 1e6 or None,
                }.items()
                if v is not None
            },
        )


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        out: dict[str, Any] = {"role": "tool", "content": m.content}
        if m.name:
            out["tool_name"] = wire_name(m.name)
        return out
    out = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"function": {"name": wire_name(c.name), "arguments": c.arguments}} for c in m.tool_calls
        ]
    return out
