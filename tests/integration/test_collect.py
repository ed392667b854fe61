"""``promcp collect``: real Claude Code exporting its telemetry (OTLP/HTTP, JSON and protobuf) to the receiver on
loopback, offline against the scripted Anthropic upstream; bad input and back-pressure against the receiver."""

from __future__ import annotations

import gzip
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

import promcp.analysis as pa
from promcp.collect import Collector
from tests.stubs.llm_http import StubServer
from tests.stubs.ports import free_port, wait_port
from tests.stubs.scripted_llm import Scripted

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
#: older Claude Code releases, installed as npm aliases (package.json): the oldest sends no request_id
OLDER_CLAUDE = {
    version: ROOT / "node_modules" / f"claude-code-{version.replace('.', '-')}" / "bin" / "claude.exe"
    for version in ("2.1.150", "2.1.242", "2.1.328")
}
MEMORY = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PROMCP = [sys.executable, "-m", "promcp.cli"]
TOOL = "mcp__memory__create_entities"
ARGS = {"entities": [{"name": "promcp", "entityType": "project", "observations": ["collects telemetry"]}]}


def _claude_versions() -> list[Any]:
    """(protocol, claude binary, upstream sends request-id): every protocol with the pinned release, protobuf with
    each older one; the oldest behind an upstream that sends no request-id (a gateway), so its log records carry no
    ``request_id`` and tool results are joined to their call by time and order."""
    pinned = [pytest.param(p, CLAUDE, True, id=f"{p}-pinned") for p in ("http/json", "http/protobuf", "grpc")]
    older = [pytest.param("http/protobuf", path, v != "2.1.328", id=v) for v, path in OLDER_CLAUDE.items()]
    return pinned + older


