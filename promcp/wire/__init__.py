"""Provider wire formats, parsed once: what an LLM API request, response and stream say, and MCP's JSON shapes.

Every source that sees LLM traffic — the host's network backends, the ``promcp.instrument()`` wrappers, a
recording proxy — parses it here, so a request is split into origins, a response into text / tool calls / usage, and
a stream folded, by one implementation per provider:

=====================  ===========================  ====================================================
``api``                module                       what
=====================  ===========================  ====================================================
``openai``             :mod:`promcp.wire.openai`     Chat Completions (and every OpenAI-compatible server)
``openai-responses``   :mod:`promcp.wire.openai_responses`  the Responses API
``anthropic``          :mod:`promcp.wire.anthropic`  the Messages API
``ollama``             :mod:`promcp.wire.ollama`     ``/api/chat``
``gemini``             :mod:`promcp.wire.gemini`     ``generateContent`` / ``streamGenerateContent``
=====================  ===========================  ====================================================

Each module has ``parse_request(body) -> ChatRequest`` (pieces by origin, in the provider's prompt order),
``parse_response(body) -> Output`` and a stream accumulator (``feed(event)`` for each SDK event object or decoded
JSON, then ``result() -> Output``). :mod:`promcp.wire.framing` splits raw SSE / NDJSON bytes into those events;
:mod:`promcp.wire.mcp` reads MCP handshakes, tool lists and tool-call results; :mod:`promcp.wire.carried` is the
format of the journal rows ``promcp.instrument()`` carries on its spans to ``promcp collect``. Nothing here records, counts tokens
or knows a clock: that is :mod:`promcp.stages`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, get_args

from promcp.wire import anthropic, gemini, mcp, ollama, openai, openai_responses
from promcp.wire._common import (
    arguments_are_valid_json,
    arguments_digest,
    canonical_json,
    compact_json,
    next_call_id,
    parse_arguments,
    text_of,
)
from promcp.wire._conversation import conversation_blocks, is_subsequence
from promcp.wire._errors import error_message, http_error_type
from promcp.wire._types import ChatRequest, Output, Piece, ToolCall, Usage

__all__ = [
    "API",
    "APIS",
    "Accumulator",
    "ChatRequest",
    "Output",
    "Piece",
    "ToolCall",
    "Usage",
    "arguments_are_valid_json",
    "arguments_digest",
    "canonical_json",
    "compact_json",
    "conversation_blocks",
    "error_message",
    "http_error_type",
    "is_subsequence",
    "mcp",
    "next_call_id",
    "parse_arguments",
    "parse_request",
    "parse_response",
    "stream_accumulator",
    "text_of",
]

API = Literal["openai", "openai-responses", "anthropic", "ollama", "gemini"]
APIS: tuple[str, ...] = get_args(API)


class Accumulator(Protocol):
    """Folds a streamed response, one event at a time. ``complete``: the stream's own end marker was fed (Anthropic
    ``message_stop``, Chat Completions ``[DONE]``, Responses ``response.completed`` / ``.incomplete`` / ``.failed``,
    Ollama ``"done": true``) — a client that has read it has the whole response, whatever happens to the bytes of
    the transport after it (docs/proxy-llm.md "Zero loss")."""

    complete: bool

    def feed(self, event: Any) -> None: ...

    def result(self) -> Output: ...


_REQUEST: dict[str, Callable[[Mapping[str, Any]], ChatRequest]] = {
    "openai": openai.parse_request,
    "openai-responses": openai_responses.parse_request,
    "anthropic": anthropic.parse_request,
    "ollama": ollama.parse_request,
    "gemini": gemini.parse_request,
}
_RESPONSE: dict[str, Callable[[Any], Output]] = {
    "openai": openai.parse_response,
    "openai-responses": openai_responses.parse_response,
    "anthropic": anthropic.parse_response,
    "ollama": ollama.parse_response,
    "gemini": gemini.parse_response,
}
_STREAM: dict[str, Callable[[], Accumulator]] = {
    "openai": openai.ChatStream,
    "openai-responses": openai_responses.ResponseStream,
    "anthropic": anthropic.MessageStream,
    "ollama": ollama.ChatStream,
    "gemini": gemini.GenerateStream,
}


def _check(api: str) -> str:
    if api not in _REQUEST:
        raise ValueError(f"unknown LLM wire format {api!r}; choose one of: {', '.join(APIS)}")
    return api


def parse_request(api: API | str, body: Mapping[str, Any]) -> ChatRequest:
    """The request ``body`` of ``api`` (JSON dict, or an SDK call's keyword arguments) as pieces by origin."""
    return _REQUEST[_check(api)](body)


def parse_response(api: API | str, body: Any) -> Output:
    """A complete (non-streamed) response of ``api``, leniently: what is there is read, nothing raises."""
    return _RESPONSE[_check(api)](body)


def stream_accumulator(api: API | str) -> Accumulator:
    """A fresh accumulator for one streamed response of ``api``."""
    return _STREAM[_check(api)]()
