"""promcp.stages: each stage rule from plain measurements, with the fake clock (no sleeps): the LLM call's origin
split, provider scaling and prefill/generation split, failures and context overflow; a tools/call's S3/S4 with wire
bytes, forwarded footprint and every error kind; the INIT phases; the S2 → S3 join."""

from __future__ import annotations

import pytest

from promcp import tokenizers, wire
from promcp.events import Origin, Part, Phase, Stage, Status, TimingQuality, TokenSource, Transport
from promcp.stages import (
    Failure,
    FakeClock,
    LLMCall,
    ToolCallJoin,
    ToolsCall,
    context_overflow_event,
    initialize_event,
    llm_call_events,
    startup_event,
    tool_request_event,
    tool_result_event,
    tools_discovery_event,
)
from promcp.stages.clock import Instant
from promcp.wire import mcp

TOK = tokenizers.get("o200k_base")
PIECES = [
    wire.Piece(Origin.SYSTEM, "system", "You are terse."),
    wire.Piece(Origin.SCHEMAS, "get_time", mcp.tool_text("get_time", "Time in a zone", {"type": "object"})),
    wire.Piece(Origin.USER, "prompt", "What time is it in Tokyo?"),
]


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock()
    a = clock.now()
    assert clock.now() == a
    clock.advance(2.5)
    b = clock.now()
    assert a.ms_to(b) == 2.5 and b.wall_ns - a.wall_ns == 2_500_000
    stepping = FakeClock(step_ms=1.0)
    assert stepping.now().ms_to(stepping.now()) == 1.0 and stepping.readings == 2
    assert clock.at_mono(b.mono_ns - 1_000_000) == b.plus_ms(-1.0)


def _call(clock: FakeClock, **kw: object) -> LLMCall:
    start = clock.now()
    clock.advance(100)
    return LLMCall(
        provider="anthropic",
        model="claude-x",
        round=1,
        start=start,
        end=clock.now(),
        tokenizer=TOK,
        **kw,  # type: ignore[arg-type]
    )


def test_llm_call_provider_usage_is_ground_truth_and_prefill_is_clamped() -> None:
    clock = FakeClock()
    captured: dict[str, str] = {}

    def put(kind: str, text: str) -> str:
        captured[kind] = text
        return f"h-{kind}"

    usage = wire.Usage(
        input_tokens=1000, output_tokens=7, cache_read_tokens=900, cache_write_tokens=50, reported={"x": 1}
    )
    out = wire.Output(
        text="It is 19:00.", usage=usage, model="claude-x-2025", response_id="msg_1", prompt_ms=250.0
    )
    call = _call(clock, pieces=PIECES, schema_keys={"get_time": "time/get_time"}, output=out, put_text=put)
    s1, s6 = llm_call_events(call)
    local = sum(TOK.count(p.text) for p in PIECES)
    assert (s1.stage, s6.stage, s1.round, s6.round) == (Stage.S1, Stage.S6, 1, 1)
    assert s1.tokens_in == 1000 and s1.token_source is TokenSource.PROVIDER
    assert [(p.origin, p.key) for p in s1.parts or []] == [
        (Origin.SYSTEM, "system"),
        (Origin.SCHEMAS, "time/get_time"),
        (Origin.USER, "prompt"),
    ]
    assert s1.attrs is not None and s1.attrs["tokens_in_estimate"] == local
    assert s1.attrs["origin_scale"] == round(1000 / local, 6) and s1.attrs["usage"] == {"x": 1}
    assert (s1.cache_read_tokens, s1.cache_write_tokens) == (900, 50) and "cache_read_tokens" not in s1.attrs
    assert s1.attrs["content"] == "h-prompt" and captured["prompt"] == "What time is it in Tokyo?"
    # the prefill (the server's 250 ms) exceeds the measured 100 ms call: clamped, output gets the rest (0)
    assert s1.latency_ms == 100.0 and s1.timing_quality is TimingQuality.EXACT and s6.latency_ms == 0.0
    assert s1.t_end_ns == s6.t_start_ns == call.end.wall_ns
    assert s6.tokens_out == 7 and s6.attrs is not None and s6.attrs["content"] == "h-answer"
    assert s6.attrs["response_model"] == "claude-x-2025" and s6.attrs["response_id"] == "msg_1"


