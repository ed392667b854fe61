"""Ingest rate of ``promcp collect``: concurrent OTLP senders against one receiver on loopback, zero loss.

Each sender posts protobuf batches as fast as the receiver accepts them, honouring ``503`` + ``Retry-After`` like
the OpenTelemetry exporters. ``--kind logs``: ``ExportLogsServiceRequest`` batches of Claude Code ``api_request``
records (one prompt per batch, ``--calls`` calls: 2 events each). ``--kind spans``: ``ExportTraceServiceRequest``
batches of another instrumentation's spans (per call a GenAI ``chat`` span and an MCP ``tools/call`` CLIENT span: 4
events). ``--kind rows``: promcp.instrument()'s spans carrying their journal rows (4 rows per call). The receiver
runs in its own process (``promcp collect``); "journaled" is when every event is in its journal, then it is
stopped with SIGINT and the events in the dataset are counted: events in = events out.

    .venv/bin/python tests/perf/bench_collect.py [--kind logs|spans|rows] [--senders 4] [--batches 200] [--calls 50]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs when run as a script

from tests.stubs.ports import free_port, wait_port


def _kv(key: str, value: str | int) -> KeyValue:
    v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
    return KeyValue(key=key, value=v)


def batch(sender: int, n: int, calls: int) -> bytes:
    session, prompt = f"sender{sender}", f"p{n}"
    base = [_kv("session.id", session), _kv("prompt.id", prompt)]
    records = [LogRecord(time_unix_nano=time.time_ns(), attributes=[_kv("event.name", "user_prompt"), *base])]
    for i in range(calls):
        attrs = [_kv("event.name", "api_request"), *base, _kv("model", "claude-sonnet-4-5"),
                 _kv("input_tokens", 10), _kv("output_tokens", 5), _kv("cache_read_tokens", 1000),
                 _kv("cache_creation_tokens", 0), _kv("duration_ms", 20), _kv("request_id", f"r{i}")]  # fmt: skip
        records.append(LogRecord(time_unix_nano=time.time_ns(), attributes=attrs))
    req = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])])
    return req.SerializeToString()


def span_batch(sender: int, n: int, calls: int) -> bytes:
    """Per call: a GenAI chat span and the MCP tools/call span it led to, in one trace per request."""
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    trace = (sender * 1_000_003 + n + 1).to_bytes(16, "big")
    spans = []
    t = time.time_ns()
    for i in range(calls):
        sid = (n * 10_000 + i * 2 + 1).to_bytes(8, "big")
        chat = [_kv("gen_ai.operation.name", "chat"), _kv("gen_ai.request.model", "gpt-4o"),
                _kv("gen_ai.usage.input_tokens", 1000 + i), _kv("gen_ai.usage.output_tokens", 20),
                _kv("gen_ai.tool.call.id", f"c{i}")]  # fmt: skip
        chat.append(KeyValue(key="gen_ai.response.finish_reasons", value=AnyValue(string_value="tool_calls")))
        spans.append(Span(trace_id=trace, span_id=sid, name="chat gpt-4o", kind=Span.SPAN_KIND_CLIENT,
                          start_time_unix_nano=t + i * 10_000, end_time_unix_nano=t + i * 10_000 + 5_000,
                          attributes=chat))  # fmt: skip
        mcp = [_kv("mcp.method.name", "tools/call"), _kv("gen_ai.tool.name", "lookup"),
               _kv("jsonrpc.request.id", str(i)), _kv("gen_ai.tool.call.id", f"c{i}")]  # fmt: skip
        spans.append(Span(trace_id=trace, span_id=(n * 10_000 + i * 2 + 2).to_bytes(8, "big"),
                          name="MCP send tools/call lookup", kind=Span.SPAN_KIND_CLIENT,
                          start_time_unix_nano=t + i * 10_000 + 6_000, end_time_unix_nano=t + i * 10_000 + 9_000,
                          attributes=mcp))  # fmt: skip
    resource = Resource(attributes=[_kv("service.name", f"agent{sender}"), _kv("host.name", "bench")])
    req = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=spans)])]
    )
    return req.SerializeToString()


def rows_batch(sender: int, n: int, calls: int) -> bytes:
    """promcp.instrument()'s export: one span carrying 4 rows per call (S1/S5, S2, S3, S4) of the sender's run."""
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    from promcp.events import Event, Origin, Part, Stage, Topology, encode_events

    run, t, rows = f"bench-run-{sender}", time.time_ns(), []
    for i in range(calls):
        seq = (n * calls + i) * 4
        common = {"run_id": run, "topology": Topology.C_CUST, "source": "instrument", "task_id": f"t{n}"}
        rows += [
            Event(stage=Stage.S5 if i else Stage.S1, seq=seq, t_start_ns=t, parts=[Part(Origin.USER, "prompt", 900 + i)], **common),
            Event(stage=Stage.S2, seq=seq + 1, t_start_ns=t, tokens_out=20, **common),
            Event(stage=Stage.S3, seq=seq + 2, t_start_ns=t, tool="lookup", footprint_tokens=12, **common),
            Event(stage=Stage.S4, seq=seq + 3, t_start_ns=t, tool="lookup", footprint_tokens=300, **common),
        ]  # fmt: skip
    header = json.dumps({"run_id": run, "topology": "c-cust", "source": "instrument", "meta": {}})
    spans = []
    for k in range(0, len(rows), 1000):
        attrs = [_kv("promcp.events", encode_events(rows[k : k + 1000]).decode()), _kv("promcp.run", header)]
        spans.append(Span(trace_id=(n + 1).to_bytes(16, "big"), span_id=(k + 1).to_bytes(8, "big"),
                          name="promcp events", start_time_unix_nano=t, end_time_unix_nano=t, attributes=attrs))  # fmt: skip
    resource = Resource(attributes=[_kv("service.name", "host"), _kv("promcp.run.id", run)])
    req = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=spans)])]
    )
    return req.SerializeToString()


BATCHES = {
    "logs": (batch, "/v1/logs", 2),
    "spans": (span_batch, "/v1/traces", 4),
    "rows": (rows_batch, "/v1/traces", 4),
}


def journaled(out: Path) -> int:
    """Event lines in the dataset's journals so far (headers and content lines left out)."""
    n = 0
    for path in out.glob("_journal/**/*.jsonl"):
        with path.open("rb") as fh:
            n += sum(1 for line in fh if line.startswith(b'{"run_id"'))
    return n


