"""``ollama`` backend (``/api/chat``, non-streaming) against a stub that checks requests like Ollama does."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from promcp.errors import LLMError
from promcp.events import TokenSource
from promcp.host.llm.base import Sampling, get_backend, is_retryable
from tests.stubs.conversation import CONVERSATION, FIRST_CALL, TOOLS, calls_of, chat
from tests.stubs.llm_http import MockAPI, Reply, Request, StubServer, ollama_reply


def test_request_usage_and_prefill_timing() -> None:
    with StubServer(
        [Reply(200, ollama_reply(tool=("time__get_time", {"tz": "Asia/Tokyo"})))], wire="ollama"
    ) as stub:
        backend = get_backend(
            "ollama", base_url=stub.url, model="qwen2.5:7b", context_window=16384, keep_alive="10m"
        )
        resp = chat(backend, CONVERSATION, sampling=Sampling(top_p=0.9))
    assert stub.violations == []
    (req,) = stub.requests
    body = req.body
    assert req.path == "/api/chat" and "authorization" not in req.headers
    assert (body["model"], body["stream"], body["keep_alive"]) == ("qwen2.5:7b", False, "10m")
    assert body["options"] == {
        "temperature": 0.0,
        "num_predict": 512,
        "top_p": 0.9,
        "seed": 0,
        "num_ctx": 16384,
    }
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "time__get_time",
            "description": "Current time in a timezone",
            "parameters": TOOLS[0].input_schema,
        },
    }
    assert body["messages"][2]["tool_calls"] == [
        {"function": {"name": "time__get_time", "arguments": {"tz": "Asia/Tokyo"}}}
    ], "Ollama takes arguments as an object, not a JSON string"
    assert body["messages"][3] == {
        "role": "tool",
        "content": "2026-11-22T19:00:00+09:00",
        "tool_name": "time__get_time",
    }
    ((call_id, name, args),) = calls_of(resp)
    assert re.fullmatch(r"call_\d+", call_id) and (name, args) == ("time__get_time", {"tz": "Asia/Tokyo"})
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (301, 19)
    assert resp.usage.source is TokenSource.PROVIDER
    assert resp.timing.prompt_ms == pytest.approx(640.0)  # prompt_eval_duration (ns) → prefill ms
    assert resp.attrs["generation_ms"] == pytest.approx(1410.0)
    assert resp.attrs["server_total_ms"] == pytest.approx(2150.0)
    assert resp.attrs["load_ms"] == pytest.approx(12.0)
    assert resp.finish_reason == "stop" and resp.model == "qwen2.5:7b"


def test_call_ids_are_unique_across_rounds() -> None:
    """Older Ollama sends no ids: numbering per response would give every round's call the id call_0."""
    tool = ("time__get_time", {"tz": "UTC"})
    with StubServer([Reply(200, ollama_reply(tool=tool)), Reply(200, ollama_reply(tool=tool))]) as stub:
        backend = get_backend("ollama", base_url=stub.url)

        async def two_calls() -> list[str]:
            first = await backend.chat(FIRST_CALL, [], Sampling())
            second = await backend.chat(FIRST_CALL, [], Sampling())
            await backend.aclose()
            return [c.id for c in first.tool_calls + second.tool_calls]

        ids = asyncio.run(two_calls())
    assert all(re.fullmatch(r"call_\d+", i) for i in ids) and len(set(ids)) == 2


def test_provider_ids_are_kept() -> None:
    reply = ollama_reply(tool=("time__get_time", {"tz": "UTC"}))
    reply["message"]["tool_calls"][0]["id"] = "call_k3x9"  # newer servers send one
    with StubServer([Reply(200, reply)]) as stub:
        resp = chat(get_backend("ollama", base_url=stub.url))
    assert resp.tool_calls[0].id == "call_k3x9"


def test_answer_without_tools_when_the_model_must_answer() -> None:
    with StubServer([Reply(200, ollama_reply(content="It is 19:00 in Tokyo."))], wire="ollama") as stub:
        resp = chat(get_backend("ollama", base_url=stub.url), sampling=Sampling(tool_choice="none"))
    assert "tools" not in stub.requests[0].body
    assert resp.content == "It is 19:00 in Tokyo." and resp.tool_calls == []


def test_model_not_found_is_permanent() -> None:
    with (
        StubServer([Reply(404, {"error": "model 'llama9' not found, try pulling it first"})]) as stub,
        pytest.raises(LLMError, match="HTTP 404: model 'llama9' not found") as info,
    ):
        chat(get_backend("ollama", base_url=stub.url, model="llama9"))
    assert len(stub.requests) == 1 and info.value.error_type == "not_found"


def test_500_then_success_and_error_in_a_200_body() -> None:
    replies = [
        Reply(500, {"error": "llama runner process has terminated: signal: killed"}),
        Reply(200, ollama_reply(content="ok")),
    ]
    with StubServer(replies) as stub:
        assert chat(get_backend("ollama", base_url=stub.url)).content == "ok"
    assert len(stub.requests) == 2
    with (
        StubServer([Reply(200, {"error": "unexpected EOF"})] * 4) as stub,
        pytest.raises(LLMError, match="ollama: unexpected EOF") as info,
    ):
        chat(get_backend("ollama", base_url=stub.url))
    assert info.value.error_type == "server_error" and len(stub.requests) == 4


def test_malformed_response_names_the_field() -> None:
    bad_call = ollama_reply()
    bad_call["message"]["tool_calls"] = [{"function": {"arguments": {}}}]
    api = MockAPI([Reply(200, {"model": "qwen2.5:7b", "done": True}), Reply(200, bad_call)])
    backend = get_backend("ollama", base_url=api.url, transport=api.transport)  # no server, no thread
    with pytest.raises(LLMError, match="ollama: malformed response: no 'message'"):
        chat(backend)
    with pytest.raises(LLMError, match=r"no 'message\.tool_calls\.0\.function\.name'"):
        chat(backend)
    assert len(api.requests) == 2


def test_connection_refused_and_timeout_are_retryable() -> None:
    backend = get_backend("ollama", base_url="http://127.0.0.1:9")
    with pytest.raises(LLMError, match=r"cannot reach http://127\.0\.0\.1:9") as info:
        chat(backend, delays=[])
    assert info.value.error_type == "connection" and is_retryable(info.value)

    def slow(req: Request) -> Reply:
        time.sleep(0.3)
        return Reply(200, ollama_reply(content="late"))

    with StubServer(slow) as stub, pytest.raises(LLMError, match=r"timed out after 0\.05 s") as info:
        chat(get_backend("ollama", base_url=stub.url, timeout_s=0.05), delays=[])
    assert info.value.error_type == "timeout" and is_retryable(info.value)
    assert len(stub.requests) == 4, "1 call + 3 retries"
