"""OTLP spans → events (collectors/otlp_spans.py) and the runs they land in (collectors/otlp_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import promcp.analysis as pa
from promcp import tokenizers
from promcp.collectors.otlp_runs import OtlpRuns, RecentKeys, SeqRanges, run_key
from promcp.collectors.otlp_spans import CarriedRows, SpanMapper, SpanRecord, carried_rows
from promcp.errors import ImportFormatError
from promcp.events import Event, Origin, Part, Stage, Topology, encode_events

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def _span(
    name: str, attrs: dict[str, Any], *, kind: int = 3, sid: str = "01", ms: float = 4.0, **kw: Any
) -> SpanRecord:
    start = kw.pop("start", T0)
    return SpanRecord(
        name=name,
        kind=kind,
        trace_id="ab" * 16,
        span_id=sid * 8,
        parent_span_id=None,
        start_ns=start,
        end_ns=start + int(ms * 1e6),
        attrs=attrs,
        resource=kw.pop("resource", {"service.name": "svc", "host.name": "h"}),
        **kw,
    )


def _mapper() -> SpanMapper:
    return SpanMapper(tokenizers.get("o200k_base"))


def test_a_promcp_enriched_tools_call_keeps_its_counts() -> None:
    attrs = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "add", "promcp.server": "calc",
             "promcp.transport": "stdio", "promcp.request.tokens": 9, "promcp.footprint.tokens": 41,
             "promcp.request.bytes": 120, "promcp.response.bytes": 300, "promcp.tokenizer": "o200k_base"}  # fmt: skip
    s3, s4 = _mapper().events(_span("MCP send tools/call add", attrs, ms=2.5))
    assert (s3.stage, s3.footprint_tokens, s3.footprint_bytes, s3.latency_ms) == (Stage.S3, 9, 120, 0.0)
    assert (s4.footprint_tokens, s4.footprint_bytes, s4.latency_ms) == (41, 300, 2.5)
    assert (s4.server, s4.transport, s4.tokenizer, s4.token_source.value) == (
        "calc",
        "stdio",
        "o200k_base",
        "tokenizer",
    )
    assert s4.task_id == s4.trace_id == "ab" * 16 and s4.span_id == "01" * 8


def test_a_tool_error_is_an_error_result_not_a_failed_call() -> None:
    (s3, s4) = _mapper().events(
        _span("MCP send tools/call x", {"mcp.method.name": "tools/call", "error.type": "tool_error"})
    )
    assert (s3.status.value, s4.status.value, s4.error_type) == ("ok", "error", "tool_error")
    assert s4.footprint_tokens is None and s4.token_source.value == "none"


def test_handshake_listing_and_other_methods() -> None:
    m = _mapper()
    (init,) = m.events(
        _span("MCP send initialize", {"mcp.method.name": "initialize", "mcp.protocol.version": "2025-11-25"})
    )
    assert (init.stage, init.phase.value, init.protocol_version) == (Stage.INIT, "initialize", "2025-11-25")
    listing = {"mcp.method.name": "tools/list", "promcp.footprint.tokens": 800, "promcp.n_tools": 5,
               "promcp.footprint.bytes": 3000, "promcp.tokenizer": "o200k_base"}  # fmt: skip
    (tools,) = m.events(_span("MCP send tools/list", listing, sid="02"))
    assert (tools.phase.value, tools.footprint_tokens, tools.footprint_bytes) == (
        "tools_discovery",
        800,
        3000,
    )
    assert tools.attrs is not None and tools.attrs["n_tools"] == 5
    (ping,) = m.events(_span("MCP send ping", {"mcp.method.name": "ping"}, sid="03"))
    assert (ping.stage, ping.mcp_method) == (Stage.MCP, "ping")


def test_chat_spans_number_their_calls_per_trace_once() -> None:
    m = _mapper()
    first = _span("chat", {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 50,
                           "gen_ai.usage.output_tokens": 7, "gen_ai.response.finish_reasons": ["tool_calls"]})  # fmt: skip
    second = _span("chat", {"gen_ai.operation.name": "chat"}, sid="02", start=T0 + 10**7)
    s1, s2 = m.events(first)
    s5, s6 = m.events(second)
    assert [e.stage for e in (s1, s2, s5, s6)] == [Stage.S1, Stage.S2, Stage.S5, Stage.S6]
    assert (s1.tokens_in, s1.in_system, s2.tokens_out) == (50, 50, 7)
    assert s5.tokens_in is None and s5.token_source.value == "none" and s6.tokens_out is None
    assert [e.stage for e in m.events(first)] == [Stage.S1, Stage.S2]  # a retry numbers it the same


def test_server_spans_and_promcp_senders_are_not_mapped() -> None:
    m = _mapper()
    assert m.events(_span("MCP handle tools/call", {"mcp.method.name": "tools/call"}, kind=2)) == []
    own = _span("MCP send tools/call", {"mcp.method.name": "tools/call"}, resource={"promcp.run.id": "r1"})
    assert m.events(own) == []
    assert m.unmapped == {"server span": 1, "promcp span (rows carried)": 1}


def _rows(run: str, seqs: range) -> list[Event]:
    return [
        Event(
            stage=Stage.S1,
            seq=i,
            run_id=run,
            topology=Topology.C_CUST,
            source="instrument",
            task_id="t",
            t_start_ns=T0 + i,
            parts=[Part(Origin.USER, "prompt", 10 + i)],
        )
        for i in seqs
    ]


def test_carried_rows_decode_and_bad_ones_are_named() -> None:
    rows = _rows("r1", range(3))
    span = _span(
        "x", {"promcp.events": encode_events(rows).decode(), "promcp.run": json.dumps({"run_id": "r1"})}
    )
    carried = carried_rows(span)
    assert carried is not None and carried.rows == rows
    with pytest.raises(
        ImportFormatError, match=r"span 0101010101010101 \('x'\): promcp.events does not decode"
    ):
        carried_rows(_span("x", {"promcp.events": encode_events(rows).decode()[:-9]}))
    mixed = _rows("r1", range(1)) + _rows("r2", range(1, 2))
    with pytest.raises(ImportFormatError, match="several runs"):
        carried_rows(_span("x", {"promcp.events": encode_events(mixed).decode()}))


def test_carried_rows_are_deduplicated_and_a_rotated_run_continues_as_a_part(tmp_path: Path) -> None:
    runs = OtlpRuns(tmp_path)
    header = {
        "run_id": "r1",
        "topology": "c-cust",
        "source": "instrument",
        "meta": {"tokenizer": "o200k_base"},
    }
    assert runs.carried(CarriedRows(header, _rows("r1", range(3)))) == 3
    assert runs.carried(CarriedRows(header, _rows("r1", range(3)))) == 0  # an exporter's retry
    assert len(runs.close()) == 1  # a rotation
    later = OtlpRuns(tmp_path)  # (or the next collector): the finalized rows are known
    assert later.carried(CarriedRows(header, _rows("r1", range(2, 5)))) == 2
    later.close()
    df = pa.load(tmp_path)
    assert df["run_id"].unique().tolist() == ["r1"] and df["tokens_in"].tolist() == [10, 11, 12, 13, 14]
    assert later.duplicates == 1


def test_run_keys_name_the_sender_and_day() -> None:
    resource = {"service.name": "claude code", "host.name": "dev/box"}
    assert run_key("logs", resource, T0) == "otlp-logs-claude-code-dev-box-20260101"
    assert run_key("spans", {}, None) == "otlp-spans-unknown-service-unknown-host-undated"


def test_seq_ranges_are_exact_and_stay_small() -> None:
    ranges = SeqRanges()
    ranges.update(range(0, 100_000))
    ranges.update([100_005, 100_003, 100_004, 100_001])
    assert (ranges.starts, ranges.ends) == ([0, 100_001, 100_003], [100_000, 100_002, 100_006])
    ranges.add(100_000)
    ranges.add(100_002)  # closes both gaps
    assert (ranges.starts, ranges.ends) == ([0], [100_006])
    assert 100_005 in ranges and 100_006 not in ranges and -1 not in ranges and "7" not in ranges


def test_recent_keys_forget_the_oldest_past_their_limit() -> None:
    keys = RecentKeys(limit=3)
    keys.update([("a", "S3"), ("b", "S3"), ("c", "S3"), ("d", "S3")])
    assert ("a", "S3") not in keys and ("d", "S3") in keys and ("b", "S3") in keys
