"""Added latency of ``promcp proxy mcp`` per ``tools/call`` round trip, stdio and streamable HTTP, against the same
client talking to the same server directly — every condition in one run, interleaved, paired.

Server: ``tests/fault_servers/faulty.py sized`` (an mcp SDK server whose ``lookup(key)`` returns ``key`` bytes of
text): over stdio (one process for the direct session, one behind ``promcp proxy mcp -- …``) and over streamable
HTTP (one process; the direct session and the one through ``promcp proxy mcp --upstream …`` talk to it). The
client is the mcp SDK's ``ClientSession``; the four sessions are open at once. Each round runs every condition
(transport × result size) once, in a shuffled order, and each condition as a *pair*: direct then proxied, or the
other way round (alternating), back to back — so the machine's noise hits both halves of a pair alike. Reported
per condition: median round trip direct and proxied, the **median of the per-pair differences** with a 95 %
bootstrap interval (resampling pairs), and the ratio of the medians.

One more measurement, in the same rounds: the added **time to the first byte** of a streamed HTTP response — a
raw ``httpx2`` client posting ``tools/call`` (1 KB result, answered as an SSE stream) to the server directly and
through the proxy, time from sending to the first body byte.

Two reference rows put the HTTP figure in context, same rounds, same pairing, 1 KB: a **bare TCP relay** (an asyncio
byte pump in its own process, TCP_NODELAY, no HTTP parsing: the floor of any proxy process on this machine) and the
**proxy core forwarding only** (``promcp.proxy._http.ReverseProxy`` without an observer).

Between rounds the client pauses ``--gap-ms`` (default 60 ms), as an agent's LLM turn does between two tool
calls: the proxies count tokens while idle (``Recorder.emit_later``), as they do in real use.

Targets (issue 12): at 1 KB, added ≤ 0.3 ms or ≤ 1.10×, whichever is larger; first byte ≤ 1 ms added.

    .venv/bin/python tests/perf/bench_proxy.py [--rounds 500] [--gap-ms 60] [--sizes 1024,102400]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2 as httpx
import numpy as np
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs when run as a script

from tests.stubs.ports import free_port, wait_port

REPO = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, str(REPO / "tests" / "fault_servers" / "faulty.py"), "sized"]
PROMCP = [sys.executable, "-m", "promcp.cli"]
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def serve_relay(target: int, port: int) -> None:
    """The floor: a bare asyncio TCP relay (what any proxy process costs before it reads a byte)."""

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        for w in (writer, up_writer):
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    async def main() -> None:
        server = await asyncio.start_server(relay, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(main())


def serve_core(upstream: str, port: int) -> None:
    """The proxy core forwarding only (no observer, no recorder)."""
    from promcp.proxy._http import ReverseProxy

    asyncio.run(ReverseProxy(upstream, port=port, read_timeout_s=3600.0).serve_until(asyncio.Event()))


@contextlib.contextmanager
def _process(command: list[str], port: int) -> Iterator[None]:
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.asynccontextmanager
async def _http_session(url: str) -> AsyncIterator[ClientSession]:
    client = httpx.AsyncClient(timeout=httpx.Timeout(30, read=300))
    async with (
        streamable_http_client(url, http_client=client, max_sse_event_size=None) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        yield s


@contextlib.asynccontextmanager
async def _stdio_session(command: list[str]) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(StdioServerParameters(command=command[0], args=command[1:])) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        yield s


class RawStream:
    """A raw keep-alive HTTP client on one MCP session, timing the first byte of a ``tools/call`` answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=30)
        self.headers = dict(ACCEPT)
        self.ids = iter(range(1, 1 << 30))

    async def open(self) -> None:
        init = {
            "jsonrpc": "2.0",
            "id": next(self.ids),
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        resp = await self.client.post(self.url, json=init, headers=self.headers)
        self.headers["mcp-session-id"] = resp.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-11-25"
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.client.post(self.url, json=done, headers=self.headers)

    async def first_byte_ms(self, size: int) -> float:
        call = {
            "jsonrpc": "2.0",
            "id": next(self.ids),
            "method": "tools/call",
            "params": {"name": "lookup", "arguments": {"key": str(size)}},
        }
        body = json.dumps(call).encode()
        start = time.perf_counter()
        async with self.client.stream("POST", self.url, content=body, headers=self.headers) as resp:
            first: float | None = None
            async for _ in resp.aiter_raw():
                if first is None:
                    first = time.perf_counter()
        assert first is not None
        return (first - start) * 1000

    async def aclose(self) -> None:
        await self.client.aclose()


async def _call(session: ClientSession, size: int) -> float:
    start = time.perf_counter()
    res = await session.call_tool("lookup", {"key": str(size)})
    elapsed = (time.perf_counter() - start) * 1000
    assert len(res.content[0].text) == size  # type: ignore[union-attr]
    return elapsed


RELAY, CORE = "HTTP, bare asyncio relay", "HTTP, proxy core forwarding only"
SOCAT = "HTTP, socat relay (C)"


def _socat(target: int, port: int) -> list[str] | None:
    """A byte relay written in C (``socat``, when installed: ``apt-get install socat``): the floor of any proxy hop."""
    import shutil

    exe = shutil.which("socat")
    if exe is None:
        return None
    return [
        exe,
        f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,nodelay",
        f"TCP:127.0.0.1:{target},nodelay",
    ]


async def bench(
    rounds: int, sizes: list[int], gap_s: float, out: Path
) -> dict[str, list[tuple[float, float]]]:
    http_port, proxy_port, relay_port, core_port = free_port(), free_port(), free_port(), free_port()
    socat_port = free_port()
    socat = _socat(http_port, socat_port)
    proxy_cmd = [*PROMCP, "proxy", "mcp", "--out", str(out), "--run-id"]
    stdio_proxied = [*proxy_cmd, "bench-stdio", "--", *SERVER]
    http_proxied = [
        *(*proxy_cmd, "bench-http", "--upstream", f"http://127.0.0.1:{http_port}/mcp"),
        *("--listen", f"127.0.0.1:{proxy_port}"),
    ]
    direct_url, proxied_url = f"http://127.0.0.1:{http_port}/mcp", f"http://127.0.0.1:{proxy_port}/mcp"
    me = [sys.executable, __file__]
    pairs: dict[str, list[tuple[float, float]]] = {}
    with (
        _process([*SERVER, "--http", str(http_port)], http_port),
        _process(http_proxied, proxy_port),
        _process([*me, "--serve-relay", str(http_port), str(relay_port)], relay_port),
        _process([*me, "--serve-core", direct_url, str(core_port)], core_port),
        _process(socat, socat_port) if socat else contextlib.nullcontext(),
    ):
        async with (
            _stdio_session(SERVER) as stdio_d,
            _stdio_session(stdio_proxied) as stdio_p,
            _http_session(direct_url) as http_d,
            _http_session(proxied_url) as http_p,
            _http_session(f"http://127.0.0.1:{relay_port}/mcp") as relay_p,
            _http_session(f"http://127.0.0.1:{core_port}/mcp") as core_p,
            contextlib.AsyncExitStack() as extra,
        ):
            raw_d, raw_p = RawStream(direct_url), RawStream(proxied_url)
            raw_relay = RawStream(f"http://127.0.0.1:{relay_port}/mcp")
            raw_core = RawStream(f"http://127.0.0.1:{core_port}/mcp")
            raws = {"first byte": raw_p, f"first byte {RELAY}": raw_relay, f"first byte {CORE}": raw_core}
            if socat:
                raws[f"first byte {SOCAT}"] = RawStream(f"http://127.0.0.1:{socat_port}/mcp")
            for raw in (raw_d, *raws.values()):
                await raw.open()
            sessions = {
                "stdio": (stdio_d, stdio_p),
                "streamable HTTP": (http_d, http_p),
                RELAY: (http_d, relay_p),
                CORE: (http_d, core_p),
            }
            if socat:
                socat_p = await extra.enter_async_context(_http_session(f"http://127.0.0.1:{socat_port}/mcp"))
                sessions[SOCAT] = (http_d, socat_p)
            refs = (RELAY, CORE, SOCAT)
            conditions = [(t, s) for t in sessions for s in (sizes if t not in refs else sizes[:1])]
            for _ in range(20):  # warm-up: imports, connections, the proxies' tokenizers
                for t, s in conditions:
                    for session in sessions[t]:
                        await _call(session, s)
                for raw in (raw_d, *raws.values()):
                    await raw.first_byte_ms(1024)
            await asyncio.sleep(1.0)
            rng = random.Random(0)
            for i in range(rounds):
                order = [*conditions, *((name, 1024) for name in raws)]
                rng.shuffle(order)
                for t, s in order:
                    if t in raws:
                        first = (raw_d.first_byte_ms, raws[t].first_byte_ms)
                        if i % 2:
                            p = await first[1](s)
                            d = await first[0](s)
                        else:
                            d = await first[0](s)
                            p = await first[1](s)
                    else:
                        direct, proxied = sessions[t]
                        if i % 2:
                            p = await _call(proxied, s)
                            d = await _call(direct, s)
                        else:
                            d = await _call(direct, s)
                            p = await _call(proxied, s)
                    pairs.setdefault(f"{t}|{s}", []).append((d, p))
                if gap_s:
                    await asyncio.sleep(gap_s)
            for raw in (raw_d, *raws.values()):
                await raw.aclose()
    return pairs


def _ci(diffs: np.ndarray, resamples: int = 2000) -> tuple[float, float]:
    """95 % bootstrap percentile interval of the median of ``diffs`` (pairs resampled)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(diffs), size=(resamples, len(diffs)))
    medians = np.median(diffs[idx], axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--sizes", default="1024,102400")
    ap.add_argument("--gap-ms", type=float, default=60.0, help="pause between rounds (an LLM turn)")
    ap.add_argument("--serve-relay", nargs=2, type=int, metavar=("TARGET", "PORT"), help=argparse.SUPPRESS)
    ap.add_argument("--serve-core", nargs=2, metavar=("URL", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_relay:
        serve_relay(*args.serve_relay)
        return 0
    if args.serve_core:
        serve_core(args.serve_core[0], int(args.serve_core[1]))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        pairs = asyncio.run(bench(args.rounds, sizes, args.gap_ms / 1000, Path(tmp)))
        took = time.monotonic() - started
    cores = os.cpu_count()
    print(
        f"{args.rounds} rounds, pairs interleaved, {args.gap_ms:g} ms between rounds; {took:.0f} s; "
        f"load average before {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on {cores} cores\n"
    )
    print(
        "| what | result | pairs | direct median | proxied median | added: median of pair differences "
        "[95 % CI] | ratio | target | met |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for key, rows in pairs.items():
        what, size = key.split("|")
        d = np.array([r[0] for r in rows])
        p = np.array([r[1] for r in rows])
        diffs = p - d
        added = float(np.median(diffs))
        low, high = _ci(diffs)
        dm, pm = statistics.median(d), statistics.median(p)
        if what == "first byte":
            target, label = 1.0, "≤ 1 ms"
            what = "first byte, streamable HTTP (SSE)"
        elif what.startswith("first byte "):
            target, label = float("inf"), "(reference)"
            what = f"first byte, {what.removeprefix('first byte ')}"
        elif what in (RELAY, CORE, SOCAT):
            target, label = float("inf"), "(reference)"
            what = f"tools/call, {what}"
        else:
            target = max(0.3, 0.10 * dm)
            label = f"≤ {target:.2f} ms"
            what = f"tools/call, {what}"
        met = "yes" if high <= target else ("yes (median)" if added <= target else "no")
        met = "—" if target == float("inf") else met
        print(
            f"| {what} | {int(size) / 1024:g} KB | {len(rows)} | {dm:.3f} | {pm:.3f} "
            f"| {added:+.3f} [{low:+.3f}, {high:+.3f}] | {pm / dm:.2f}× | {label} | {met} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