def send(url: str, sender: int, batches: int, calls: int, make: Any) -> tuple[int, int]:
    """(requests accepted, 503 answers) of one sender."""
    retried = 0
    with httpx.Client(timeout=60) as client:
        for n in range(batches):
            body = make(sender, n, calls)
            while True:
                r = client.post(url, content=body, headers={"content-type": "application/x-protobuf"})
                if r.status_code == 200:
                    break
                if r.status_code != 503:
                    raise RuntimeError(f"{r.status_code}: {r.text}")
                retried += 1
                time.sleep(float(r.headers.get("retry-after", "1")) / 20)
    return batches, retried


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--batches", type=int, default=200, help="requests per sender")
    ap.add_argument("--calls", type=int, default=50, help="LLM calls per request")
    ap.add_argument("--kind", choices=sorted(BATCHES), default="logs")
    args = ap.parse_args()
    make, path, per_call = BATCHES[args.kind]
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ds"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "promcp.cli",
                "collect",
                "--listen",
                f"127.0.0.1:{port}",
                "--out",
                str(out),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_port(port)
        url = f"http://127.0.0.1:{port}{path}"
        expected = args.senders * args.batches * args.calls * per_call
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.senders) as pool:
            results = list(
                pool.map(lambda i: send(url, i, args.batches, args.calls, make), range(args.senders))
            )
        sent_s = time.perf_counter() - started
        deadline = time.monotonic() + 600
        while args.kind != "logs" and journaled(out) < expected and time.monotonic() < deadline:
            time.sleep(0.05)  # (Claude Code prompts are journaled when they finish: at exit here)
        journal_s = time.perf_counter() - started
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
        total_s = time.perf_counter() - started
        import promcp.analysis as pa

        df = pa.load(out)
    retried = sum(r for _, r in results)
    print(
        f"{args.kind}: {args.senders} senders × {args.batches} requests × {args.calls} calls; "
        f"receiver: {err.strip().splitlines()[-1]}\n"
    )
    print(
        "| kind | events sent | events recorded | lost | 503 answers | accepted in s | events/s accepted | "
        "events/s journaled | recorded in s | events/s end to end |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rate = "—" if args.kind == "logs" else f"{expected / journal_s:,.0f}"
    print(
        f"| {args.kind} | {expected:,} | {len(df):,} | {expected - len(df):,} | {retried:,} | {sent_s:.1f} | "
        f"{expected / sent_s:,.0f} | {rate} | {total_s:.1f} | {expected / total_s:,.0f} |"
    )
    return 0 if len(df) == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
