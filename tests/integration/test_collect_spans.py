"""``promcp collect`` on traces: promcp.instrument() exporting with the real OTLP/HTTP span exporter to the receiver
on loopback (a real MCP session with promcp's echo server, the real OpenAI SDK against a stub), plain OpenTelemetry
SDK spans of other instrumentations, a Collector file export imported twice, and bad span input."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pandas as pd
import pyarrow.parquet as pq
import pytest
from google.protobuf import json_format
from mcp import ClientSession, StdioServerParameters, stdio_client
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import promcp
import promcp.analysis as pa
from promcp.collect import Collector
from tests.stubs.llm_http import Reply, StubServer, openai_text, openai_tool_call

ECHO = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])
TOOL = {
    "type": "function",
    "function": {"name": "echo", "description": "Echo.", "parameters": {"type": "object"}},
}


def _table(path: Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas().sort_values("seq").reset_index(drop=True)


def _exporter(protocol: str, col: Collector) -> Any:
    """The real OTLP span exporter of ``protocol`` pointed at the collector."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

        return GrpcSpanExporter(endpoint=f"127.0.0.1:{col.grpc_port}", insecure=True)
    return OTLPSpanExporter(endpoint="http://{}:{}/v1/traces".format(*col.address))


@pytest.mark.servers
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_instrument_to_collect_round_trip_equals_the_local_run(tmp_path: Path, protocol: str) -> None:
    openai = pytest.importorskip("openai")
    col = Collector(tmp_path / "collected", port=0, grpc=("127.0.0.1", 0)).start()
    replies = [
        Reply(200, openai_tool_call("echo", '{"text": "round trip"}', call_id="call_rt")),
        Reply(200, openai_text("It said round trip.")),
    ]

    async def host(base_url: str) -> None:
        llm = openai.AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        async with stdio_client(ECHO) as (r, w), ClientSession(r, w) as mcp:
            await mcp.initialize()
            await mcp.list_tools()
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Echo 'round trip'."}]
            first = await llm.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[TOOL])
            call = first.choices[0].message.tool_calls[0]
            result = await mcp.call_tool("echo", json.loads(call.function.arguments))
            await mcp.call_tool("no_such_tool", {})  # an error travels too
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": result.content[0].text},
            ]
            await llm.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[TOOL])

    try:
        with StubServer(replies, wire="openai") as stub:
            promcp.instrument(
                out=tmp_path / "local", topology="c-cust", span_exporter=_exporter(protocol, col)
            )
            try:
                asyncio.run(host(stub.url + "/v1"))
            finally:
                local_path = promcp.uninstrument()
    finally:
        stats = col.stop()
    assert local_path is not None and stats.rejected == {} and stats.problems == 0
    assert stats.requests.get("traces", 0) >= 1
    local = _table(local_path)
    collected_runs = pa.load(tmp_path / "collected")["run_id"].unique().tolist()
    assert collected_runs == [local["run_id"][0]]  # the rows went back into their own run, nothing else
    collected = _table(next((tmp_path / "collected").glob("topology=c-cust/run_id=*/events.parquet")))
    assert len(local) >= 12 and {"S1", "S2", "S3", "S4", "S5", "S6", "INIT"} <= set(local["stage"])
    pd.testing.assert_frame_equal(collected, local)  # column for column: ids, tokens, latencies, origins
    assert stats.events == len(local)


def _foreign_request() -> Any:
    """Spans another instrumentation made: the mcp SDK's MCP CLIENT spans, a server span, GenAI chat spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-x", "host.name": "box1"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("other")
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                              "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1200,
                              "gen_ai.usage.output_tokens": 30, "gen_ai.usage.cache_read.input_tokens": 1024,
                              "gen_ai.response.finish_reasons": ["tool_calls"], "gen_ai.tool.call.id": "c1"})  # fmt: skip
        with tracer.start_as_current_span("MCP send tools/call lookup", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"mcp.method.name": "tools/call", "jsonrpc.request.id": "7",
                              "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "c1",
                              "mcp.protocol.version": "2025-11-25"})  # fmt: skip
        with tracer.start_as_current_span("MCP handle tools/call lookup", kind=SpanKind.SERVER) as s:
            s.set_attributes({"mcp.method.name": "tools/call"})
        with tracer.start_as_current_span("MCP send tools/call broken", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"mcp.method.name": "tools/call", "error.type": "-32602"})
            s.set_status(StatusCode.ERROR, "unknown tool")
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                              "gen_ai.usage.input_tokens": 1300, "gen_ai.usage.output_tokens": 12,
                              "gen_ai.response.finish_reasons": ["stop"]})  # fmt: skip
    provider.shutdown()
    return encode_spans(memory.get_finished_spans())


def _otlp_json(request: Any) -> dict[str, Any]:
    """OTLP/JSON as exporters and the Collector's file exporter write it: trace and span ids in hex."""
    doc = json_format.MessageToDict(request)
    for span in (s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]):
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = base64.b64decode(span[key]).hex()
    return doc