@pytest.mark.servers
@pytest.mark.skipif(not CLAUDE.exists() or not MEMORY.exists(), reason="npm packages not installed (npm ci)")
@pytest.mark.parametrize(("protocol", "claude", "request_ids"), _claude_versions())
def test_claude_code_telemetry_becomes_its_stages(
    tmp_path: Path, protocol: str, claude: Path, request_ids: bool
) -> None:
    assert claude.exists(), (
        f"{claude} is missing: npm ci installs every Claude Code version package.json names"
    )
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "ds"
    home.mkdir()
    work.mkdir()
    servers = {
        "memory": {"command": "node", "args": [str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(tmp_path / "m")}}
    }
    (home / ".claude.json").write_text(json.dumps({"mcpServers": servers}))
    port, grpc_port = free_port(), free_port()
    collect = subprocess.Popen(
        [
            *PROMCP,
            "collect",
            "--listen",
            f"127.0.0.1:{port}",
            "--grpc",
            f"127.0.0.1:{grpc_port}",
            "--out",
            str(out),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_port(port, grpc_port)
        script = Scripted(TOOL, ARGS, answer="Saved: ", request_ids=request_ids)
        with StubServer(script.anthropic) as stub:
            env = {
                "MCP_CONNECTION_NONBLOCKING": "false",  # older releases: the first call waits for the MCP server
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(home),
                "ANTHROPIC_API_KEY": "sk-ant-dummy-key-for-the-stub",
                "ANTHROPIC_BASE_URL": stub.url,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "ENABLE_TOOL_SEARCH": "false",
                "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
                "OTEL_LOGS_EXPORTER": "otlp",
                "OTEL_METRICS_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{grpc_port if protocol == 'grpc' else port}",
                "OTEL_LOGS_EXPORT_INTERVAL": "500",
                "OTEL_METRIC_EXPORT_INTERVAL": "1000",
                "OTEL_LOG_TOOL_DETAILS": "1",
            }
            proc = subprocess.run(
                [str(claude), "-p", "Remember that promcp collects telemetry.", "--allowedTools", TOOL],
                env=env,
                cwd=work,
                capture_output=True,
                text=True,
                timeout=240,
            )
        assert proc.returncode == 0, proc.stderr
    finally:
        collect.send_signal(signal.SIGINT)
        _, err = collect.communicate(timeout=120)
    assert collect.returncode == 0, err
    assert "rejected none" in err and "(1 prompt(s): 1 Claude Code)" in err, err
    assert "0 tool result(s) without their call" in err, err

    df = pa.load(out).sort_values("seq")
    assert set(df["source"]) == {"otlp:claude-code"} and set(df["topology"]) == {"c-ots"}
    assert df["stage"].tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"]
    inputs = df[df["stage"].isin(["S1", "S5"])]
    outputs = df[df["stage"].isin(["S2", "S6"])]
    for (_, row), out_row, usage in zip(inputs.iterrows(), outputs.itertuples(), script.usage, strict=True):
        total = (
            usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        )
        assert row["tokens_in"] == total and row["token_source"] == "provider"
        assert row["cache_read_tokens"] == usage["cache_read_input_tokens"]
        assert row["cache_write_tokens"] == usage["cache_creation_input_tokens"]
        assert out_row.tokens_out == usage["output_tokens"]
        assert json.loads(out_row.attrs)["client_cost_usd"] > 0
    s3, s4 = df[df["stage"] == "S3"].iloc[0], df[df["stage"] == "S4"].iloc[0]
    assert (s3["server"], s3["tool"], s4["status"]) == ("memory", "create_entities", "ok")
    assert s4["timing_quality"] == "exact" and s4["latency_ms"] >= 0 and s4["footprint_bytes"] > 0
    assert (
        s3["tool_call_id"]
        == json.loads(outputs.iloc[0]["attrs"]).get("tool_call_ids", [s3["tool_call_id"]])[0]
    )
    if claude in (CLAUDE, OLDER_CLAUDE["2.1.328"]):  # ttft_ms is sent: the client's own time to first token
        assert inputs["timing_quality"].eq("exact").all()
    else:  # releases before it send duration_ms only: the whole call is on the output event, exact
        assert inputs["timing_quality"].eq("none").all() and outputs["timing_quality"].eq("exact").all()


def _request(n: int, session: str = "s1") -> bytes:
    """A protobuf logs request with one user_prompt and ``n`` api_request records."""

    def kv(key: str, value: str | int) -> KeyValue:
        v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        return KeyValue(key=key, value=v)

    records = [LogRecord(time_unix_nano=time.time_ns(), attributes=[kv("event.name", "user_prompt"),
               kv("session.id", session), kv("prompt.id", "p1")])]  # fmt: skip
    for i in range(n):
        attrs = [kv("event.name", "api_request"), kv("session.id", session), kv("prompt.id", "p1"),
                 kv("model", "claude-sonnet-4-5"), kv("input_tokens", 10), kv("output_tokens", 5),
                 kv("cache_read_tokens", 100), kv("cache_creation_tokens", 0), kv("duration_ms", 20),
                 kv("request_id", f"r{i}")]  # fmt: skip
        records.append(LogRecord(time_unix_nano=time.time_ns(), attributes=attrs))
    req = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])])
    return req.SerializeToString()


def test_bad_input_is_refused_with_a_reason_and_the_rest_is_kept(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0, max_body=1_000_000).start()
    url = "http://{}:{}".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    try:
        assert httpx.post(url + "/v1/logs", content=_request(2), headers=proto).status_code == 200
        truncated = httpx.post(url + "/v1/logs", content=_request(2)[:-7], headers=proto)
        assert (
            truncated.status_code == 400
            and "not an OTLP logs protobuf message" in truncated.json()["message"]
        )
        wrong = httpx.post(url + "/v1/logs", content=b"{}", headers={"content-type": "text/plain"})
        assert wrong.status_code == 415
        shape = httpx.post(url + "/v1/logs", json={"resourceLogs": "nope"})
        assert shape.status_code == 400
        big = httpx.post(url + "/v1/logs", content=b"\0" * 2_000_000, headers=proto)
        assert big.status_code == 413
        bomb = gzip.compress(b"{" * 70_000_000)  # small on the wire, 70 MB decompressed
        zipped = httpx.post(url + "/v1/logs", content=bomb, headers={**proto, "content-encoding": "gzip"})
        assert zipped.status_code == 413
        assert httpx.post(url + "/v1/logs", content=_request(1, "s2"), headers=proto).status_code == 200
    finally:
        stats = col.stop()
    assert stats.rejected == {400: 2, 413: 2, 415: 1} and stats.requests == {"logs": 2}
    df = pa.load(tmp_path)
    assert df["stage"].tolist().count("S1") == 2 and len(df) == 2 * 2 + 2  # both good requests, whole