def test_llm_call_split_counted_output_and_later_rounds() -> None:
    clock = FakeClock()
    calls = [
        wire.ToolCall("c1", "get_time", {"tz": "UTC"}, '{"tz":"UTC"}'),
        wire.ToolCall("c2", "get_time", {}, "{bad"),
    ]
    out = wire.Output(tool_calls=calls, finish_reason="tool_calls")
    call = _call(clock, pieces=PIECES, output=out, prompt_ms=30.0)
    call.round = 3
    s5, s2 = llm_call_events(call)
    assert (s5.stage, s2.stage) == (Stage.S5, Stage.S2)
    assert s5.token_source is TokenSource.TOKENIZER and s5.tokens_in == sum(TOK.count(p.text) for p in PIECES)
    assert s5.latency_ms == 30.0 and s2.latency_ms == 70.0 and s5.latency_ms + s2.latency_ms == 100.0
    assert s2.t_start_ns == call.start.wall_ns + 30_000_000
    assert (s2.tool_call_id, s2.tool) == ("c1", "get_time") and s2.attrs is not None
    assert s2.attrs["tool_call_ids"] == ["c1", "c2"]
    assert (
        s2.resp_preview
        == '[{"name": "get_time", "arguments": {"tz": "UTC"}}, {"name": "get_time", "arguments": "{bad"}]'
    )
    assert s2.tokens_out == TOK.count(s2.resp_preview) and s2.token_source is TokenSource.TOKENIZER
    no_split = _call(clock, pieces=PIECES, output=wire.Output(text="x"))
    s1, s6 = llm_call_events(no_split)
    assert s1.latency_ms is None and s1.timing_quality is TimingQuality.NONE and s6.latency_ms == 100.0


def test_llm_failure_is_one_input_event_and_overflow_is_never_sent() -> None:
    clock = FakeClock()
    failed = _call(clock, pieces=PIECES, failure=Failure.of("rate_limit", "HTTP 429: slow down", attempts=4))
    (s1,) = llm_call_events(failed)
    assert s1.status is Status.ERROR and s1.error_type == "rate_limit" and s1.tokens_in is None
    assert s1.latency_ms == 100.0 and s1.resp_preview == "HTTP 429: slow down"
    assert s1.attrs is not None and s1.attrs["attempts"] == 4 and s1.attrs["tokens_in_estimate"] > 0
    assert Failure.of("timeout").status is Status.TIMEOUT
    parts = [Part(Origin.SYSTEM, "system", 60), Part(Origin.USER, "prompt", 40)]
    tight = _call(clock, parts=parts, context_window=100, n_tools=0)
    overflow = context_overflow_event(tight)
    assert overflow is not None and overflow.status is Status.CONTEXT_OVERFLOW and overflow.tokens_in == 100
    assert overflow.attrs == {"n_tools": 0, "overflow_by": 0} and overflow.latency_ms is None
    tight.context_window = 101
    assert context_overflow_event(tight) is None


def test_tools_call_sent_received_and_bytes() -> None:
    clock = FakeClock()
    start = clock.now()
    clock.advance(0.5)
    sent = clock.now()
    clock.advance(20)
    received = clock.now()
    clock.advance(1)
    result = {"content": [{"type": "text", "text": "19:00"}], "_meta": {"traceparent": "00-x"}}
    call = ToolsCall(
        tool="get_time",
        start=start,
        sent=sent,
        received=received,
        end=clock.now(),
        tokenizer=TOK,
        server="time",
        transport=Transport.STDIO,
        tool_call_id="c1",
        jsonrpc_id="3",
        protocol_version="2025-11-25",
        arguments={"tz": "Asia/Tokyo"},
        request_bytes=120,
        result=result,
        response_bytes=95,
        put_text=lambda kind, text: f"{kind}:{text}",
    )
    s3, s4 = tool_request_event(call), tool_result_event(call)
    assert s4 is not None
    assert (s3.latency_ms, s4.latency_ms) == (0.5, 20.0), (
        "S4 ends when the response arrived, not after parsing"
    )
    assert s3.footprint_tokens == TOK.count('{"tz":"Asia/Tokyo"}') and s3.footprint_bytes == 120
    assert s4.footprint_tokens == TOK.count("19:00") and s4.footprint_bytes == 95
    assert s4.attrs == {"content": "result:19:00"} and s4.resp_preview == "19:00"
    for ev in (s3, s4):
        assert (ev.protocol_version, ev.jsonrpc_id, ev.tool_call_id, ev.server) == (
            "2025-11-25",
            "3",
            "c1",
            "time",
        )
    call.result = {**result, "isError": True}
    s4e = tool_result_event(call)
    assert s4e is not None and (s4e.status, s4e.error_type) == (Status.ERROR, "tool_error")
    assert s4e.attrs is not None and s4e.attrs["is_error"] is True


def test_tools_call_failures_and_never_sent() -> None:
    clock = FakeClock()
    start = clock.now()
    crash = ToolsCall(
        tool="t",
        start=start,
        sent=start,
        end=start.plus_ms(5),
        tokenizer=TOK,
        failure=Failure(Status.ERROR, "server_crashed", "Connection closed", {"jsonrpc_code": -32000}),
    )
    s4 = tool_result_event(crash)
    assert s4 is not None and s4.latency_ms == 5.0 and s4.footprint_tokens is None
    assert (s4.error_type, s4.resp_preview, s4.attrs) == (
        "server_crashed",
        "Connection closed",
        {"jsonrpc_code": -32000},
    )
    crash.forwarded_text = "Error: the server closed the connection"
    s4 = tool_result_event(crash)
    assert s4 is not None and s4.footprint_tokens == TOK.count(crash.forwarded_text)
    invalid = ToolsCall(
        tool="t",
        start=start,
        end=start,
        tokenizer=TOK,
        arguments={"x": 1},
        failure=Failure.of("invalid_arguments", "bad"),
        attrs={"sent": False},
    )
    s3 = tool_request_event(invalid)
    assert tool_result_event(invalid) is None
    assert (s3.status, s3.error_type, s3.timing_quality, s3.latency_ms) == (
        Status.ERROR,
        "invalid_arguments",
        TimingQuality.NONE,
        None,
    )
    assert s3.footprint_bytes == len(b'{"x":1}') and s3.attrs == {"sent": False}


