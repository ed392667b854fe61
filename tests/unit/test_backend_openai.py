"""``openai`` backend (Chat Completions) against a stub that checks requests like the real API."""

from __future__ import annotations

import json

import pytest

from promcp.errors import ConfigError, LLMError
from promcp.events import TokenSource
from promcp.host.llm.base import Message, Sampling, ToolCall, ToolSpec, get_backend, is_retryable
from tests.stubs.conversation import CONVERSATION, TOOLS, calls_of, chat
from tests.stubs.llm_http import (
    MockAPI,
    Reply,
    Request,
    StubServer,
    openai_error,
    openai_text,
    openai_tool_call,
)


def test_request_shape_and_tool_call_parsing() -> None:
    with StubServer(
        [Reply(200, openai_tool_call("time__get_time", '{"tz":"Asia/Tokyo"}'))], wire="openai"
    ) as stub:
        backend = get_backend("openai", base_url=stub.url + "/v1", api_key="sk-test", model="gpt-4o-mini")
        resp = chat(backend, CONVERSATION, sampling=Sampling(temperature=0.3, seed=7, stop=("END",)))
    assert stub.violations == []
    (req,) = stub.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["content-type"] == "application/json"
    body = req.body
    assert (body["model"], body["stream"], body["tool_choice"]) == ("gpt-4o-mini", False, "auto")
    assert (body["temperature"], body["seed"], body["stop"], body["max_tokens"]) == (0.3, 7, ["END"], 512)
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
    assert assistant["content"] is None and assistant["tool_calls"][0]["id"] == "call_1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"tz": "Asia/Tokyo"}
    assert body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "2026-11-22T19:00:00+09:00",
    }
    assert calls_of(resp) == [("call_abc123", "time__get_time", {"tz": "Asia/Tokyo"})]
    assert resp.tool_calls[0].raw_arguments == '{"tz":"Asia/Tokyo"}'
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cache_read_tokens) == (412, 23, 256)
    assert resp.usage.source is TokenSource.PROVIDER
    assert resp.finish_reason == "tool_calls" and resp.model == "gpt-4o-mini-2024-07-18"
    assert resp.timing.prompt_ms is None and resp.timing.total_ms > 0
    assert resp.response_id == "chatcmpl-9xYz" and resp.attrs == {}  # no x-request-id header from this stub
    assert backend.tokenizer.name == "o200k_base" and backend.provider == "127.0.0.1"


def test_answer_text_and_missing_usage() -> None:
    no_usage = openai_text("It is 7 pm.")
    del no_usage["usage"]  # some OpenAI-compatible servers omit it
    with StubServer([Reply(200, no_usage)], wire="openai") as stub:
        resp = chat(get_backend("openai", base_url=stub.url, api_key="k"))
    assert resp.content == "It is 7 pm." and resp.tool_calls == []
    assert resp.usage.input_tokens is None and resp.usage.source is TokenSource.NONE


def test_invalid_json_arguments_are_kept_raw() -> None:
    with StubServer([Reply(200, openai_tool_call("time__get_time", '{"tz": "Asia/Tok'))]) as stub:
        resp = chat(get_backend("openai", base_url=stub.url, api_key="k"))
    call = resp.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"tz": "Asia/Tok'


def test_tool_names_the_api_rejects_are_mapped_on_the_wire_and_back() -> None:
    dotted = ToolSpec("github.create_issue", "Open an issue", {"type": "object"}, "github", "create_issue")
    history = [
        *CONVERSATION[:2],
        Message("assistant", "", tool_calls=[ToolCall("call_9", "github.create_issue", {})]),
        Message("tool", "#12", tool_call_id="call_9"),
    ]

    def call_first_tool(req: Request) -> Reply:  # the model calls the tool by the name it was offered
        return Reply(200, openai_tool_call(req.body["tools"][0]["function"]["name"], "{}", call_id="call_10"))

    with StubServer(call_first_tool, wire="openai") as stub:
        resp = chat(get_backend("openai", base_url=stub.url, api_key="k"), history, [dotted])
    assert stub.violations == [], "the API's name pattern is respected"
    wire = stub.requests[0].body["tools"][0]["function"]["name"]
    assert wire.startswith("github_create_issue_") and wire != "github.create_issue"
    assert stub.requests[0].body["messages"][2]["tool_calls"][0]["function"]["name"] == wire
    assert resp.tool_calls[0].name == "github.create_issue", "the host sees its own tool name"


