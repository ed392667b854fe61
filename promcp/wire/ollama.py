"""Ollama's chat API, ``POST /api/chat`` (how the reference paper ran L-Cust).

Request: OpenAI-style ``messages`` (tool calls carry ``arguments`` as an object and usually no id; tool results
name the tool in ``tool_name``) and function ``tools`` — parsed by :func:`promcp.wire.openai.message_pieces`.
Response: ``message`` (``content``, ``tool_calls``, ``thinking``), ``done_reason``; the server's own counts
``prompt_eval_count`` / ``eval_count`` are the usage, and its durations (ns) give the prefill
(``prompt_eval_duration``), generation, load and total times. Stream: NDJSON objects, content pieces first, counts
and durations on the last (``"done": true``) object. An error can come as ``{"error": "…"}`` in a 200 body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promcp.wire import openai
from promcp.wire._common import IdFactory, as_dict, get, need, next_call_id, opt_int
from promcp.wire._types import ChatRequest, Output, Usage
from promcp.wire.openai import function_calls

__all__ = ["ChatStream", "parse_request", "parse_response", "parse_usage"]

_DURATIONS = {
    "eval_duration": "generation_ms",
    "load_duration": "load_ms",
    "total_duration": "server_total_ms",
}


def parse_request(body: Mapping[str, Any]) -> ChatRequest:
    """An ``/api/chat`` request body as pieces by origin (system, schemas, then the conversation)."""
    return openai.parse_request(body, streams_by_default=True)


def parse_usage(body: Any) -> Usage | None:
    """The server's own counts (``None`` when the body has none, e.g. a stream chunk before ``done``)."""
    prompt, generated = opt_int(body, "prompt_eval_count"), opt_int(body, "eval_count")
    if prompt is None and generated is None:
        return None
    reported = {k: v for k in ("prompt_eval_count", "eval_count") if (v := get(body, k)) is not None}
    return Usage(input_tokens=prompt, output_tokens=generated, reported=reported)


def parse_response(body: Any, *, strict: bool = False, fallback_id: IdFactory = next_call_id) -> Output:
    """A non-streamed ``/api/chat`` response (or a stream's folded final object). ``strict``: WireFormatError for a
    missing ``message`` or a malformed tool call."""
    message = need(body, "message") if strict else (get(body, "message") or {})
    out = Output(
        text=str(get(message, "content", "")),
        thinking=str(get(message, "thinking", "")),
        tool_calls=function_calls(message, strict=strict, fallback_id=fallback_id),
        finish_reason=_str(get(body, "done_reason")),
        model=_str(get(body, "model")),
        usage=parse_usage(body),
        error=_str(get(body, "error")),
    )
    prefill = get(body, "prompt_eval_duration")
    if isinstance(prefill, int | float):
        out.prompt_ms = prefill / 1e6
    for key, name in _DURATIONS.items():
        value = get(body, key)
        if isinstance(value, int | float) and (value or key == "eval_duration"):
            out.timings[name] = value / 1e6
    return out


class ChatStream:
    """Folds ``/api/chat`` stream objects (SDK ``ChatResponse`` chunks or decoded NDJSON lines)."""

    def __init__(self, fallback_id: IdFactory = next_call_id) -> None:
        self._texts: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[Any] = []
        self._last: dict[str, Any] = {}
        self._fallback_id = fallback_id
        self.complete = False  # the "done": true object seen

    def feed(self, chunk: Any) -> None:
        if get(chunk, "done"):
            self.complete = True
        message = get(chunk, "message") or {}
        if get(message, "content"):
            self._texts.append(str(get(message, "content")))
        if get(message, "thinking"):
            self._thinking.append(str(get(message, "thinking")))
        self._calls.extend(get(message, "tool_calls") or ())
        if get(chunk, "done") or get(chunk, "error") is not None:
            self._last = as_dict(chunk)

    def result(self) -> Output:
        final = dict(self._last)
        final["message"] = {
            "content": "".join(self._texts),
            "thinking": "".join(self._thinking),
            "tool_calls": [as_dict(c) or c for c in self._calls],
        }
        out = parse_response(final, fallback_id=self._fallback_id)
        out.prompt_ms = None  # a stream's time to first chunk is measured instead
        return out


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