def test_other_instrumentations_spans_become_their_stages(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0).start()
    request = _foreign_request()
    url = "http://{}:{}/v1/traces".format(*col.address)
    try:
        ok = httpx.post(url, content=request.SerializeToString(),
                        headers={"content-type": "application/x-protobuf"})  # fmt: skip
        assert ok.status_code == 200
        again = httpx.post(url, json=_otlp_json(request))  # an exporter's retry, as OTLP/JSON
        assert again.status_code == 200
    finally:
        stats = col.stop()
    df = pa.load(tmp_path).sort_values(["t_start_ns", "seq"])
    assert df["run_id"].unique().tolist()[0].startswith("otlp-spans-agent-x-box1-")
    assert df["stage"].tolist() == ["S1", "S2", "S3", "S4", "S3", "S4", "S5", "S6"]
    assert stats.duplicates == 8 and stats.unmapped == {"server span": 2, "other": 2}
    s1 = df.iloc[0]
    assert (s1["tokens_in"], s1["cache_read_tokens"], s1["token_source"]) == (1200, 1024, "provider")
    assert df.iloc[1]["tokens_out"] == 30 and df.iloc[7]["tokens_out"] == 12
    s4 = df.iloc[3]
    assert (s4["tool"], s4["tool_call_id"], s4["timing_quality"], s4["token_source"]) == (
        "lookup",
        "c1",
        "exact",
        "none",
    )
    assert s4["latency_ms"] >= 0 and pd.isna(s4["footprint_tokens"])
    broken = df.iloc[5]
    assert (broken["tool"], broken["status"], broken["error_type"]) == ("broken", "error", "-32602")
    assert df["trace_id"].nunique() == 1 and df["task_id"].iloc[0] == df["trace_id"].iloc[0]


def test_a_collector_trace_file_imports_once(tmp_path: Path) -> None:
    from promcp.collectors import import_path

    line = _otlp_json(_foreign_request())
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(line) + "\n")
    first = import_path(path, tmp_path / "ds")
    second = import_path(path, tmp_path / "ds")
    assert first.events == 8 and second.events == 0
    df = pa.load(tmp_path / "ds")
    assert len(df) == 8 and df["source"].unique().tolist() == ["otlp:spans"]


def test_bad_trace_input_is_refused_and_the_receiver_stays_up(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0).start()
    url = "http://{}:{}/v1/traces".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    bad_rows = _foreign_request()
    good = bad_rows.SerializeToString()  # the same spans, before one gets a broken attribute
    try:
        assert httpx.post(url, content=good[:-5], headers=proto).status_code == 400
        assert httpx.post(url, json={"resourceSpans": [{"scopeSpans": "x"}]}).status_code == 400
        span = bad_rows.resource_spans[0].scope_spans[0].spans[0]
        kv = span.attributes.add()
        kv.key, kv.value.string_value = "promcp.events", '[{"stage": "S9"'  # truncated by a length limit
        assert httpx.post(url, content=bad_rows.SerializeToString(), headers=proto).status_code == 200
        assert httpx.post(url, content=good, headers=proto).status_code == 200
    finally:
        stats = col.stop()
    assert stats.rejected == {400: 2} and stats.problems == 1
    assert len(pa.load(tmp_path)) == 8  # the good spans, once; the span with bad rows skipped and said


