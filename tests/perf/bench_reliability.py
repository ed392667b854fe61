"""Reliability figures of the live sources (docs/architecture.md, "Reliability of the live sources"): what they
hold and what they lose under an endless stream, slow senders and many senders. One run prints one table.

* ``endless stream`` — ``promcp proxy llm`` (a real subprocess) relays an SSE stream that never ends (an asyncio
  upstream on loopback sending 1 KB text deltas as fast as the client reads them) for ``--stream-s`` seconds; the
  proxy's RSS is sampled every second (``/proc/<pid>/status``, VmRSS): first sample, at 1, 5 and 10 minutes when
  the stream runs that long (``--stream-s 600``), peak, last; the client's bytes.
* ``endless stream (proxy mcp)`` — the same for ``promcp proxy mcp --upstream``: a tools/call answered by an SSE
  stream of progress notifications that never ends (the HTTP MCP proxy's recording backlog is bounded).
* ``SIGKILL + restart`` — a real ``promcp collect`` under load from OTLP senders (Claude Code-shaped log batches, the
  OpenTelemetry SDK's span exporter) killed with SIGKILL after ``--kill-s`` seconds, started again with the same
  command, then ``promcp finalize`` (tests/collect_kill.py): batches answered 200 and how many the dataset holds.
* ``secrets scan`` — per content mode, fake credentials written in free text (a password, AWS's example key pair,
  GitHub, Slack, SendGrid, a URL password, a JWT) recorded through a ``promcp record`` session (LLM proxy and MCP
  proxy), ``promcp proxy mcp`` (stdio, the npm ``everything`` server's echo tool) and ``promcp import``, and an API
  key, an ``authorization`` header, a cookie and an MCP server's environment secret in the ``record`` session; every
  file written is read back (Parquet as tables) and searched for the planted literals and with detect-secrets'
  detectors: secrets found in the event files and in the content files (``full`` keeps content verbatim, by
  definition), credentials found anywhere.
* ``slowloris`` — ``promcp collect`` (in process, ``timeout_s=--timeout``) gets ``--slow`` sockets that send half a
  request head and stop; after the timeout plus one second, how many are still held open by the receiver.
* ``200 senders`` — ``--senders`` threads, each its own connection, POST OTLP log batches to ``promcp collect`` for
  ``--senders-s`` seconds, retrying a 503 after its Retry-After (as exporters do): batches answered 200, events
  recorded (expected: every acknowledged batch's), connection resets and refusals; ``--spool-fsync always`` fsyncs
  each batch's spool write before its 200 (the cost of surviving a power loss too;
  ``--spool-fsync never always`` measures both in one run).

    .venv/bin/python tests/perf/bench_reliability.py [--stream-s 60] [--senders 200] [--senders-s 20] [--only mcp …]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _endless_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while (await reader.readline()) not in (b"\r\n", b""):
        pass  # the head; the body is read by length below
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
        b'"role":"assistant","model":"x","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
    )
    delta = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"' + b"x" * 1000 + b'"}}\n\n'
    )
    try:
        writer.write(b"%x\r\n%s\r\n" % (len(start), start))
        chunk = b"%x\r\n%s\r\n" % (len(delta) * 16, delta * 16)
        while True:
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _endless_mcp_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An MCP server answering a tools/call with an SSE stream of progress notifications that never ends."""
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    event = (
        b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,'
        b'"progress":1,"message":"' + b"x" * 200 + b'"}}\n\n'
    )
    chunk = b"%x\r\n%s\r\n" % (len(event) * 16, event * 16)
    try:
        while True:
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def endless_stream(seconds: float, kind: str = "llm") -> dict[str, Any]:
    """RSS of a ``promcp proxy llm`` (``kind="llm"``) or ``promcp proxy mcp --upstream`` (``"mcp"``) process
    relaying a never-ending stream."""
    loop = asyncio.new_event_loop()
    upstream = _endless_upstream if kind == "llm" else _endless_mcp_upstream
    server = loop.run_until_complete(asyncio.start_server(upstream, "127.0.0.1", 0))
    up_port = server.sockets[0].getsockname()[1]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    out = Path(tempfile.mkdtemp(prefix="promcp-bench-rel-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = f"http://127.0.0.1:{up_port}" + ("/mcp" if kind == "mcp" else "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "promcp.cli", "proxy", kind, "--upstream", target,
         "--listen", f"127.0.0.1:{port}", "--out", str(out)],
        stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    samples: list[float] = []
    received = 0
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                client = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.2)
        if kind == "llm":
            body = b'{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
            client.sendall(
                b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
        else:
            body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}'
            client.sendall(
                b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                b"accept: application/json, text/event-stream\r\nmcp-session-id: s1\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
        start = next_sample = time.monotonic()
        while time.monotonic() - start < seconds:
            received += len(client.recv(1 << 20))
            if time.monotonic() >= next_sample:
                samples.append(_rss_mb(proc.pid))
                next_sample += 1.0
                if len(samples) in (
                    60,
                    300,
                    600,
                ):  # said as it goes: a long run's figures survive a late failure
                    print(
                        f"{kind}: RSS {samples[-1]:.1f} MB at {len(samples)} s", file=sys.stderr, flush=True
                    )
        client.close()
        time.sleep(2.0)  # the stream ended: what is still held
        after = _rss_mb(proc.pid)
    finally:
        stop = time.monotonic()
        proc.terminate()
        proc.wait(
            timeout=900
        )  # proxy mcp finalizes every event it recorded: minutes after a 10-minute stream
        stopped = time.monotonic() - stop
        loop.call_soon_threadsafe(loop.stop)
    marks = {f"RSS {m // 60} min": samples[m - 1] for m in (60, 300, 600) if len(samples) >= m}
    return {"seconds": seconds, "MB relayed": received / 1e6, "RSS first": samples[0], **marks,
            "RSS peak": max(samples), "RSS last": samples[-1], "RSS 2 s after": after, "stop s": stopped}  # fmt: skip


def slowloris(n: int, timeout_s: float) -> dict[str, Any]:
    from promcp.collect import Collector

    col = Collector(tempfile.mkdtemp(prefix="promcp-bench-rel-"), port=0, timeout_s=timeout_s).start()
    socks = []
    for _ in range(n):
        s = socket.create_connection(col.address)
        s.sendall(b"POST /v1/logs HTTP/1.1\r\nhost: x\r\ncontent-")  # half a head, then nothing
        socks.append(s)
    time.sleep(timeout_s + 1.0)
    held = 0
    for s in socks:
        s.settimeout(0.5)
        try:
            held += s.recv(1) != b""  # b"": the receiver closed it
        except TimeoutError:
            held += 1  # still open, waiting
        except OSError:
            pass
        s.close()
    col.stop()
    return {"sockets": n, "timeout s": timeout_s, "held after timeout": held}


def senders(n: int, seconds: float, spool_fsync: str = "never") -> dict[str, Any]:
    import http.client

    import promcp.analysis as pa
    from promcp.collect import Collector
    from tests.integration.test_collect import _request

    out = tempfile.mkdtemp(prefix="promcp-bench-rel-")
    col = Collector(out, port=0, idle_s=1.0, spool_fsync=spool_fsync).start()
    host, port = col.address
    counts = {"200": 0, "503": 0, "resets": 0, "other": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    start_gate = threading.Barrier(n)

    def sender(i: int) -> None:
        start_gate.wait()
        conn = http.client.HTTPConnection(host, port, timeout=30)
        k = 0
        while time.monotonic() < stop_at:
            body = _request(2, f"s{i}-{k}")
            try:
                conn.request("POST", "/v1/logs", body, {"content-type": "application/x-protobuf"})
                resp = conn.getresponse()
                resp.read()
                key = str(resp.status) if resp.status in (200, 503) else "other"
                with lock:
                    counts[key] += 1
                if resp.status == 200:
                    k += 1
                else:
                    time.sleep(float(resp.getheader("retry-after") or 1))
            except (ConnectionError, OSError):
                with lock:
                    counts["resets"] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.close()

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = col.stop()
    df = pa.load(out)
    recorded = df["task_id"].nunique()
    return {"senders": n, "seconds": seconds, "batches 200": counts["200"], "503 (retried)": counts["503"],
            "prompts recorded": recorded, "lost": counts["200"] - recorded, "resets": counts["resets"],
            "refused": stats.refused_connections}  # fmt: skip


def killed(seconds: float) -> dict[str, Any]:
    """``promcp collect`` killed with SIGKILL under load, the same command again, ``promcp finalize``
    (tests/collect_kill.py): batches answered 200 and how many of them the dataset holds."""
    from tests.collect_kill import kept, kill_and_restart

    out = Path(tempfile.mkdtemp(prefix="promcp-bench-rel-")) / "ds"
    result = kill_and_restart(out, seconds=seconds)
    return {"load s": seconds, **kept(out, result), "spool files at kill": len(result["spooled at kill"]),
            "restart rc": result["restart rc"], "finalize rc": result["finalize"].returncode}  # fmt: skip


def secret_scan() -> list[tuple[str, dict[str, Any]]]:
    """Per content mode: secrets planted in free text through a ``promcp record`` session, ``promcp proxy mcp`` and
    ``promcp import``, and credentials (an API key, an ``authorization`` header, a cookie, an MCP server's environment
    secret) in the ``record`` session; how many a scan of every file written finds (tests/secret_scan.py)."""
    from tests.secret_scan import (
        CREDENTIALS,
        MODES,
        SECRETS,
        record_import,
        record_proxy,
        record_session,
        scan,
        wait_merged,
    )

    rows = []
    for mode in MODES:
        tmp = Path(tempfile.mkdtemp(prefix="promcp-bench-secrets-"))
        out = tmp / "ds"
        record_session(out, mode, tmp)
        record_proxy(out, mode)
        record_import(out, mode, tmp)
        wait_merged(out)
        found = scan(out)
        rows.append((f"secrets scan (--content {mode})", {
            "planted": len(SECRETS) + len(CREDENTIALS), "files": len(found["files"]),
            "found in events": len(set(found["events"])), "credentials found": len(set(found["credentials"])),
            "detect-secrets findings": len(found["detect-secrets"]),
            "found in content": len(set(found["content"]))}))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream-s", type=float, default=60.0)
    parser.add_argument("--slow", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--senders", type=int, default=200)
    parser.add_argument("--senders-s", type=float, default=20.0)
    parser.add_argument(
        "--spool-fsync",
        choices=["never", "always"],
        nargs="+",
        default=["never"],
        help="the senders row, once per policy: fsync every spooled batch before its 200 or not",
    )
    parser.add_argument("--kill-s", type=float, default=5.0, help="load before the SIGKILL")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["llm", "mcp", "slowloris", "senders", "killed", "secrets"],
        help="run only these rows",
    )
    args = parser.parse_args()
    wanted = set(args.only or ["llm", "mcp", "slowloris", "senders", "killed", "secrets"])
    rows = []
    if "llm" in wanted:
        rows.append(("endless stream (proxy llm)", endless_stream(args.stream_s)))
    if "mcp" in wanted:
        rows.append(("endless stream (proxy mcp)", endless_stream(args.stream_s, "mcp")))
    if "slowloris" in wanted:
        rows.append(("slowloris (collect)", slowloris(args.slow, args.timeout)))
    if "senders" in wanted:
        for policy in args.spool_fsync:
            label = f"many senders (collect, spool fsync {policy})"
            rows.append((label, senders(args.senders, args.senders_s, policy)))
    if "killed" in wanted:
        rows.append(("SIGKILL + restart (collect)", killed(args.kill_s)))
    if "secrets" in wanted:
        rows += secret_scan()
    print(f"{'measurement':<28} figures")
    for name, row in rows:
        print(
            f"{name:<28} "
            + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
        )


if __name__ == "__main__":
    main()