def test_a_full_queue_answers_503_with_retry_after_and_loses_nothing(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0, queue_size=1)
    col._serving.start()  # the recording worker is not running yet: the queue fills up
    url = "http://{}:{}/v1/logs".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    first = httpx.post(url, content=_request(1, "a"), headers=proto)
    second = httpx.post(url, content=_request(1, "b"), headers=proto)
    assert first.status_code == 200
    assert second.status_code == 503 and second.headers["retry-after"] == "1"
    col._worker.start()
    deadline = time.monotonic() + 10
    while True:  # the sender retries, as OTLP exporters do
        again = httpx.post(url, content=_request(1, "b"), headers=proto)
        if again.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(float(again.headers.get("retry-after", "1")) / 10)
    assert again.status_code == 200
    col.stop()
    df = pa.load(tmp_path)
    assert sorted({t.split(":")[0] for t in df["task_id"]}) == ["a", "b"]  # every accepted request recorded


def test_a_collector_file_export_imports_to_the_same_events(tmp_path: Path) -> None:
    """``promcp import`` of the Collector file exporter's JSON lines gives what ``promcp collect`` records."""
    from google.protobuf import json_format

    from promcp.collectors import import_path

    line = json_format.MessageToDict(ExportLogsServiceRequest.FromString(_request(3, "f")))
    path = tmp_path / "otel.jsonl"
    path.write_text(json.dumps(line) + "\n" + "{not json\n" + json.dumps(line | {"resourceLogs": []}) + "\n")
    summary = import_path(path, tmp_path / "imported")
    assert summary.format == "otlp" and summary.imported == 1 and summary.problems.items  # the bad line named
    col = Collector(tmp_path / "collected", port=0).start()
    httpx.post("http://{}:{}/v1/logs".format(*col.address), content=_request(3, "f"),
               headers={"content-type": "application/x-protobuf"})  # fmt: skip
    col.stop()
    keep = ["stage", "round", "tokens_in", "tokens_out", "cache_read_tokens", "latency_ms", "task_id"]
    imported = pa.load(tmp_path / "imported")[keep].reset_index(drop=True)
    collected = pa.load(tmp_path / "collected")[keep].reset_index(drop=True)
    assert imported.equals(collected) and imported["stage"].tolist() == ["S1", "S6", "S5", "S6", "S5", "S6"]


