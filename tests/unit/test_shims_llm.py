"""LLM client wrappers (promcp.shims._llm): the real OpenAI / Anthropic SDK clients against stub HTTP servers on
127.0.0.1, and the host-side helpers for llama.cpp / Ollama shaped calls. Asserts S1/S2/S5/S6 events, origin parts
scaled to provider usage, and the model's tool calls handed to the S2 → S3 join (promcp.shims._join)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from promcp import wire
from promcp.recorder import Recorder
from promcp.shims import _join, _llm
from promcp.shims._patch import Patches
from tests.stubs.llm_http import (
    Reply,
    StubServer,
    anthropic_reply,
    ollama_reply,
    openai_text,
    openai_tool_call,
)

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Return the text unchanged.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
]


def _events(rec: Recorder) -> list[dict[str, Any]]:
    path = rec.close()
    assert path is not None
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        if isinstance(r.get("attrs"), str):
            r["attrs"] = json.loads(r["attrs"])
    return sorted(rows, key=lambda r: r["seq"])


@pytest.fixture
def rec(tmp_path: Path) -> Iterator[Recorder]:
    recorder = Recorder(tmp_path / "traces", topology="c-cust", fsync="never")
    with recorder.activate():
        yield recorder
    recorder.close()
    _join.join.clear()


def test_openai_sdk_two_rounds_with_join(rec: Recorder) -> None:
    openai = pytest.importorskip("openai")
    replies = [
        Reply(200, openai_tool_call("echo", '{"text": "hi"}', call_id="call_42")),
        Reply(200, openai_text("hi")),
    ]
    with StubServer(replies) as stub:
        client = _llm.wrap_openai(openai.OpenAI(base_url=stub.url + "/v1", api_key="sk-test", max_retries=0))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Echo hi please."},
        ]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS_OPENAI)
        assert first.choices[0].message.tool_calls[0].id == "call_42"  # the traced call is unchanged
        assert _join.join.take("echo", {"text": "hi"}) == "call_42"
        assert _join.join.take("echo", {"text": "hi"}) is None  # consumed once
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [first.choices[0].message.tool_calls[0].model_dump()],
            },
            {"role": "tool", "tool_call_id": "call_42", "content": "hi"},
        ]
        client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS_OPENAI)
    ev = _events(rec)
    assert [e["stage"] for e in ev] == ["S1", "S2", "S5", "S6"]
    s1, s2, s5, s6 = ev
    assert s1["round"] == s2["round"] == 1 and s5["round"] == s6["round"] == 2
    # provider usage is ground truth: 412 input tokens, origins scaled to it and summing to it
    assert s1["tokens_in"] == 412 and s1["token_source"] == "provider"
    assert (
        s1["in_system"] + s1["in_schemas"] + s1["in_user"] + s1["in_history"] + s1["in_tool_results"] == 412
    )
    assert s1["in_schemas"] > 0 and s1["in_user"] > 0 and s1["in_tool_results"] == 0
    assert s1["attrs"]["tokens_in_estimate"] > 0 and s1["cache_read_tokens"] == 256
    assert s1["timing_quality"] == "none" and s1["latency_ms"] is None
    assert s2["tokens_out"] == 23 and s2["tool_call_id"] == "call_42" and s2["tool"] == "echo"
    assert s2["latency_ms"] > 0 and s2["provider"] == "127.0.0.1"  # an OpenAI-compatible server, not OpenAI
    assert s5["in_tool_results"] > 0 and s5["in_history"] > 0
    keys = {p[1] if isinstance(p, list) else p["key"] for p in s5["parts"]}
    assert {"system", "prompt", "echo", "call_42"} <= keys
    assert s6["tokens_out"] == 12 and s6["attrs"]["finish_reason"] == "stop"


def test_anthropic_sdk_patched_classwide(rec: Recorder) -> None:
    anthropic = pytest.importorskip("anthropic")
    block = {"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {"text": "x"}}
    replies = [Reply(200, anthropic_reply([block], stop="tool_use", cache_read=100, cache_write=20))]
    original = anthropic.resources.messages.Messages.create
    patches = Patches()
    _llm.install(patches)
    assert anthropic.resources.messages.Messages.create is not original
    try:
        with StubServer(replies) as stub:
            client = anthropic.Anthropic(base_url=stub.url, api_key="sk-ant-test", max_retries=0)
            resp = client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=100,
                system="Be brief.",
                messages=[{"role": "user", "content": "echo x"}],
                tools=TOOLS_ANTHROPIC,
            )
            assert resp.content[0].id == "toolu_01"
    finally:
        patches.undo()
    assert anthropic.resources.messages.Messages.create is original  # undone
    s1, s2 = _events(rec)
    assert (s1["stage"], s2["stage"]) == ("S1", "S2")
    assert s1["tokens_in"] == 472 + 100 + 20  # input + cache read + cache write
    assert (s1["cache_write_tokens"], s1["cache_read_tokens"]) == (20, 100)
    assert s2["tool_call_id"] == "toolu_01" and s2["tokens_out"] == 41
    assert _join.join.take("echo", {"text": "x"}) == "toolu_01"


def test_sdk_error_is_recorded_and_reraised(rec: Recorder) -> None:
    openai = pytest.importorskip("openai")
    with StubServer([Reply(500, {"error": {"message": "boom", "type": "server_error"}})]) as stub:
        client = _llm.wrap_openai(openai.OpenAI(base_url=stub.url + "/v1", api_key="k", max_retries=0))
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "q"}])
    (s1,) = _events(rec)  # a failed call is one input event carrying the whole call (docs/accounting.md)
    assert s1["status"] == "error" and s1["error_type"] == "InternalServerError" and s1["latency_ms"] > 0
    assert s1["tokens_in"] is None and s1["attrs"]["tokens_in_estimate"] > 0


def test_ollama_native_prefill_split(rec: Recorder) -> None:
    body = ollama_reply(tool=("echo", {"text": "a"}))
    request = {
        "model": "qwen2.5:7b",
        "messages": [{"role": "user", "content": "say a"}],
        "tools": TOOLS_OPENAI,
    }
    _llm.record_chat(
        provider="ollama", wire="ollama", request=request, response=body, started_ns=0, ended_ns=3_000_000_000
    )
    s1, s2 = _events(rec)
    assert s1["latency_ms"] == pytest.approx(640.0) and s1["timing_quality"] == "exact"
    assert s2["latency_ms"] == pytest.approx(3000.0 - 640.0)
    assert s1["tokens_in"] == 301 and s2["tokens_out"] == 19
    assert s2["stage"] == "S2" and s2["tool_call_id"].startswith("call_")  # Ollama sends no ids


def test_wrap_chat_llama_cpp_shape_counts_locally(rec: Recorder) -> None:
    def create_chat_completion(
        **kwargs: Any,
    ) -> dict[str, Any]:  # llama-cpp-python returns an OpenAI-shaped dict
        return {"choices": [{"message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}]}

    fn = _llm.wrap_chat(create_chat_completion, provider="llama.cpp", model="smollm2.gguf")
    assert fn(messages=[{"role": "user", "content": "2+2?"}])["choices"][0]["message"]["content"] == "four"
    s1, s6 = _events(rec)
    assert s1["token_source"] == "tokenizer" and s1["tokens_in"] == s1["in_user"] > 0
    assert s1["tokenizer"] == "o200k_base"  # the .gguf file is not here: the footprint tokenizer counts
    assert s6["stage"] == "S6" and s6["tokens_out"] > 0 and s6["token_source"] == "tokenizer"


def test_tracing_failure_never_breaks_the_call(rec: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("forced failure inside the hook")

    monkeypatch.setitem(wire._REQUEST, "openai", boom)
    monkeypatch.setitem(wire._RESPONSE, "openai", boom)
    fn = _llm.wrap_chat(lambda **kw: {"ok": kw["x"]}, provider="p")
    assert fn(x=7) == {"ok": 7}
    assert _events(rec) == []


def test_chat_span_with_genai_attributes(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import promcp

    mem = InMemorySpanExporter()
    reply = Reply(200, openai_tool_call("echo", '{"text": "s"}', call_id="call_span"))
    with StubServer([reply]) as stub:
        promcp.instrument(out=tmp_path / "traces", span_exporter=mem)
        try:
            client = openai.OpenAI(base_url=stub.url + "/v1", api_key="k", max_retries=0)
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "s"}], tools=TOOLS_OPENAI
            )
        finally:
            path = promcp.uninstrument()
    (span,) = [s for s in mem.get_finished_spans() if s.name.startswith("chat ")]
    attrs = dict(span.attributes or {})
    assert span.name == "chat gpt-4o-mini"
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "127.0.0.1"
    assert attrs["gen_ai.usage.input_tokens"] == 412 and attrs["gen_ai.usage.output_tokens"] == 23
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs["gen_ai.tool.call.id"] == "call_span" and attrs["promcp.stage"] == "S2"
    assert path is not None
    rows = pq.read_table(path).to_pylist()
    assert {r["span_id"] for r in rows} == {f"{span.context.span_id:016x}"}  # S1 and S2 point at the span
    assert {r["trace_id"] for r in rows} == {f"{span.context.trace_id:032x}"}


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


def _oa_chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-s1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else [],
        "usage": usage,
    }


def test_openai_stream_recorded_when_consumed(rec: Recorder) -> None:
    openai = pytest.importorskip("openai")
    tc = {"index": 0, "id": "call_s", "type": "function", "function": {"name": "echo", "arguments": ""}}
    body = _sse(
        [
            (None, _oa_chunk({"role": "assistant", "content": None, "tool_calls": [tc]})),
            (None, _oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"text": '}}]})),
            (None, _oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"streamed"}'}}]})),
            (None, _oa_chunk({}, finish="tool_calls")),
            (None, _oa_chunk(None, usage={"prompt_tokens": 90, "completion_tokens": 9, "total_tokens": 99})),
            (None, "[DONE]"),
        ]
    )
    with StubServer([Reply(200, body, {"content-type": "text/event-stream"})]) as stub:
        client = _llm.wrap_openai(openai.OpenAI(base_url=stub.url + "/v1", api_key="k", max_retries=0))
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "echo streamed"}],
            tools=TOOLS_OPENAI,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)  # the caller iterates the SDK's chunks unchanged
        assert len(chunks) == 5 and chunks[0].choices[0].delta.tool_calls[0].id == "call_s"
    assert _join.join.take("echo", {"text": "streamed"}) == "call_s"
    s1, s2 = _events(rec)
    assert s1["timing_quality"] == "exact" and s1["latency_ms"] > 0  # time to first chunk
    assert s2["stage"] == "S2" and s2["tool_call_id"] == "call_s" and s2["tokens_out"] == 9
    assert s1["tokens_in"] == 90 and s1["token_source"] == "provider"


def test_anthropic_async_stream_recorded(rec: Recorder) -> None:
    anthropic = pytest.importorskip("anthropic")
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_s",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 7},
        },
    }
    events = [
        ("message_start", start),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]

    async def run(url: str) -> str:
        client = _llm.wrap_anthropic(anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0))
        stream = await client.messages.create(
            model="claude-haiku-4-5", max_tokens=20, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = ""
        async with stream:
            async for event in stream:
                if event.type == "content_block_delta":
                    text += event.delta.text
        return text

    import asyncio

    with StubServer([Reply(200, _sse(events), {"content-type": "text/event-stream"})]) as stub:
        assert asyncio.run(run(stub.url)) == "Hello"
    s1, s6 = _events(rec)
    assert s6["stage"] == "S6" and s6["tokens_out"] == 5 and s6["resp_preview"] == "Hello"
    assert s1["tokens_in"] == 57 and s1["cache_read_tokens"] == 7
    assert s1["latency_ms"] is not None and s6["latency_ms"] is not None


class _FakeStream:
    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self._it = iter(chunks)
        self.closed = False

    def __next__(self) -> dict[str, Any]:
        return next(self._it)

    def close(self) -> None:
        self.closed = True


def test_stream_abandoned_and_broken_feed(rec: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [{"message": {"content": f"w{i} "}} for i in range(5)] + [{"done": True, "eval_count": 5}]
    fn = _llm.wrap_chat(lambda **kw: _FakeStream(chunks), provider="ollama", wire="ollama")
    stream = fn(model="m", messages=[{"role": "user", "content": "go"}], stream=True)
    assert next(stream) == chunks[0]
    stream.close()  # abandoned after one chunk: still one input + one output event
    assert stream.closed

    class Broken:
        def feed(self, chunk: Any) -> None:
            raise RuntimeError("forced failure inside the hook")

        def result(self) -> Any:
            raise RuntimeError("forced failure inside the hook")

    monkeypatch.setitem(wire._STREAM, "ollama", Broken)
    stream = fn(model="m", messages=[{"role": "user", "content": "go"}], stream=True)
    assert list(stream) == chunks  # the caller sees every chunk unchanged
    s1, s6 = _events(rec)
    assert (s1["stage"], s6["stage"]) == ("S1", "S6") and s6["resp_preview"] == "w0 "
