"""A small conversation, tools and a retrying ``chat`` helper shared by the backend unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from promcp.events import Origin
from promcp.host.llm.base import (
    LLMBackend,
    Message,
    Response,
    RetryPolicy,
    Sampling,
    ToolCall,
    ToolSpec,
    call_with_retries,
)

TOOLS = [
    ToolSpec(
        "time__get_time",
        "Current time in a timezone",
        {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
        "time",
        "get_time",
    ),
]
#: system, user prompt, an assistant tool call and its result: the shape of a round-2 (S5) call
CONVERSATION = [
    Message("system", "You are helpful.", origin=Origin.SYSTEM, key="system"),
    Message("user", "What time is it in Tokyo?", origin=Origin.USER, key="prompt"),
    Message(
        "assistant", "", tool_calls=[ToolCall("call_1", "time__get_time", {"tz": "Asia/Tokyo"})], key="msg:2"
    ),
    Message(
        "tool",
        "2026-11-22T19:00:00+09:00",
        tool_call_id="call_1",
        name="time__get_time",
        origin=Origin.TOOL_RESULTS,
        key="call_1",
    ),
]
FIRST_CALL = CONVERSATION[:2]
#: the evaluation card's rule with tiny waits
FAST = RetryPolicy(retries=3, backoff_s=(0.01, 0.02))


def chat(
    backend: LLMBackend,
    messages: Sequence[Message] = FIRST_CALL,
    tools: Sequence[ToolSpec] = TOOLS,
    sampling: Sampling | None = None,
    *,
    policy: RetryPolicy = FAST,
    delays: list[float] | None = None,
) -> Response:
    """One call through the host's retry rule; ``delays`` collects each wait (then nothing is slept)."""

    async def record(seconds: float) -> None:
        assert delays is not None
        delays.append(seconds)

    async def go() -> Response:
        try:
            return await call_with_retries(
                lambda: backend.chat(messages, tools, sampling or Sampling()),
                policy,
                sleep=record if delays is not None else asyncio.sleep,
            )
        finally:
            await backend.aclose()

    return asyncio.run(go())


def calls_of(resp: Response) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c.id, c.name, c.arguments) for c in resp.tool_calls]
