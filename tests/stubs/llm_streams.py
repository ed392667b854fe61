"""Streamed responses in the providers' documented shapes: the events, and the bytes a server sends for them.

Anthropic Messages SSE (``message_start`` with the first usage incl. cache reads/writes and the ``cache_creation``
TTL split, text and ``tool_use`` blocks with ``input_json_delta`` fragments, ``message_delta`` with the cumulative
usage), OpenAI Chat Completions chunks (tool-call fragments by index, a final ``usage`` chunk, ``[DONE]``), Ollama
``/api/chat`` NDJSON (counts and durations on the ``done`` object), OpenAI Responses SSE (typed events, the whole
response on ``response.completed``). The stub server (:mod:`tests.stubs.llm_http`) serves these bytes as they are.
"""

from __future__ import annotations

import json
from typing import Any

SSE_HEADERS = {"content-type": "text/event-stream"}


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    """SSE bytes: ``event:`` line when named, one ``data:`` line (JSON, or a literal such as ``[DONE]``)."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


def ndjson(objects: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


# -- Anthropic Messages ----------------------------------------------------------------------------------------------


def anthropic_stream(
    *,
    text: str = "Let me check.",
    tool: tuple[str, str, list[str]] | None = ("toolu_01A", "get_time", ['{"tz": ', '"Asia/Tokyo"}']),
    input_tokens: int = 21,
    cache_read: int = 1800,
    cache_write_5m: int = 320,
    cache_write_1h: int = 64,
    output_tokens: int = 58,
    thinking_tokens: int | None = None,
    cumulative_delta: bool = True,
) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of one streamed message, as the API sends them."""
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write_5m + cache_write_1h,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_write_5m,
            "ephemeral_1h_input_tokens": cache_write_1h,
        },
        "output_tokens": 1,
        "service_tier": "standard",
    }
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01StreamTest",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
    ]
    half = len(text) // 2
    for piece in (text[:half], text[half:]):
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    if tool is not None:
        call_id, name, fragments = tool
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
        )
        for fragment in ["", *fragments]:
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": fragment},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    final: dict[str, Any] = {"output_tokens": output_tokens}
    if cumulative_delta:  # recent API versions repeat the input side, cumulatively, on message_delta
        final.update(
            input_tokens=input_tokens,
            cache_creation_input_tokens=cache_write_5m + cache_write_1h,
            cache_read_input_tokens=cache_read,
        )
    if thinking_tokens is not None:
        final["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
                "usage": final,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


ANTHROPIC_OVERLOADED = (
    "error",
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)


# -- OpenAI Chat Completions -----------------------------------------------------------------------------------------


def openai_chunk(
    delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9stream",
        "object": "chat.completion.chunk",
        "created": 1731000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if delta is not None
        else [],
        "usage": usage,
    }


def openai_stream(*, tool_calls: bool = True) -> list[dict[str, Any]]:
    """Chunks of a streamed call with ``stream_options={"include_usage": True}``: two parallel tool calls whose
    arguments arrive in fragments (or a text answer), then the usage chunk."""
    chunks = [openai_chunk({"role": "assistant", "content": None, "refusal": None})]
    if tool_calls:
        for index, (call_id, name, fragments) in enumerate(
            [
                ("call_A1", "get_time", ['{"tz"', ': "Asia/Tokyo"}']),
                ("call_B2", "get_time", ['{"tz": "UTC"}']),
            ]
        ):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            chunks.append(openai_chunk({"tool_calls": [head]}))
            for fragment in fragments:
                chunks.append(
                    openai_chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                )
        chunks.append(openai_chunk({}, finish="tool_calls"))
    else:
        for word in ("It is ", "7 pm."):
            chunks.append(openai_chunk({"content": word}))
        chunks.append(openai_chunk({}, finish="stop"))
    usage = {
        "prompt_tokens": 1412,
        "completion_tokens": 42,
        "total_tokens": 1454,
        "prompt_tokens_details": {"cached_tokens": 1280, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    chunks.append(openai_chunk(None, usage=usage))
    return chunks


def openai_sse(chunks: list[dict[str, Any]]) -> bytes:
    return sse([(None, c) for c in chunks] + [(None, "[DONE]")])


# -- Ollama /api/chat ------------------------------------------------------------------------------------------------


def ollama_stream(*, tool: tuple[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    base = {"model": "qwen2.5:7b", "created_at": "2026-11-22T10:00:00.000000Z"}
    lines: list[dict[str, Any]] = []
    if tool is not None:
        call = {"function": {"name": tool[0], "arguments": tool[1]}}
        lines.append(
            {**base, "message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False}
        )
    else:
        for word in ("It ", "is ", "7 pm."):
            lines.append({**base, "message": {"role": "assistant", "content": word}, "done": False})
    lines.append(
        {
            **base,
            "message": {"role": "assistant", "content": ""},
            "done_reason": "stop",
            "done": True,
            "total_duration": 2_150_000_000,
            "load_duration": 12_000_000,
            "prompt_eval_count": 301,
            "prompt_eval_duration": 640_000_000,
            "eval_count": 19,
            "eval_duration": 1_410_000_000,
        }
    )
    return lines


# -- OpenAI Responses ------------------------------------------------------------------------------------------------


def responses_body(*, call: bool = True) -> dict[str, Any]:
    """A complete Responses API object: a reasoning item, then a function call (or a message)."""
    output: list[dict[str, Any]] = [
        {"id": "rs_01", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Need the time."}]}
    ]
    if call:
        output.append(
            {
                "id": "fc_01",
                "type": "function_call",
                "status": "completed",
                "call_id": "call_R1",
                "name": "get_time",
                "arguments": '{"tz":"Asia/Tokyo"}',
            }
        )
    else:
        output.append(
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "It is 7 pm.", "annotations": []}],
            }
        )
    return {
        "id": "resp_01",
        "object": "response",
        "created_at": 1731000000,
        "status": "completed",
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "usage": {
            "input_tokens": 2006,
            "input_tokens_details": {"cached_tokens": 1920},
            "output_tokens": 97,
            "output_tokens_details": {"reasoning_tokens": 64},
            "total_tokens": 2103,
        },
    }


def responses_stream(*, complete: bool = True) -> list[tuple[str, dict[str, Any]]]:
    body = responses_body()
    created = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": created}),
    ]
    for index, item in enumerate(body["output"]):
        events.append(
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": index + 1,
                    "output_index": index,
                    "item": item,
                },
            )
        )
    if complete:
        events.append(
            ("response.completed", {"type": "response.completed", "sequence_number": 9, "response": body})
        )
    return events
