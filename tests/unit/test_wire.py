"""promcp.wire: provider requests split by origin, responses and usage normalized (every usage field kept), streams
folded from decoded JSON and from the vendor SDKs' own objects alike, SSE / NDJSON framing at any chunk boundary,
strict parsing naming the missing field, and MCP's JSON shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from promcp import wire
from promcp.errors import WireFormatError
from promcp.events import Origin, Status, Transport
from promcp.wire import anthropic, mcp, ollama, openai, openai_responses
from promcp.wire.framing import NDJSONDecoder, SSEDecoder
from tests.stubs.llm_http import anthropic_reply, ollama_reply, openai_text, openai_tool_call
from tests.stubs.llm_streams import (
    ANTHROPIC_OVERLOADED,
    anthropic_stream,
    ndjson,
    ollama_stream,
    openai_sse,
    openai_stream,
    responses_body,
    responses_stream,
    sse,
)

FN = {"name": "get_time", "description": "Time in a zone", "parameters": {"type": "object"}}


def keys(request: wire.ChatRequest) -> list[tuple[Origin, str]]:
    return [(p.origin, p.key) for p in request.pieces]


# -- requests ----------------------------------------------------------------------------------------------------------


def test_openai_request_pieces_in_prompt_order() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": [{"type": "text", "text": "Time?"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": '{"tz":"UTC"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [{"type": "function", "function": FN}],
        "stream": True,
    }
    req = wire.parse_request("openai", body)
    assert keys(req) == [
        (Origin.SYSTEM, "system"),
        (Origin.SCHEMAS, "get_time"),
        (Origin.USER, "prompt"),
        (Origin.HISTORY, "msg:2"),
        (Origin.TOOL_RESULTS, "c1"),
        (Origin.HISTORY, "msg:4"),
    ]
    texts = [p.text for p in req.pieces]
    assert texts[1] == mcp.tool_text("get_time", "Time in a zone", {"type": "object"})
    assert texts[2] == "Time?\n[image_url content omitted]"
    assert texts[3] == '[{"name":"get_time","arguments":{"tz":"UTC"}}]'
    assert (req.model, req.stream, req.assistant_turns, req.tool_names) == ("gpt-4o", True, 1, ["get_time"])


def test_ollama_tool_results_keyed_by_the_call_they_answer() -> None:
    body = {
        "model": "qwen2.5:7b",
        "messages": [
            {"role": "user", "content": "t"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "a", "arguments": {}}}],
            },
            {"role": "tool", "content": "r1", "tool_name": "a"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "x7", "function": {"name": "a", "arguments": {"k": 1}}}],
            },
            {"role": "tool", "content": "r2", "tool_name": "a"},
        ],
    }
    req = ollama.parse_request(body)
    assert keys(req)[2:] == [
        (Origin.TOOL_RESULTS, "msg:2"),
        (Origin.HISTORY, "msg:3"),
        (Origin.TOOL_RESULTS, "x7"),
    ]
    assert req.stream is True and req.assistant_turns == 2  # Ollama streams unless told not to


def test_anthropic_request_tools_system_blocks_tool_results() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {"name": "get_time", "description": "Time", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        ],
        "messages": [
            {"role": "user", "content": "Time in Tokyo?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"tz": "Asia/Tokyo"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "19:00"}],
                    },
                    {"type": "text", "text": "and UTC?"},
                ],
            },
        ],
    }
    req = anthropic.parse_request(body)
    assert keys(req) == [
        (Origin.SCHEMAS, "get_time"),
        (Origin.SCHEMAS, "web_search"),
        (Origin.SYSTEM, "system"),
        (Origin.USER, "prompt"),
        (Origin.HISTORY, "msg:1"),
        (Origin.TOOL_RESULTS, "toolu_1"),
        (Origin.HISTORY, "msg:2"),
    ]
    by_key = {p.key: p.text for p in req.pieces}
    assert by_key["get_time"] == '{"name":"get_time","description":"Time","input_schema":{"type":"object"}}'
    assert json.loads(by_key["web_search"]) == {
        "type": "web_search_20250305",
        "name": "web_search",
        "max_uses": 5,
    }
    assert by_key["system"] == "You are Claude Code."
    assert by_key["msg:1"] == 'Checking.\n{"name":"get_time","input":{"tz":"Asia/Tokyo"}}'
    assert (by_key["toolu_1"], by_key["msg:2"], req.assistant_turns) == ("19:00", "and UTC?", 1)


def test_responses_request_items() -> None:
    body = {
        "model": "gpt-5-mini",
        "instructions": "Be terse.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Time?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "call_R1", "name": "get_time", "arguments": '{"tz":"UTC"}'},
            {"type": "function_call_output", "call_id": "call_R1", "output": "12:00"},
        ],
        "tools": [{"type": "function", **FN}, {"type": "web_search"}],
    }
    req = openai_responses.parse_request(body)
    assert keys(req) == [
        (Origin.SYSTEM, "system"),
        (Origin.SCHEMAS, "get_time"),
        (Origin.SCHEMAS, "web_search"),
        (Origin.USER, "prompt"),
        (Origin.HISTORY, "msg:1"),
        (Origin.HISTORY, "msg:2"),
        (Origin.TOOL_RESULTS, "call_R1"),
    ]
    assert req.assistant_turns == 1  # reasoning + function_call are one assistant turn
    assert wire.parse_request("openai-responses", {"input": "hi"}).pieces == [
        wire.Piece(Origin.USER, "prompt", "hi")
    ]
    with pytest.raises(ValueError, match="unknown LLM wire format 'vertex'"):
        wire.parse_request("vertex", {})


# -- responses and usage ---------------------------------------------------------------------------------------------


def test_openai_response_and_usage_fields_kept() -> None:
    out = openai.parse_response(openai_tool_call("get_time", '{"tz":"UTC"}', call_id="call_9"))
    assert [(c.id, c.name, c.arguments, c.raw_arguments) for c in out.tool_calls] == [
        ("call_9", "get_time", {"tz": "UTC"}, '{"tz":"UTC"}')
    ]
    assert (out.finish_reason, out.model, out.response_id) == (
        "tool_calls",
        "gpt-4o-mini-2024-07-18",
        "chatcmpl-9xYz",
    )
    u = out.usage
    assert u is not None
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) == (412, 23, 256, 0)
    assert u.uncached_input_tokens == 156 and u.reported["prompt_tokens_details"]["audio_tokens"] == 0
    text = openai.parse_response(openai_text("hi"))
    assert (text.text, text.tool_calls, text.usage and text.usage.cache_read_tokens) == ("hi", [], None)


def test_anthropic_usage_adds_cache_reads_and_writes_and_keeps_the_ttl_split() -> None:
    doc = anthropic_reply([{"type": "text", "text": "ok"}], stop="end_turn", cache_read=900, cache_write=300)
    doc["usage"]["cache_creation"] = {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}
    doc["usage"]["output_tokens_details"] = {"thinking_tokens": 12}
    out = anthropic.parse_response(doc, strict=True)
    u = out.usage
    assert u is not None and out.text == "ok" and out.finish_reason == "end_turn"
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) == (472 + 900 + 300, 900, 300)
    assert (u.cache_write_5m_tokens, u.cache_write_1h_tokens, u.reasoning_tokens) == (100, 200, 12)
    assert u.uncached_input_tokens == 472 and u.reported["service_tier"] == "standard"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("usage"), "no 'usage'"),
        (lambda d: d["usage"].update(input_tokens="12"), "usage.input_tokens is '12'"),
        (lambda d: d.update(content={}), "'content' is not a list"),
        (lambda d: d["content"][0].pop("id"), "no 'content.0.id'"),
    ],
)
def test_anthropic_strict_names_the_field(change: Any, message: str) -> None:
    doc = anthropic_reply([{"type": "tool_use", "id": "t", "name": "n", "input": {}}], stop="tool_use")
    change(doc)
    with pytest.raises(WireFormatError, match=message):
        anthropic.parse_response(doc, strict=True)
    anthropic.parse_response(doc)  # lenient: reads what is there, never raises


def test_openai_strict_and_ollama_response() -> None:
    with pytest.raises(WireFormatError, match=r"no 'choices\.0\.message'") as info:
        openai.parse_response({"choices": []}, strict=True)
    assert info.value.path == "choices.0.message"
    bad = {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": ""}}]}}]}
    with pytest.raises(WireFormatError, match=r"function\.name is not a name"):
        openai.parse_response(bad, strict=True)
    ids = iter(["id-a"])
    out = ollama.parse_response(
        ollama_reply(tool=("get_time", {"tz": "UTC"})), strict=True, fallback_id=lambda: next(ids)
    )
    assert [(c.id, c.arguments) for c in out.tool_calls] == [("id-a", {"tz": "UTC"})]
    assert out.prompt_ms == pytest.approx(640.0) and out.finish_reason == "stop"
    assert out.timings == pytest.approx({"generation_ms": 1410.0, "load_ms": 12.0, "server_total_ms": 2150.0})
    assert out.usage is not None and (out.usage.input_tokens, out.usage.output_tokens) == (301, 19)
    assert ollama.parse_response({"error": "model 'x' not found"}).error == "model 'x' not found"


def test_responses_response() -> None:
    out = wire.parse_response("openai-responses", responses_body())
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("call_R1", "get_time", {"tz": "Asia/Tokyo"})
    ]
    assert (out.thinking, out.finish_reason, out.response_id) == ("Need the time.", "completed", "resp_01")
    u = out.usage
    assert u is not None and (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (
        2006,
        1920,
        97,
        64,
    )
    assert openai_responses.parse_response(responses_body(call=False)).text == "It is 7 pm."


# -- streams: decoded JSON and SDK objects -----------------------------------------------------------------------------


def _decoded(body: bytes, chunk: int = 7) -> list[Any]:
    """SSE bytes cut into ``chunk``-byte pieces, decoded as a proxy would."""
    decoder = SSEDecoder()
    events = []
    for i in range(0, len(body), chunk):
        events += decoder.feed(body[i : i + chunk])
    return [e.json() for e in events + decoder.close() if e.json() is not None]


def _fold(api: str, events: list[Any]) -> wire.Output:
    acc = wire.stream_accumulator(api)
    for event in events:
        acc.feed(event)
    return acc.result()


def test_anthropic_stream_with_cache_usage_from_sse_and_from_sdk_events() -> None:
    events = anthropic_stream(thinking_tokens=7)
    decoded = _decoded(sse(events))
    assert len(decoded) == len(events)
    out = _fold("anthropic", decoded)
    assert (
        out.text == "Let me check."
        and out.finish_reason == "tool_use"
        and out.response_id == "msg_01StreamTest"
    )
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("toolu_01A", "get_time", {"tz": "Asia/Tokyo"})
    ]
    u = out.usage
    assert u is not None
    assert (u.input_tokens, u.output_tokens) == (21 + 1800 + 384, 58), "message_delta's cumulative count wins"
    assert (u.cache_read_tokens, u.cache_write_tokens) == (1800, 384)
    assert (u.cache_write_5m_tokens, u.cache_write_1h_tokens, u.reasoning_tokens) == (320, 64, 7)
    sdk_types = pytest.importorskip("anthropic.types")
    adapter = pytest.importorskip("pydantic").TypeAdapter(sdk_types.RawMessageStreamEvent)
    typed = [adapter.validate_python(d) for _n, d in events if d["type"] != "ping"]
    assert _fold("anthropic", typed) == out  # the SDK's own event objects give the same result


def test_anthropic_stream_older_delta_and_error_event() -> None:
    out = _fold("anthropic", [d for _n, d in anthropic_stream(tool=None, cumulative_delta=False)])
    assert (
        out.usage is not None and out.usage.input_tokens == 21 + 1800 + 384 and out.usage.output_tokens == 58
    )
    cut = [d for _n, d in anthropic_stream()[:4]] + [ANTHROPIC_OVERLOADED[1]]
    failed = _fold("anthropic", cut)
    assert failed.error is not None and "overloaded_error" in failed.error and failed.text == "Let me"


def test_openai_stream_from_sse_and_from_sdk_chunks() -> None:
    chunks = openai_stream()
    out = _fold("openai", _decoded(openai_sse(chunks), chunk=11))
    assert [(c.id, c.arguments) for c in out.tool_calls] == [
        ("call_A1", {"tz": "Asia/Tokyo"}),
        ("call_B2", {"tz": "UTC"}),
    ]
    assert out.finish_reason == "tool_calls" and out.usage is not None
    assert (out.usage.input_tokens, out.usage.cache_read_tokens, out.usage.output_tokens) == (1412, 1280, 42)
    sdk = pytest.importorskip("openai.types.chat")
    typed = [sdk.ChatCompletionChunk.model_validate(c) for c in chunks]
    assert _fold("openai", typed) == out
    text = _fold("openai", openai_stream(tool_calls=False))
    assert (text.text, text.tool_calls, text.finish_reason) == ("It is 7 pm.", [], "stop")


def test_ollama_ndjson_stream() -> None:
    decoder = NDJSONDecoder()
    body = ndjson(ollama_stream()) + b"not json\n"
    objects = [o for i in range(0, len(body), 5) for o in decoder.feed(body[i : i + 5])] + decoder.close()
    assert decoder.bad_lines == 1 and len(objects) == 4
    out = _fold("ollama", objects)
    assert out.text == "It is 7 pm." and out.usage is not None and out.usage.input_tokens == 301
    assert out.prompt_ms is None, "a stream's prefill is the measured time to first chunk"
    assert out.timings["generation_ms"] == pytest.approx(1410.0)
    call = _fold("ollama", ollama_stream(tool=("get_time", {"tz": "UTC"})))
    assert [(c.name, c.arguments) for c in call.tool_calls] == [("get_time", {"tz": "UTC"})]


def test_responses_stream_complete_and_cut() -> None:
    out = _fold("openai-responses", _decoded(sse(responses_stream())))
    assert out.usage is not None and out.usage.input_tokens == 2006 and out.tool_calls[0].id == "call_R1"
    cut = _fold("openai-responses", [d for _n, d in responses_stream(complete=False)])
    assert (
        cut.usage is None
        and [c.id for c in cut.tool_calls] == ["call_R1"]
        and cut.thinking == "Need the time."
    )


# -- framing ---------------------------------------------------------------------------------------------------------


def test_sse_decoder_any_split_crlf_comments_multiline() -> None:
    body = b': keep-alive\r\nevent: a\r\ndata: one\r\ndata: two\r\n\r\nid: 7\ndata: {"x": 1}\n\ndata: tail'
    for cut in range(len(body) + 1):
        decoder = SSEDecoder()
        events = decoder.feed(body[:cut]) + decoder.feed(body[cut:]) + decoder.close()
        assert [(e.event, e.data, e.id) for e in events] == [
            ("a", "one\ntwo", None),
            ("message", '{"x": 1}', "7"),
            ("message", "tail", "7"),
        ], cut
    small = SSEDecoder(max_frame=10)
    assert small.feed(b"data: " + b"x" * 50 + b"\n\ndata: ok\n\n")[-1].data == "ok" and small.dropped == 1


# -- MCP ---------------------------------------------------------------------------------------------------------------


def test_mcp_handshake_initialize_and_discover() -> None:
    init = {
        "protocolVersion": "2025-11-25",
        "serverInfo": {"name": "everything", "version": "2.1.0"},
        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
    }
    shake = mcp.handshake(init)
    assert (shake.protocol_version, shake.server_name, shake.server_version) == (
        "2025-11-25",
        "everything",
        "2.1.0",
    )
    assert shake.capabilities == {"tools": {"listChanged": True}, "logging": {}}
    discover = {"_meta": {mcp.META_SERVER_INFO: {"name": "echo", "version": "1"}}, "capabilities": {}}
    asked = {"_meta": {mcp.META_PROTOCOL: "2026-07-28"}}
    assert mcp.handshake(discover, asked) == mcp.Handshake("2026-07-28", "echo", "1", {})
    typed = pytest.importorskip("mcp.types").InitializeResult.model_validate(init)
    assert mcp.handshake(typed) == shake


def test_mcp_results_errors_and_bytes() -> None:
    result = {"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "…"}], "isError": True}
    assert mcp.result_text(result) == "a\n[image content omitted]" and mcp.is_error(result)
    assert mcp.result_text({"content": [], "structuredContent": {"x": 1}}) == '{"x":1}'
    assert mcp.jsonrpc_failure(mcp.REQUEST_TIMEOUT) == (Status.TIMEOUT, "timeout")
    assert mcp.jsonrpc_failure(mcp.CONNECTION_CLOSED) == (Status.ERROR, "server_crashed")
    assert mcp.jsonrpc_failure(-32602) == (Status.ERROR, "mcp_error")
    msg = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "p2"}}
    assert mcp.message_bytes(msg, Transport.STDIO) == len(json.dumps(msg, separators=(",", ":"))) + 1
    assert mcp.message_bytes(msg, Transport.STREAMABLE_HTTP) == mcp.message_bytes(msg, Transport.STDIO) - 1  # type: ignore[operator]
    assert mcp.next_cursor(msg["result"]) == "p2" and mcp.tools_of(msg["result"]) == []


def test_anthropic_request_as_claude_code_sends_it() -> None:
    """The shapes Claude Code 2.1 sends (captured from the real CLI, texts shortened): a system block list with
    cache_control, a system message inside ``messages``, a <system-reminder> block before the prompt, deferred tools
    behind ToolSearch, and a tool search result that loads one of them through a ``tool_reference`` block."""
    deferred = {"type": "object", "properties": {}}
    body = {
        "model": "claude-opus-5-5",
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330;"},
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [
            {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}},
            {
                "name": "ToolSearch",
                "description": "Fetches deferred tools",
                "input_schema": {"type": "object"},
            },
            {
                "name": "DeferredToolPlaceholder",
                "description": "never call",
                "input_schema": deferred,
                "defer_loading": True,
            },
            {
                "name": "mcp__memory__read_graph",
                "description": "Read",
                "input_schema": deferred,
                "defer_loading": True,
            },
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\nAttribution…\n</system-reminder>\n"},
                    {"type": "text", "text": "Read the memory graph"},
                ],
            },
            {
                "role": "system",
                "content": [{"type": "text", "text": "# Environment\nmcp__memory__read_graph"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Searching."},
                    {
                        "type": "tool_use",
                        "id": "toolu_s",
                        "name": "ToolSearch",
                        "input": {"query": "select:x"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_s",
                        "content": [{"type": "tool_reference", "tool_name": "mcp__memory__read_graph"}],
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_x", "content": "denied", "is_error": True},
                    {"type": "text", "text": "Tool loaded.", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
    }
    req = anthropic.parse_request(body)
    assert keys(req) == [
        (Origin.SCHEMAS, "Bash"),
        (Origin.SCHEMAS, "ToolSearch"),
        (Origin.SCHEMAS, "mcp__memory__read_graph"),  # loaded by the tool_reference: now in the prompt
        (Origin.SYSTEM, "system"),
        (Origin.SYSTEM, "reminder:0"),
        (Origin.USER, "prompt"),
        (Origin.SYSTEM, "msg:1"),
        (Origin.HISTORY, "msg:2"),
        (Origin.TOOL_RESULTS, "toolu_s"),
        (Origin.TOOL_RESULTS, "toolu_x"),
        (Origin.HISTORY, "msg:3"),
    ]
    assert req.failed_results == ["toolu_x"]
    by_key = {p.key: p.text for p in req.pieces}
    assert by_key["prompt"] == "Read the memory graph"
    assert by_key["system"] == "x-anthropic-billing-header: cc_version=2.1.330;\nYou are Claude Code."
    assert by_key["toolu_s"] == "[tool_reference mcp__memory__read_graph]"
    assert [p.key for p in req.deferred] == ["DeferredToolPlaceholder"]  # sent, not in the prompt
    assert req.deferred_tools == ["DeferredToolPlaceholder", "mcp__memory__read_graph"]
    assert req.loaded == ["mcp__memory__read_graph"] and req.tool_search == ["ToolSearch"]
    assert anthropic.is_tool_search(
        {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    )
    # the first call, before any tool search: both deferred tools are outside the prompt
    first = anthropic.parse_request({**body, "messages": body["messages"][:2]})
    assert [p.key for p in first.deferred] == ["DeferredToolPlaceholder", "mcp__memory__read_graph"]
    assert first.loaded == [] and (Origin.SCHEMAS, "mcp__memory__read_graph") not in keys(first)


def test_arguments_digest_ignores_key_order_and_text_form() -> None:
    a = wire.arguments_digest({"b": 1, "a": [1, {"y": 2, "x": 1}]})
    assert a == wire.arguments_digest('{"a": [1, {"x": 1, "y": 2}], "b": 1}')
    assert a != wire.arguments_digest({"b": 2, "a": [1, {"y": 2, "x": 1}]})
    assert wire.arguments_digest({}) == wire.arguments_digest(None) == wire.arguments_digest("")
