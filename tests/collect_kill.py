"""SIGKILL a real ``promcp collect`` under load, start it again with the same command, ``promcp finalize``: which of
the batches it answered 200 are in the dataset (issue 23, item 1; used by tests/integration/test_collect_killed.py
and tests/perf/bench_reliability.py).

Senders, each its own connection: Claude Code-shaped OTLP log batches (one prompt each, protobuf, posted with
``http.client``, a 503 retried after its Retry-After) and the OpenTelemetry SDK's own OTLP/HTTP span exporter
(``export`` returns SUCCESS only on a 200). The collector runs with ``--idle 600``, so the prompts are still held
in memory when it is killed: only what was written before the 200 answer can bring them back."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _spans(i: int, k: int) -> tuple[list[Any], str]:
    """One trace of three spans from the OpenTelemetry SDK (a chat call and an MCP tool call), and its trace id."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"agent-{i}", "host.name": "box"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("kill-test")
    with tracer.start_as_current_span("invoke_agent") as root:
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                              "gen_ai.usage.input_tokens": 100 + k, "gen_ai.usage.output_tokens": 7})  # fmt: skip
        with tracer.start_as_current_span("MCP send tools/call lookup", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"mcp.method.name": "tools/call", "jsonrpc.request.id": str(k),
                              "gen_ai.tool.name": "lookup"})  # fmt: skip
    provider.shutdown()
    return list(memory.get_finished_spans()), format(root.get_span_context().trace_id, "032x")


def kill_and_restart(
    out: Path, *, log_senders: int = 6, span_senders: int = 2, seconds: float = 3.0, restart: bool = True
) -> dict[str, Any]:
    """The whole scenario; returns the acknowledged prompt and trace ids, the restarted collector's stderr and
    ``promcp finalize``'s result. ``restart=False``: no second collector, ``promcp finalize`` replays the spool."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tests.integration.test_collect import _request
    from tests.stubs.ports import free_port, wait_port

    port = free_port()
    cmd = [sys.executable, "-m", "promcp.cli", "collect", "--listen", f"127.0.0.1:{port}", "--out", str(out),
           "--idle", "600"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    prompts: set[str] = set()
    traces: set[str] = set()
    refused = [0]
    lock = threading.Lock()
    killed = threading.Event()

    def log_sender(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        k = 0
        while not killed.is_set():
            session = f"kill{i}-{k}"
            try:
                conn.request(
                    "POST", "/v1/logs", _request(2, session), {"content-type": "application/x-protobuf"}
                )
                resp = conn.getresponse()
                resp.read()
            except OSError:
                return  # the collector is gone
            if resp.status == 200:
                with lock:
                    prompts.add(f"{session}:p1")  # its task id: session:prompt#n
                k += 1
            else:
                with lock:
                    refused[0] += 1
                time.sleep(float(resp.getheader("retry-after") or 1) / 20)

    def span_sender(i: int) -> None:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=2)
        k = 0
        while not killed.is_set():
            spans, trace = _spans(i, k)
            if exporter.export(spans) == SpanExportResult.SUCCESS:
                with lock:
                    traces.add(trace)
            k += 1
        exporter.shutdown()

    first = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_port(port)
        threads = [threading.Thread(target=log_sender, args=(i,)) for i in range(log_senders)]
        threads += [threading.Thread(target=span_sender, args=(i,)) for i in range(span_senders)]
        for t in threads:
            t.start()
        time.sleep(seconds)
    finally:
        first.kill()  # SIGKILL, under load
        first.wait(30)
        killed.set()
    for t in threads:
        t.join(60)
    spooled = sorted(p.name for p in (out / "_spool").glob("*.spool"))
    rc, restarted = None, ""
    if restart:
        second = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)  # the same command again
        try:
            wait_port(port)
        finally:
            second.send_signal(signal.SIGINT)
            _, restarted = second.communicate(timeout=300)
        rc = second.returncode
    done = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "finalize", str(out)], capture_output=True, text=True, env=env
    )
    return {"prompts": prompts, "traces": traces, "refused": refused[0], "spooled at kill": spooled,
            "restart rc": rc, "restart stderr": restarted, "finalize": done}  # fmt: skip


def kept(out: Path, result: dict[str, Any]) -> dict[str, int]:
    """How many acknowledged prompts and traces the dataset holds."""
    import promcp.analysis as pa

    df = pa.load(out)
    tasks = {str(t).rsplit("#", 1)[0] for t in df["task_id"].dropna().unique()}
    trace_ids = set(df["trace_id"].dropna())
    return {"prompts 200": len(result["prompts"]), "prompts kept": len(result["prompts"] & tasks),
            "traces 200": len(result["traces"]), "traces kept": len(result["traces"] & trace_ids)}  # fmt: skip