def test_init_phases() -> None:
    clock = FakeClock()
    t0 = clock.now()
    clock.advance(12)
    t1 = clock.now()
    spawn = startup_event(
        phase=Phase.SPAWN, server="s", transport=Transport.STDIO, start=t0, end=t1, attrs={"pid": 7}
    )
    assert (spawn.latency_ms, spawn.attrs, spawn.status) == (12.0, {"pid": 7}, Status.OK)
    failed = startup_event(
        phase=Phase.READY,
        server="s",
        transport=Transport.SSE,
        start=t0,
        end=t1,
        failure=Failure.of("startup_timeout", "no port"),
    )
    assert (failed.status, failed.resp_preview) == (Status.TIMEOUT, "no port")
    shake = mcp.handshake(
        {
            "protocolVersion": "2025-11-25",
            "serverInfo": {"name": "n", "version": "1"},
            "capabilities": {"tools": {}},
        }
    )
    init = initialize_event(
        server="s",
        transport=Transport.STDIO,
        start=t0,
        end=t1,
        handshake=shake,
        jsonrpc_id="0",
        request_bytes=200,
        response_bytes=300,
    )
    assert (
        init.protocol_version == "2025-11-25"
        and init.footprint_bytes == 300
        and init.mcp_method == "initialize"
    )
    assert init.attrs == {
        "server_name": "n",
        "server_version": "1",
        "capabilities": {"tools": {}},
        "request_bytes": 200,
    }
    tools = [mcp.tool_text_of({"name": "a", "description": "A", "inputSchema": {"type": "object"}})]
    disc = tools_discovery_event(
        server="s",
        transport=Transport.STDIO,
        start=t0,
        end=t1,
        tools=tools,
        tokenizer=TOK,
        cursor="p1",
        next_cursor="p2",
        response_bytes=180,
    )
    assert disc.footprint_tokens == TOK.count(tools[0][1]) and disc.footprint_bytes == len(
        tools[0][1].encode()
    )
    assert (
        disc.attrs is not None
        and disc.attrs["n_tools"] == 1
        and (disc.attrs["cursor"], disc.attrs["next_cursor"]) == ("p1", "p2")
    )
    assert disc.attrs["response_bytes"] == 180 and disc.tokenizer == "o200k_base"


def test_join_oldest_first_canonical_arguments_bounded() -> None:
    join = ToolCallJoin(max_pending=3)
    join.add("t", '{"b": 1, "a": [1, 2]}', "id1")  # the model's JSON text, keys in any order
    join.add("t", {"a": [1, 2], "b": 1}, "id2")
    assert join.take("other", {"a": [1, 2], "b": 1}) is None
    assert join.take("t", {"b": 1, "a": [1, 2]}) == "id1" and join.take("t", {"a": [1, 2], "b": 1}) == "id2"
    assert join.take("t", {"a": [1, 2], "b": 1}) is None and join.names == {}
    for i in range(5):
        join.add("n", {"i": i}, f"c{i}")
    assert len(join.calls) == 3 and join.take("n", {"i": 0}) is None and join.take("n", {"i": 4}) == "c4"
    join.note_tools("time", ["get_time"])
    assert join.schema_keys() == {"get_time": "time/get_time"}


@pytest.mark.parametrize("error_type", ["tool_timeout", "timeout"])
def test_failure_status_from_type(error_type: str) -> None:
    assert Failure.of(error_type).status is Status.TIMEOUT


def test_s3_is_built_when_the_derived_wall_clock_of_sent_lands_before_start() -> None:
    """``sent`` derived from the monotonic clock (``Clock.at_mono``) can read a few µs before ``start`` on the wall
    clock under load: S3 still ends at or after its start (its event was lost: record under SIGTERM, issue 23)."""
    start = Instant(wall_ns=1_795_752_559_645_685_162, mono_ns=23_695_476_832_168)
    sent = Instant(
        wall_ns=1_795_752_559_645_684_300, mono_ns=23_695_476_835_002
    )  # as measured in the lost run
    call = ToolsCall(tool="echo", start=start, sent=sent, end=sent, tokenizer=TOK, arguments={"message": "x"})
    s3 = tool_request_event(call)
    assert s3.t_start_ns == s3.t_end_ns == start.wall_ns
    assert s3.latency_ms == pytest.approx(0.002834) and s3.timing_quality == TimingQuality.EXACT
