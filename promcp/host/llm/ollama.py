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

import httpx2 as httpx

from promcp import tokenizers
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import LLMError
from promcp.events import TokenSource
from promcp.host.llm._http import (
    HttpBackendMixin,
    default_base_url,
    function_tools,
    original_names,
    reject_unknown,
    restore_names,
    wire_name,
)
from promcp.host.llm.base import LLMBackend, Message, Response, Sampling, Timing, ToolSpec
from promcp.stages import Clock
from promcp.wire import Usage
from promcp.wire import ollama as wire_format

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen2.5:7b"


class OllamaBackend(HttpBackendMixin, LLMBackend):
    name = "ollama"
    wire_api = "ollama"

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
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        **extra: Any,
    ) -> None:
        reject_unknown("ollama", extra)
        self._setup_http(
            model=model or DEFAULT_MODEL,
            base_url=base_url or default_base_url("OLLAMA_HOST", DEFAULT_BASE_URL),
            headers={"authorization": f"Bearer {api_key}"} if api_key else {},
            timeout_s=timeout_s,
            tokenizer=tokenizer,
            default_tokenizer=tokenizers.for_model(model or DEFAULT_MODEL, default=DEFAULT_TOKENIZER),
            context_window=context_window,
            secret=api_key,
            transport=transport,
            clock=clock,
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
        out = self._parse(lambda: wire_format.parse_response(doc, strict=True))
        return Response(
            content=out.text or None,
            tool_calls=restore_names(out.tool_calls, original_names(tools, messages)),
            usage=out.usage or Usage(source=TokenSource.NONE),
            timing=Timing(total_ms=elapsed_ms, prompt_ms=out.prompt_ms),
            finish_reason=out.finish_reason,
            model=out.model,
            attrs=dict(out.timings),
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
