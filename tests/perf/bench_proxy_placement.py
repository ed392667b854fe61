"""Where the HTTP proxy's first-byte overhead comes from: CPU placement and CPU per request.

For each placement (which CPU the client, the MCP server and the proxies run on, set with ``os.sched_setaffinity``),
starts ``tests/fault_servers/faulty.py sized`` over streamable HTTP, the proxy core forwarding only
(``promcp.proxy._http.ReverseProxy``, no observer) and the bare TCP relay of ``bench_proxy.py``, then times the
first body byte of a ``tools/call`` answer (1 KB) directly and through each, in interleaved back-to-back pairs.
Prints the median added latency of each and the CPU each proxy process used per request (``/proc/<pid>/stat``,
user + system). Linux only.

    .venv/bin/python tests/perf/bench_proxy_placement.py [--pairs 400] [--placements 0:1:1,0:1:0,0:0:1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.* when run as a script

from tests.perf.bench_proxy import SERVER, RawStream
from tests.stubs.ports import free_port, wait_port

BENCH_PROXY = str(Path(__file__).with_name("bench_proxy.py"))


def _pinned(cpu: int) -> object:
    return lambda: os.sched_setaffinity(0, {cpu})


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _pairs(
    direct: RawStream, through: dict[str, RawStream], n: int, pids: dict[str, int]
) -> dict[str, object]:
    added: dict[str, list[float]] = {name: [] for name in through}
    warm = 20
    cpu0: dict[str, float] = {}
    for i in range(warm + n):
        if i == warm:
            cpu0 = {name: _cpu_s(pid) for name, pid in pids.items()}
        for name, stream in random.sample(list(through.items()), len(through)):
            if random.random() < 0.5:
                d = await direct.first_byte_ms(1024)
                p = await stream.first_byte_ms(1024)
            else:
                p = await stream.first_byte_ms(1024)
                d = await direct.first_byte_ms(1024)
            if i >= warm:
                added[name].append(p - d)
            await asyncio.sleep(0.06)
    cpu = {name: (_cpu_s(pid) - cpu0[name]) * 1000 / n for name, pid in pids.items()}
    return {"added": {k: statistics.median(v) for k, v in added.items()}, "cpu": cpu}


def placement(client: int, server: int, proxy: int, n: int) -> dict[str, object]:
    os.sched_setaffinity(0, {client})
    port, core_port, relay_port = free_port(), free_port(), free_port()
    upstream = f"http://127.0.0.1:{port}/mcp"
    procs = [
        subprocess.Popen([*SERVER, "--http", str(port)], preexec_fn=_pinned(server), stderr=subprocess.DEVNULL),  # type: ignore[arg-type]
        subprocess.Popen([sys.executable, BENCH_PROXY, "--serve-core", upstream, str(core_port)], preexec_fn=_pinned(proxy)),  # type: ignore[arg-type]
        subprocess.Popen([sys.executable, BENCH_PROXY, "--serve-relay", str(port), str(relay_port)], preexec_fn=_pinned(proxy)),  # type: ignore[arg-type]
    ]  # fmt: skip
    try:
        wait_port(port, core_port, relay_port)

        async def run() -> dict[str, object]:
            direct = RawStream(upstream)
            through = {
                "core": RawStream(f"http://127.0.0.1:{core_port}/mcp"),
                "relay": RawStream(f"http://127.0.0.1:{relay_port}/mcp"),
            }
            for s in (direct, *through.values()):
                await s.open()
            try:
                return await _pairs(direct, through, n, {"core": procs[1].pid, "relay": procs[2].pid})
            finally:
                for s in (direct, *through.values()):
                    await s.aclose()

        return asyncio.run(run())
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument(
        "--placements", default="0:1:1,0:1:0,0:0:1", help="client:server:proxy CPUs, comma-separated"
    )
    args = ap.parse_args()
    try:
        specs = [tuple(int(x) for x in spec.split(":")) for spec in args.placements.split(",")]
    except ValueError:
        ap.error(f"--placements {args.placements!r}: CLIENT:SERVER:PROXY CPU numbers, comma-separated")
    usable = os.sched_getaffinity(0)
    if any(len(spec) != 3 or not set(spec) <= usable for spec in specs):
        ap.error(f"--placements {args.placements!r}: three CPUs each, from {sorted(usable)}")
    print(f"{args.pairs} interleaved pairs per placement, first byte of a 1 KB tools/call answer; "
          f"load average before {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")  # fmt: skip
    print(
        "| client CPU | server CPU | proxy CPU | core added | relay added | core CPU / request | relay CPU / request |"
    )
    print("|---|---|---|---:|---:|---:|---:|")
    for client, server, proxy in specs:
        r = placement(client, server, proxy, args.pairs)
        added, cpu = r["added"], r["cpu"]
        assert isinstance(added, dict) and isinstance(cpu, dict)
        print(f"| {client} | {server} | {proxy} | {added['core']:+.2f} ms | {added['relay']:+.2f} ms | "
              f"{cpu['core']:.2f} ms | {cpu['relay']:.2f} ms |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
