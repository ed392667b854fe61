"""Network LLM backends against stub servers on 127.0.0.1 that speak each provider's wire format."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from promcp.errors import ConfigError, LLMError
from promcp.events import Origin, TokenSource
from promcp.host.llm.base import (
    Message,
    RetryPolicy,
    Sampling,
    ToolCall,
    ToolSpec,
    call_with_retries,
    get_backend,
    is_retryable,
)
from tests.stubs.llm_http import (
    Reply,
    StubServer,
    anthropic_error,
    anthropic_reply,
    ollama_reply,
    openai_error,
    openai_text,
    openai_tool_call,
)

T = TypeVar("T")

TOOLS = [
    ToolSpec(
        "time__get_time",
        "Current time in a timezone",
        {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
        "time",
        "get_time",
    ),
]
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
FAST = RetryPolicy(retries=3, backoff_s=(0.01, 0.02))


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def chat(
    backend: Any,
    messages: list[Message] = CONVERSATION[:2],
    tools: list[ToolSpec] = TOOLS,
    sampling: Sampling | None = None,
) -> Any:
    async def go() -> Any:
        try:
            return await call_with_retries(
                lambda: backend.chat(messages, tools, sampling or Sampling()), FAST
            )
        finally:
            await backend.aclose()

    return run(go())


# -- openai -------------------------------------------------------------------------------------------------------


def test_openai_request_and_tool_call_parsing() -> None:
    with StubServer([Reply(200, openai_tool_call("time__get_time", '{"tz":"Asia/Tokyo"}'))]) as stub:
        backend = get_backend("openai", base_url=stub.url + "/v1", api_key="sk-test", model="gpt-4o-mini")
        resp = chat(backend, CONVERSATION)
    (req,) = stub.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body["model"] == "gpt-4o-mini" and body["stream"] is False and body["tool_choice"] == "auto"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "time__get_time",
                "description": "Current time in a timezone",
                "parameters": TOOLS[0].input_schema,
            },
        }
    ]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assistant = body["messages"][2]
    assert assistant["content"] is None
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"tz": "Asia/Tokyo"}
    assert body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "2026-11-22T19:00:00+09:00",
    }
    assert resp.tool_calls[0].id == "call_abc123" and resp.tool_calls[0].arguments == {"tz": "Asia/Tokyo"}
    assert (
        resp.usage.input_tokens == 412
        and resp.usage.output_tokens == 23
        and resp.usage.cache_read_tokens == 256
    )
    assert resp.usage.source is TokenSource.PROVIDER
    assert resp.timing.prompt_ms is None and resp.timing.total_ms > 0
    assert backend.tokenizer.name == "o200k_base"


def test_openai_invalid_json_arguments_are_kept_raw() -> None:
    with StubServer([Reply(200, openai_tool_call("time__get_time", '{"tz": "Asia/Tok'))]) as stub:
        resp = chat(get_backend("openai", base_url=stub.url, api_key="k"))
    call = resp.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"tz": "Asia/Tok'


def test_openai_retries_429_and_500_then_succeeds() -> None:
    replies = [
        Reply(429, openai_error("rate_limit_exceeded", "Rate limit reached"), {"retry-after": "1"}),
        Reply(500, openai_error("server_error", "The server had an error")),
        Reply(200, openai_text("It is 7 pm.")),
    ]
    with StubServer(replies) as stub:
        resp = chat(get_backend("openai", base_url=stub.url, api_key="k"))
    assert len(stub.requests) == 3
    assert resp.content == "It is 7 pm." and resp.tool_calls == []


def test_openai_permanent_error_names_status_and_message() -> None:
    with (
        StubServer(
            [Reply(400, openai_error("invalid_request_error", "Invalid schema for function"))]
        ) as stub,
        pytest.raises(LLMError, match=r"HTTP 400: invalid_request_error: Invalid schema") as info,
    ):
        chat(get_backend("openai", base_url=stub.url, api_key="k"))
    assert len(stub.requests) == 1, "a 400 is not retried"
    assert info.value.status_code == 400 and not is_retryable(info.value)


def test_openai_malformed_response() -> None:
    with (
        StubServer([Reply(200, {"id": "x", "choices": []})]) as stub,
        pytest.raises(LLMError, match=r"malformed response: no 'choices\.0\.message'"),
    ):
        chat(get_backend("openai", base_url=stub.url, api_key="k"))


def test_openai_needs_a_key_for_remote_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_backend("openai", base_url="https://api.example.com/v1")
    get_backend("openai", base_url="http://127.0.0.1:8080/v1")  # a local server needs none


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown openai option"):
        get_backend("openai", base_url="http://127.0.0.1:1/v1", temprature=0.2)


def test_connection_refused_is_retryable_connection_error() -> None:
    backend = get_backend("ollama", base_url="http://127.0.0.1:9")
    with pytest.raises(LLMError) as info:
        run(backend.chat(CONVERSATION[:2], TOOLS, Sampling()))
    assert info.value.error_type == "connection" and is_retryable(info.value)


# -- ollama -------------------------------------------------------------------------------------------------------


def test_ollama_request_usage_and_prefill_timing() -> None:
    with StubServer([Reply(200, ollama_reply(tool=("time__get_time", {"tz": "Asia/Tokyo"})))]) as stub:
        backend = get_backend("ollama", base_url=stub.url, model="qwen2.5:7b", context_window=16384)
        resp = chat(backend, CONVERSATION)
    body = stub.requests[0].body
    assert stub.requests[0].path == "/api/chat"
    assert (
        body["stream"] is False
        and body["options"]["num_ctx"] == 16384
        and body["options"]["temperature"] == 0.0
    )
    assert body["tools"][0]["function"]["name"] == "time__get_time"
    assert body["messages"][2]["tool_calls"] == [
        {"function": {"name": "time__get_time", "arguments": {"tz": "Asia/Tokyo"}}}
    ]
    assert body["messages"][3] == {
        "role": "tool",
        "content": "2026-11-22T19:00:00+09:00",
        "tool_name": "time__get_time",
    }
    assert resp.tool_calls[0].name == "time__get_time" and resp.tool_calls[0].arguments == {
        "tz": "Asia/Tokyo"
    }
    assert resp.tool_calls[0].id == "call_0"
    assert resp.usage.input_tokens == 301 and resp.usage.output_tokens == 19
    assert resp.usage.source is TokenSource.PROVIDER
    assert resp.timing.prompt_ms == pytest.approx(640.0)
    assert resp.attrs["generation_ms"] == pytest.approx(1410.0)


def test_ollama_model_not_found() -> None:
    with (
        StubServer([Reply(404, {"error": "model 'llama9' not found"})]) as stub,
        pytest.raises(LLMError, match="HTTP 404: model 'llama9' not found"),
    ):
        chat(get_backend("ollama", base_url=stub.url, model="llama9"))


# -- anthropic ----------------------------------------------------------------------------------------------------


def test_anthropic_wire_format_and_provider_usage() -> None:
    blocks = [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_01", "name": "time__get_time", "input": {"tz": "UTC"}},
    ]
    with StubServer(
        [Reply(200, anthropic_reply(blocks, stop="tool_use", cache_read=100, cache_write=50))]
    ) as stub:
        backend = get_backend("anthropic", base_url=stub.url, api_key="sk-ant-test")
        two_results = [
            *CONVERSATION,
            Message("tool", "second", tool_call_id="call_2", origin=Origin.TOOL_RESULTS),
        ]
        resp = chat(backend, two_results, sampling=Sampling(tool_choice="required"))
    req = stub.requests[0]
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-test" and req.headers["anthropic-version"] == "2023-06-01"
    body = req.body
    assert body["system"] == "You are helpful." and body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [
        {
            "name": "time__get_time",
            "description": "Current time in a timezone",
            "input_schema": TOOLS[0].input_schema,
        }
    ]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"], "consecutive tool results share one user turn"
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "time__get_time", "input": {"tz": "Asia/Tokyo"}}
    ]
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == ["call_1", "call_2"]
    assert resp.content == "Checking." and resp.tool_calls[0].id == "toolu_01"
    assert resp.usage.input_tokens == 472 + 100 + 50
    assert (resp.usage.cache_read_tokens, resp.usage.cache_write_tokens) == (100, 50)
    assert resp.usage.source is TokenSource.PROVIDER and resp.finish_reason == "tool_use"
    assert backend.tokenizer.source is TokenSource.APPROX


def test_anthropic_overloaded_is_retried() -> None:
    replies = [
        Reply(529, anthropic_error("overloaded_error", "Overloaded")),
        Reply(200, anthropic_reply([{"type": "text", "text": "ok"}], stop="end_turn")),
    ]
    with StubServer(replies) as stub:
        resp = chat(get_backend("anthropic", base_url=stub.url, api_key="k"))
    assert len(stub.requests) == 2 and resp.content == "ok"


def test_anthropic_gives_up_after_the_policy() -> None:
    replies = [Reply(529, anthropic_error("overloaded_error", "Overloaded")) for _ in range(4)]
    with StubServer(replies) as stub, pytest.raises(LLMError, match="overloaded_error: Overloaded") as info:
        chat(get_backend("anthropic", base_url=stub.url, api_key="k"))
    assert len(stub.requests) == 4, "1 call + 3 retries"
    assert info.value.error_type == "overloaded"


def test_anthropic_key_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_backend("anthropic")
