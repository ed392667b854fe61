"""Ingest rate of ``promcp collect``: concurrent OTLP senders against one receiver on loopback, zero loss.

Each sender posts protobuf ``ExportLogsServiceRequest`` batches of Claude Code ``api_request`` records (one prompt
per batch, ``--calls`` calls each: 2 events per call) as fast as the receiver accepts them, honouring ``503`` +
``Retry-After`` like the OpenTelemetry exporters. The receiver runs in its own process (``promcp collect``), is
stopped with SIGINT, and the events in the dataset are counted: events in = events out.

    .venv/bin/python tests/perf/bench_collect.py [--senders 4] [--batches 200] [--calls 50]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs


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


def send(url: str, sender: int, batches: int, calls: int) -> tuple[int, int]:
    """(requests accepted, 503 answers) of one sender."""
    retried = 0
    with httpx.Client(timeout=60) as client:
        for n in range(batches):
            body = batch(sender, n, calls)
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
    ap.add_argument("--calls", type=int, default=50, help="LLM calls per request (2 events each)")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/v1/logs"
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.senders) as pool:
            results = list(pool.map(lambda i: send(url, i, args.batches, args.calls), range(args.senders)))
        sent_s = time.perf_counter() - started
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
        total_s = time.perf_counter() - started
        import promcp.analysis as pa

        df = pa.load(out)
    expected = args.senders * args.batches * args.calls * 2
    retried = sum(r for _, r in results)
    print(
        f"{args.senders} senders × {args.batches} requests × {args.calls} calls; receiver: {err.strip().splitlines()[-1]}\n"
    )
    print(
        "| events sent | events recorded | lost | 503 answers | accepted in s | events/s accepted | recorded in s | events/s recorded |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {expected:,} | {len(df):,} | {expected - len(df):,} | {retried:,} | {sent_s:.1f} | "
        f"{expected / sent_s:,.0f} | {total_s:.1f} | {expected / total_s:,.0f} |"
    )
    return 0 if len(df) == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