def test_grpc_back_pressure_is_unavailable_and_nothing_is_lost(tmp_path: Path) -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    col = Collector(tmp_path, port=0, queue_size=1, grpc=("127.0.0.1", 0))
    col._grpc.start()  # the recording worker is not running yet: the queue fills up
    request = _foreign_request()
    with grpc.insecure_channel(f"127.0.0.1:{col.grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        stub.Export(request, timeout=10)
        with pytest.raises(grpc.RpcError) as full:
            stub.Export(request, timeout=10)
        assert full.value.code() is grpc.StatusCode.UNAVAILABLE
        col._worker.start()
        col._serving.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the exporter retries UNAVAILABLE
            try:
                stub.Export(_foreign_request(), timeout=10)
                break
            except grpc.RpcError:
                time.sleep(0.1)
    stats = col.stop()
    assert stats.grpc_rejected["UNAVAILABLE"] >= 1 and stats.requests["traces"] == 2
    assert len(pa.load(tmp_path)) == 16  # both accepted requests (different traces), whole


def test_rotation_finalizes_and_a_later_batch_continues_the_same_run(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0, rotate_s=0.3).start()
    url = "http://{}:{}/v1/traces".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    try:
        assert (
            httpx.post(url, content=_foreign_request().SerializeToString(), headers=proto).status_code == 200
        )
        deadline = time.monotonic() + 10
        while not col.stats.runs and time.monotonic() < deadline:  # the first rotation wrote the run
            time.sleep(0.1)
        assert len(col.stats.runs) == 1
        readable = pa.load(tmp_path)  # readable while the collector keeps running
        assert len(readable) == 8
        assert (
            httpx.post(url, content=_foreign_request().SerializeToString(), headers=proto).status_code == 200
        )
    finally:
        stats = col.stop()
    df = pa.load(tmp_path)
    assert len(df) == 16 and df["run_id"].nunique() == 1  # the later batch was merged into the same day's run
    assert sorted(df["seq"]) == list(range(16)) and len(stats.runs) >= 2


def _journaled(out: Path) -> int:
    """Event lines journaled under ``out`` so far (run journals and parts)."""
    lines = 0
    for path in (out / "_journal").rglob("*.jsonl"):
        lines += sum(1 for line in path.read_bytes().splitlines() if b'"stage":' in line)
    return lines


def test_a_killed_collector_restarted_keeps_everything_it_acknowledged(tmp_path: Path) -> None:
    """SIGKILL, the same command again, then ``promcp finalize``: the events journaled before the kill are merged
    with the ones after, never overwritten by the restarted collector's Parquet file nor removed by finalize."""
    import os
    import signal
    import subprocess

    from tests.stubs.ports import free_port, wait_port

    out, port = tmp_path / "ds", free_port()
    cmd = [sys.executable, "-m", "promcp.cli", "collect", "--listen", f"127.0.0.1:{port}", "--out", str(out)]
    url, proto = f"http://127.0.0.1:{port}/v1/traces", {"content-type": "application/x-protobuf"}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first_requests = [_foreign_request() for _ in range(5)]
    first = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_port(port)
        for request in first_requests:
            ok = httpx.post(url, content=request.SerializeToString(), headers=proto)
            assert ok.status_code == 200
        deadline = time.monotonic() + 20
        while _journaled(out) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _journaled(out) == 40
    finally:
        first.kill()
        first.communicate(timeout=30)
    second = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_port(port)
        retry = first_requests[0].SerializeToString()  # an exporter's retry of a batch the first one recorded
        assert httpx.post(url, content=retry, headers=proto).status_code == 200
        for _ in range(3):
            ok = httpx.post(url, content=_foreign_request().SerializeToString(), headers=proto)
            assert ok.status_code == 200
    finally:
        second.send_signal(signal.SIGINT)
        _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "8 duplicate row(s) skipped" in err and "adopted the journal" in err, err
    done = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "finalize", str(out)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    df = pa.load(out)
    assert len(df) == 8 * 8 and df["trace_id"].nunique() == 8 and df["run_id"].nunique() == 1
    assert not list((out / "_journal").rglob("*.jsonl"))  # everything merged, nothing left behind


def test_the_same_span_id_in_two_traces_is_two_spans(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0).start()
    url, proto = "http://{}:{}/v1/traces".format(*col.address), {"content-type": "application/x-protobuf"}
    request = _foreign_request()
    other = type(request)()
    other.CopyFrom(request)
    for span in other.resource_spans[0].scope_spans[0].spans:
        span.trace_id = bytes(16 - len(b"other")) + b"other"
    try:
        for r in (request, other):
            assert httpx.post(url, content=r.SerializeToString(), headers=proto).status_code == 200
    finally:
        stats = col.stop()
    df = pa.load(tmp_path)
    assert stats.duplicates == 0 and len(df) == 16 and df["trace_id"].nunique() == 2
