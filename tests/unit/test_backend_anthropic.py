"""``anthropic`` backend (Messages API, c-cust) against a stub that checks requests like the real API."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from promcp.errors import ConfigError, LLMError
from promcp.events import Origin, TokenSource
from promcp.host.llm.base import Message, Sampling, ToolCall, get_backend
from tests.stubs.conversation import CONVERSATION, TOOLS, calls_of, chat
from tests.stubs.llm_http import MockAPI, Reply, StubServer, anthropic_agent, anthropic_error, anthropic_reply

TOOL_USE = [
    {"type": "text", "text": "Checking."},
    {
        "type": "tool_use",
        "id": "toolu_01A09q90qw90lq917835lq9",
        "name": "time__get_time",
        "input": {"tz": "UTC"},
    },
]


def test_wire_format_and_provider_usage() -> None:
    two_results = [
        *CONVERSATION[:2],
        Message(
            "assistant",
            "Two zones.",
            tool_calls=[
                ToolCall("call_1", "time__get_time", {"tz": "Asia/Tokyo"}),
                ToolCall("call_2", "time__get_time", {"tz": "UTC"}),
            ],
        ),
        Message("tool", "19:00", tool_call_id="call_1", origin=Origin.TOOL_RESULTS),
        Message("tool", "10:00", tool_call_id="call_2", origin=Origin.TOOL_RESULTS),
    ]
    reply = anthropic_reply(TOOL_USE, stop="tool_use", cache_read=100, cache_write=50)
    with StubServer(
        [Reply(200, reply, {"request-id": "req_018EeWyXxfu5pfWkrYcMdjWG"})], wire="anthropic"
    ) as stub:
        backend = get_backend("anthropic", base_url=stub.url, api_key="sk-ant-test")
        resp = chat(backend, two_results, sampling=Sampling(tool_choice="required", max_tokens=1024))
    assert stub.violations == []
    req = stub.requests[0]
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-test" and req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    body = req.body
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("claude-sonnet-4-5", 1024, 0.0)
    assert body["system"] == "You are helpful." and body["tool_choice"] == {"type": "any"}
    assert "top_p" not in body, "newer Claude models reject temperature and top_p together"
    assert body["tools"] == [
        {
            "name": "time__get_time",
            "description": "Current time in a timezone",
            "input_schema": TOOLS[0].input_schema,
        }
    ]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0] == {"role": "user", "content": "What time is it in Tokyo?"}
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Two zones."},
        {"type": "tool_use", "id": "call_1", "name": "time__get_time", "input": {"tz": "Asia/Tokyo"}},
        {"type": "tool_use", "id": "call_2", "name": "time__get_time", "input": {"tz": "UTC"}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "19:00"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "10:00"},
    ], "consecutive tool results share one user turn"
    assert resp.content == "Checking."
    assert calls_of(resp) == [("toolu_01A09q90qw90lq917835lq9", "time__get_time", {"tz": "UTC"})]
    assert resp.tool_calls[0].raw_arguments == '{"tz":"UTC"}'
    # provider usage is ground truth: input includes cache reads and writes, which are kept apart
    assert resp.usage.input_tokens == 472 + 100 + 50 and resp.usage.output_tokens == 41
    assert (resp.usage.cache_read_tokens, resp.usage.cache_write_tokens) == (100, 50)
    assert resp.usage.source is TokenSource.PROVIDER
    assert resp.finish_reason == "tool_use" and resp.model == "claude-sonnet-4-5-20250929"
    assert resp.attrs == {"request_id": "req_018EeWyXxfu5pfWkrYcMdjWG"}
    assert resp.response_id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert resp.timing.prompt_ms is None, "non-streaming: no prefill split"


def test_local_estimate_uses_the_labelled_claude_approximation() -> None:
    backend = get_backend("anthropic", api_key="k")
    assert backend.tokenizer.name == "approx:claude" and backend.tokenizer.source is TokenSource.APPROX
    parts = backend.input_parts(CONVERSATION, TOOLS)
    assert [(p.origin, p.key) for p in parts] == [  # the Messages API's prompt order: tools, system, messages
        (Origin.SCHEMAS, "time/get_time"),
        (Origin.SYSTEM, "system"),
        (Origin.USER, "prompt"),
        (Origin.HISTORY, "msg:2"),
        (Origin.TOOL_RESULTS, "call_1"),
    ]
    assert all(p.tokens > 0 for p in parts)
    assert '"input_schema"' in backend.render_tool(TOOLS[0]), "estimates count the schema as sent"


def test_a_whole_tool_round_passes_the_api_checks() -> None:
    """Round 1 (tool_use) then round 2 (tool_result): the requests the agent loop builds are valid Messages."""
    with StubServer(anthropic_agent, wire="anthropic") as stub:
        backend = get_backend("anthropic", base_url=stub.url, api_key="k")
        first = chat(backend, CONVERSATION[:2])
        (call,) = first.tool_calls
        history = [
            *CONVERSATION[:2],
            Message("assistant", first.content or "", tool_calls=[call]),
            Message("tool", "10:00", tool_call_id=call.id, origin=Origin.TOOL_RESULTS),
        ]
        second = chat(backend, history)
    assert stub.violations == []
    assert second.content == "Done: the tool answered." and second.tool_calls == []
    assert second.usage.cache_read_tokens == 128


def test_the_stub_rejects_what_the_api_rejects() -> None:
    """The stub's checks can fail: a tool_result without a preceding tool_use is the API's 400."""
    with StubServer([], wire="anthropic") as stub:
        r = httpx.post(
            stub.url + "/v1/messages",
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
            json={
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}],
            },
        )
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert "unexpected `tool_use_id`" in stub.violations[0]


def test_overloaded_429_and_500_are_retried_with_retry_after() -> None:
    replies = [
        Reply(529, anthropic_error("overloaded_error", "Overloaded")),
        Reply(
            429,
            anthropic_error(
                "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
            ),
            {"retry-after": "7"},
        ),
        Reply(500, anthropic_error("api_error", "Internal server error")),
        Reply(200, anthropic_reply([{"type": "text", "text": "ok"}], stop="end_turn")),
    ]
    delays: list[float] = []
    with StubServer(replies, wire="anthropic") as stub:
        resp = chat(get_backend("anthropic", base_url=stub.url, api_key="k"), delays=delays)
    assert len(stub.requests) == 4 and resp.content == "ok"
    assert delays == [0.01, 7.0, 0.02]


def test_gives_up_after_the_policy() -> None:
    replies = [Reply(529, anthropic_error("overloaded_error", "Overloaded")) for _ in range(5)]
    delays: list[float] = []
    with (
        StubServer(replies) as stub,
        pytest.raises(LLMError, match=r"anthropic: HTTP 529: overloaded_error: Overloaded") as info,
    ):
        chat(get_backend("anthropic", base_url=stub.url, api_key="k"), delays=delays)
    assert len(stub.requests) == 4, "1 call + 3 retries"
    assert delays == [0.01, 0.02, 0.02] and info.value.error_type == "overloaded"


def test_permanent_errors_name_status_and_message_without_the_key() -> None:
    with (
        StubServer([Reply(401, anthropic_error("authentication_error", "invalid x-api-key"))]) as stub,
        pytest.raises(LLMError, match="HTTP 401: authentication_error: invalid x-api-key") as info,
    ):
        chat(get_backend("anthropic", base_url=stub.url, api_key="sk-ant-api03-SECRET"))
    assert len(stub.requests) == 1 and "SECRET" not in str(info.value)
    body = anthropic_error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
    with StubServer([Reply(400, body)]) as stub, pytest.raises(LLMError, match="prompt is too long") as info:
        chat(get_backend("anthropic", base_url=stub.url, api_key="k"))
    assert info.value.status_code == 400 and len(stub.requests) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("usage"), "no 'usage'"),
        (lambda d: d["usage"].pop("output_tokens"), "usage.output_tokens is missing"),
        (lambda d: d["usage"].update(input_tokens="12"), "usage.input_tokens is '12'"),
        (lambda d: d.update(content={"type": "text"}), "'content' is not a list"),
        (lambda d: d["content"][1].pop("id"), "no 'content.1.id'"),
        (lambda d: d["content"][0].pop("type"), "no 'content.0.type'"),
    ],
)
def test_malformed_response_names_what_is_missing(change: object, message: str) -> None:
    doc = anthropic_reply([dict(b) for b in TOOL_USE], stop="tool_use")
    change(doc)  # type: ignore[operator]
    api = MockAPI([Reply(200, doc)])  # the transport seam: no server, no thread
    with pytest.raises(LLMError, match=rf"anthropic: malformed response: {message}") as info:
        chat(get_backend("anthropic", base_url=api.url, api_key="k", transport=api.transport))
    assert info.value.error_type == "bad_response"


def test_thinking_blocks_are_skipped() -> None:
    blocks = [
        {"type": "thinking", "thinking": "UTC…", "signature": "EqQB"},
        {"type": "text", "text": "10:00"},
    ]
    api = MockAPI([Reply(200, anthropic_reply(blocks, stop="end_turn"))], wire="anthropic")
    resp = chat(get_backend("anthropic", base_url=api.url, api_key="k", transport=api.transport))
    assert resp.content == "10:00" and resp.tool_calls == [] and api.violations == []


def test_key_from_env_and_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY") as info:
        get_backend("anthropic")
    assert info.value.key == "llm.api_key"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    with StubServer([Reply(200, anthropic_reply([{"type": "text", "text": "hi"}], stop="end_turn"))]) as stub:
        chat(get_backend("anthropic", base_url=stub.url))
    assert stub.requests[0].headers["x-api-key"] == "sk-ant-env"
