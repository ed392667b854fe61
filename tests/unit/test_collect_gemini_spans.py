"""The Gemini CLI's telemetry spans (collectors/otlp_gemini.py), in the shape 0.61.0 sends them (captured from the
real CLI: tests/integration/test_record_gemini.py runs it): logs win every figure, an ``llm_call`` span adds its
system instruction and function declarations; a session without logs is built from its spans when they carry
usage, never with invented counts; spans are held bounded."""

from __future__ import annotations

import json
from typing import Any

from promcp import tokenizers
from promcp.collectors._build import Builder
from promcp.collectors.otlp import LogRecord
from promcp.collectors.otlp_gemini import SPAN_GRACE_S, GeminiCliSessions, is_gemini_span
from promcp.collectors.otlp_spans import SpanRecord
from promcp.events import Event

SESSION = "340d2ff7-a2b6-4afb-ba39-fcbe378dea41"
RESOURCE = {"service.name": "gemini-cli", "session.id": SESSION, "host.name": "vm"}
SYSTEM = "You are Gemini CLI, an autonomous CLI agent specializing in software engineering tasks. " * 20
DECLARATIONS = [
    {
        "functionDeclarations": [
            {
                "name": "read_file",
                "description": "Reads a file.",
                "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
            {
                "name": "mcp_everything_echo",
                "description": "Echoes back the input string",
                "parametersJsonSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
            },
        ]
    }
]
MS = 1_000_000
T0 = 1_795_740_623_000 * MS


def log(name: str, at_ms: int, prompt: str = SESSION, **attrs: Any) -> LogRecord:
    return LogRecord(
        f"gemini_cli.{name}", {"session.id": SESSION, "prompt_id": prompt, **attrs}, T0 + at_ms * MS, RESOURCE
    )


def api_response(at_ms: int, duration: int, tokens_in: int, prompt: str = SESSION, **more: Any) -> LogRecord:
    return log(
        "api_response",
        at_ms,
        prompt,
        role="main",
        model="gemini-3.8-flash",
        duration_ms=duration,
        input_token_count=tokens_in,
        output_token_count=13,
        cached_content_token_count=0,
        thoughts_token_count=7,
        **more,
    )


def llm_span(
    start_ms: int, end_ms: int, prompt: str = SESSION, *, tools: Any = None, **more: Any
) -> SpanRecord:
    attrs = {
        "gen_ai.request.model": "gemini-3.8-flash",
        "gen_ai.prompt.name": prompt,
        "gen_ai.system_instructions": json.dumps(SYSTEM),
        "gen_ai.tool.definitions": json.dumps(DECLARATIONS if tools is None else tools),
        "gen_ai.conversation.id": SESSION,
        "gen_ai.operation.name": "llm_call",
        "gen_ai.agent.name": "gemini-cli",
        **more,
    }
    return SpanRecord(
        "llm_call",
        1,
        "ab" * 16,
        f"{start_ms:016x}",
        None,
        T0 + start_ms * MS,
        T0 + end_ms * MS,
        attrs,
        RESOURCE,
    )


def tool_span(start_ms: int, end_ms: int) -> SpanRecord:
    attrs = {
        "gen_ai.tool.name": "mcp_everything_echo",
        "gen_ai.tool.call_id": "mcp_everything_echo_1795740623789_0",
        "gen_ai.conversation.id": SESSION,
        "gen_ai.operation.name": "tool_call",
        "gen_ai.agent.name": "gemini-cli",
        "gen_ai.input.messages": json.dumps(
            {"callId": "x", "name": "mcp_everything_echo", "args": {"message": "hi"}}
        ),
    }
    return SpanRecord(
        "tool_call",
        1,
        "cd" * 16,
        f"{start_ms:016x}",
        "ee" * 8,
        T0 + start_ms * MS,
        T0 + end_ms * MS,
        attrs,
        RESOURCE,
    )


def session_logs() -> list[LogRecord]:
    return [
        log("user_prompt", 0, prompt_length=30),
        api_response(400, 240, 14560),
        log(
            "tool_call",
            480,
            function_name="mcp_everything_echo",
            function_args='{"message":"hi"}',
            duration_ms=60,
            success=True,
            tool_type="mcp",
            mcp_server_name="everything",
        ),
        api_response(520, 25, 14673),
    ]


def session_spans(**usage: Any) -> list[SpanRecord]:
    first = {"gen_ai.usage.input_tokens": 14560, "gen_ai.usage.output_tokens": 13} if usage else {}
    second = {"gen_ai.usage.input_tokens": 14673, "gen_ai.usage.output_tokens": 27} if usage else {}
    return [
        llm_span(50, 110, tools=[]),  # the model-routing side call: no declarations
        llm_span(160, 401, **first),
        tool_span(421, 478),
        llm_span(494, 521, **second),
    ]


def events(convs: list[Any]) -> list[Event]:
    builder = Builder(tokenizers.get("o200k_base"), provider="google")
    return [e for c in convs for e in builder.events(c)]


def parts(event: Event) -> dict[str, tuple[str, int]]:
    return {p.key: (p.origin.value, p.tokens) for p in event.parts or ()}


def test_logs_win_and_spans_add_the_declarations_whatever_arrives_first() -> None:
    tok = tokenizers.get("o200k_base")
    results = []
    for spans_first in (False, True):
        g = GeminiCliSessions()
        done = []
        feed: list[Any] = [*session_spans(usage=True), *session_logs()]
        if not spans_first:
            feed = [*session_logs(), *session_spans(usage=True)]
        for item in feed:
            done += g.add_span(item) if isinstance(item, SpanRecord) else g.add(item)
        done += g.flush()
        evs = events(done)
        assert [e.stage.value for e in evs] == ["S1", "S2", "S3", "S4", "S5", "S6"]  # once, not twice
        s1, s5 = evs[0], evs[4]
        assert (s1.tokens_in, s5.tokens_in) == (14560, 14673)  # the logs' figures, not the spans'
        assert evs[5].tokens_out == 13 + 7  # output + thoughts (the span's 27 counts no thoughts)
        got = parts(s1)
        assert got["system_instruction"] == ("system", tok.count(SYSTEM))
        assert got["everything/echo"][0] == "schemas" and got["read_file"][0] == "schemas"
        assert sum(p.tokens for p in s1.parts or ()) == 14560  # the rest stays unobserved
        assert got["unobserved"][1] == 14560 - sum(t for k, (_o, t) in got.items() if k != "unobserved")
        assert s1.attrs is not None and s1.attrs["schemas_observable"] is True
        assert g.unmapped == {"gemini-cli span (the logs give it)": 2}  # the routing call and the tool run
        assert g.n_held == 0
        results.append([(e.stage, e.tokens_in, e.tokens_out, e.in_schemas, e.in_system) for e in evs])
    assert results[0] == results[1]


def test_a_session_without_logs_is_built_from_its_spans_only_with_usage() -> None:
    g = GeminiCliSessions()
    for span in session_spans(usage=True):
        assert g.add_span(span, now_ns=T0) == []
    [conv] = g.idle(T0 + 10_000 * MS, 0.0)  # quiet: resolved
    evs = events([conv])
    assert [e.stage.value for e in evs] == ["S1", "S2", "S3", "S4", "S5", "S6"]
    assert (evs[0].tokens_in, evs[1].tokens_out, evs[4].tokens_in, evs[5].tokens_out) == (
        14560,
        13,
        14673,
        27,
    )
    assert evs[1].latency_ms == 241.0 and evs[1].timing_quality.value == "exact"
    s3, s4 = evs[2], evs[3]
    assert (s3.server, s3.tool, s4.latency_ms, s3.req_preview) == (
        "everything",
        "echo",
        57.0,
        '{"message":"hi"}',
    )
    assert conv.tasks[0].attrs["side_calls"] == 1 and conv.tasks[0].attrs["from_spans"] is True

    g = GeminiCliSessions()  # the default telemetry: no usage on the spans, and no logs
    for span in session_spans():
        g.add_span(span)
    assert g.flush() == []  # nothing invented
    assert g.unmapped == {
        "gemini-cli span without usage or logs": 3,
        "gemini-cli tool_call without its llm_call": 1,
    }


def test_the_next_prompt_waits_for_the_spans_of_the_last() -> None:
    g = GeminiCliSessions()
    g.add_span(llm_span(0, 1, prompt="other"), now_ns=T0)  # this collector receives spans
    for rec in session_logs():
        assert g.add(rec, now_ns=T0) == []
    # the next prompt arrives before the last prompt's spans: it waits for them (up to SPAN_GRACE_S)
    assert g.add(log("user_prompt", 600, prompt=f"{SESSION}########2"), now_ns=T0) == []
    assert g.idle(T0 + 700 * MS, 30.0) == []
    for span in session_spans():
        g.add_span(span, now_ns=T0)
    [conv] = [c for c in g.idle(T0 + 800 * MS, 30.0) if c.id.endswith(SESSION)]
    assert "everything/echo" in parts(events([conv])[0])

    # spans that never come: recorded without them once the grace has passed
    g = GeminiCliSessions()
    g.add_span(llm_span(0, 1, prompt="other"), now_ns=T0)
    for rec in session_logs():
        g.add(rec, now_ns=T0)
    g.add(log("user_prompt", 600, prompt=f"{SESSION}########2"), now_ns=T0)
    assert g.idle(T0 + int(SPAN_GRACE_S * 1e9) - MS, 30.0) == []
    [conv] = g.idle(T0 + int(SPAN_GRACE_S * 1e9) + MS, 30.0)
    assert "unobserved" in parts(events([conv])[0]) and "everything/echo" not in parts(events([conv])[0])


def test_held_spans_are_bounded_and_bad_attributes_are_kept_out() -> None:
    g = GeminiCliSessions(max_spans=3)
    for i in range(10):
        g.add_span(llm_span(i * 10, i * 10 + 5, prompt=f"p{i}"))
    assert g.n_held <= 3 and g.n_held + sum(g.unmapped.values()) == 10  # each held, or left out and counted
    g = GeminiCliSessions()
    bad = llm_span(0, 5, **{"gen_ai.tool.definitions": "[{not json", "gen_ai.system_instructions": 7})
    g.add_span(bad)
    assert g.held[SESSION].spans[0].pieces == ()  # nothing readable: no texts, no error
    assert is_gemini_span(bad) and not is_gemini_span(
        SpanRecord("chat", 3, "ab" * 16, "01" * 8, None, 0, 1, {"gen_ai.operation.name": "chat"}, {})
    )