def test_a_stopped_recording_worker_makes_the_receiver_answer_503_and_say_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker dies (here: the dataset's _journal is a file, so nothing can be journaled): the request it was
    recording is counted lost and said; every later one gets 503 naming the reason, never a 200 nobody records."""
    (tmp_path / "_journal").write_text("not a folder")
    caplog.set_level(logging.INFO, logger="promcp")
    col = Collector(tmp_path, port=0).start()
    url = "http://{}:{}/v1/logs".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    try:
        assert httpx.post(url, content=_request(1, "a"), headers=proto).status_code == 200
        deadline = time.monotonic() + 10
        while col.stopped is None and time.monotonic() < deadline:
            httpx.post(url, content=_request(1, "b"), headers=proto)  # the prompt of "a" finishes
            time.sleep(0.05)
        refused = httpx.post(url, content=_request(1, "c"), headers=proto)
    finally:
        col.stop()
    assert refused.status_code == 503 and "recording worker stopped" in refused.json()["message"]
    said = [r.getMessage() for r in caplog.records if r.name == "promcp.collect"]
    assert any("recording worker stopped" in line and "_journal" in line for line in said), said


def test_bodies_waiting_for_the_worker_are_bounded_in_bytes(tmp_path: Path) -> None:
    """A flood of large bodies gets 503 once the bytes read and queued pass max_pending (the memory flood that
    killed the worker with MemoryError), and every request answered 200 is recorded."""
    col = Collector(tmp_path, port=0, max_pending=1_000_000)
    col._serving.start()  # the worker is not running yet: what is acknowledged waits in memory
    url = "http://{}:{}/v1/logs".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    big = [_request(1500, f"s{i}") for i in range(4)]
    assert all(300_000 < len(b) < 500_000 for b in big), [len(b) for b in big]
    codes = [httpx.post(url, content=b, headers=proto).status_code for b in big]
    col._worker.start()
    stats = col.stop()
    assert codes[:2] == [200, 200] and 503 in codes[2:], codes
    df = pa.load(tmp_path)
    assert df["task_id"].str.split(":").str[0].nunique() == codes.count(200) and stats.lost == 0


def test_a_body_nested_thousands_deep_is_a_400_not_a_dropped_connection(tmp_path: Path) -> None:
    col = Collector(tmp_path, port=0).start()
    url = "http://{}:{}/v1/logs".format(*col.address)
    try:
        deep = httpx.post(url, content=b'{"a":' * 5000 + b"1" + b"}" * 5000,
                          headers={"content-type": "application/json"})  # fmt: skip
        deep_list = httpx.post(url, content=b"[" * 100_000 + b"]" * 100_000,
                               headers={"content-type": "application/json"})  # fmt: skip
        good = httpx.post(url, content=_request(1), headers={"content-type": "application/x-protobuf"})
    finally:
        stats = col.stop()
    assert deep.status_code == 400 and "nested deeper" in deep.json()["message"]
    assert deep_list.status_code == 400 and good.status_code == 200 and stats.rejected == {400: 2}


def test_a_tool_result_without_a_call_to_join_is_kept_and_counted(tmp_path: Path) -> None:
    """A tool_result whose prompt has no api_request (its call's record was lost by the sender) is neither
    dropped nor glued to a wrong call: S3/S4 of its own, marked unplaced, counted in the receiver's summary."""

    def kv(key: str, value: str | int) -> KeyValue:
        v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        return KeyValue(key=key, value=v)

    now = time.time_ns()
    records = [
        LogRecord(time_unix_nano=now, attributes=[kv("event.name", "user_prompt"), kv("session.id", "u"),
                  kv("prompt.id", "p1")]),
        LogRecord(time_unix_nano=now + 10**9, attributes=[kv("event.name", "tool_result"), kv("session.id", "u"),
                  kv("prompt.id", "p1"), kv("tool_name", "mcp__memory__read_graph"), kv("success", "true"),
                  kv("duration_ms", "12"), kv("tool_use_id", "toolu_9"), kv("tool_result_size_bytes", 80)]),
    ]  # fmt: skip
    req = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])])
    col = Collector(tmp_path, port=0).start()
    url = "http://{}:{}/v1/logs".format(*col.address)
    try:
        ok = httpx.post(
            url, content=req.SerializeToString(), headers={"content-type": "application/x-protobuf"}
        )
        assert ok.status_code == 200
    finally:
        stats = col.stop()
    assert stats.unplaced == 1
    df = pa.load(tmp_path).sort_values("seq")
    assert df["stage"].tolist() == ["S3", "S4"]
    s4 = df.iloc[1]
    assert (s4["server"], s4["tool"], s4["tool_call_id"], s4["footprint_bytes"]) == (
        "memory", "read_graph", "toolu_9", 80
    )  # fmt: skip
    assert json.loads(s4["attrs"])["unplaced"] is True and s4["latency_ms"] == 12