def test_retry_after_is_honoured_and_5xx_retried() -> None:
    replies = [
        Reply(429, openai_error("rate_limit_exceeded", "Rate limit reached"), {"retry-after": "3"}),
        Reply(
            503,
            openai_error("server_error", "The engine is currently overloaded"),
            {"retry-after-ms": "1500"},
        ),
        Reply(500, openai_error("server_error", "The server had an error")),
        Reply(200, openai_text("It is 7 pm.")),
    ]
    delays: list[float] = []
    with StubServer(replies, wire="openai") as stub:
        resp = chat(get_backend("openai", base_url=stub.url, api_key="k"), delays=delays)
    assert len(stub.requests) == 4 and resp.content == "It is 7 pm."
    # policy backoff 0.01 / 0.02 / 0.02 s; the server's Retry-After wins when longer
    assert delays == [3.0, 1.5, 0.02]


def test_permanent_400_is_not_retried_and_names_status_and_message() -> None:
    with (
        StubServer(
            [Reply(400, openai_error("invalid_request_error", "Invalid schema for function"))]
        ) as stub,
        pytest.raises(LLMError, match=r"HTTP 400: invalid_request_error: Invalid schema") as info,
    ):
        chat(get_backend("openai", base_url=stub.url, api_key="k"))
    assert len(stub.requests) == 1, "a 400 is not retried"
    assert info.value.status_code == 400 and info.value.error_type == "bad_request"
    assert not is_retryable(info.value)


def test_an_error_that_quotes_the_key_is_scrubbed() -> None:
    body = openai_error("invalid_request_error", "Incorrect API key provided: sk-live-SECRET123.")
    with (
        StubServer([Reply(401, body)]) as stub,
        pytest.raises(LLMError, match="HTTP 401") as info,
    ):
        chat(get_backend("openai", base_url=stub.url, api_key="sk-live-SECRET123"))
    assert "SECRET123" not in str(info.value) and "***" in str(info.value)
    assert info.value.error_type == "auth"


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({"id": "x", "choices": []}, "choices.0.message"),
        ({"id": "x"}, "choices.0.message"),
        (
            {
                "choices": [
                    {"message": {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}}
                ]
            },
            "choices.0.message.tool_calls.0.function",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}]},
            "choices.0.message.tool_calls.0.function.name",
        ),
    ],
)
def test_malformed_response_names_what_is_missing(body: dict[str, object], missing: str) -> None:
    api = MockAPI([Reply(200, body)])  # the transport seam: no server, no thread
    with pytest.raises(LLMError, match=rf"malformed response: no '{missing}'") as info:
        chat(get_backend("openai", base_url=api.url, api_key="k", transport=api.transport))
    assert info.value.error_type == "bad_response" and len(api.requests) == 1


def test_non_json_body() -> None:
    api = MockAPI([Reply(200, b"<html>gateway</html>")])
    with pytest.raises(LLMError, match="response is not JSON"):
        chat(get_backend("openai", base_url=api.url, api_key="k", transport=api.transport))


def test_options_max_completion_tokens_and_tool_choice() -> None:
    api = MockAPI([Reply(200, openai_text("ok"))], wire="openai")
    backend = get_backend(
        "openai",
        base_url=api.url,
        api_key="k",
        max_tokens_field="max_completion_tokens",
        transport=api.transport,
    )
    chat(backend, sampling=Sampling(max_tokens=64, tool_choice="required", seed=None))
    assert api.violations == []
    body = api.requests[0].body
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body and "seed" not in body
    assert body["tool_choice"] == "required"


def test_key_from_env_and_required_for_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_backend("openai", base_url="https://api.example.com/v1")
    assert get_backend("openai", base_url="http://127.0.0.1:8080/v1").provider == "127.0.0.1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert get_backend("openai").provider == "openai"  # api.openai.com with the key from the environment
    with StubServer([Reply(200, openai_text("ok"))], wire="openai") as stub:
        chat(get_backend("openai", base_url=stub.url))
    assert stub.requests[0].headers["authorization"] == "Bearer sk-env", (
        "a local server gets the key when set"
    )


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown openai option"):
        get_backend("openai", base_url="http://127.0.0.1:1/v1", temprature=0.2)
    with pytest.raises(ConfigError, match="not an http:// or https:// URL") as info:
        get_backend("openai", base_url="127.0.0.1:8080/v1")
    assert info.value.key == "llm.base_url"
