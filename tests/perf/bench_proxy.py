"""Added latency of ``promcp proxy mcp`` (stdio) per ``tools/call`` round trip, against the same client talking to
the same server directly — both sessions open at once, calls interleaved (direct then proxied, then the other way round, …) so the
machine's noise hits both alike.

The server is ``tests/fault_servers/faulty.py sized`` (an mcp SDK server whose ``lookup(key)`` returns ``key``
bytes of text); the client is the mcp SDK's ``ClientSession``. Prints a Markdown table (median and p90 round
trip, added time and ratio). Target (issue 12): at 1 KB, at most 0.3 ms or 1.10× added, whichever is larger.

    .venv/bin/python tests/perf/bench_proxy.py [--calls 300] [--sizes 1024,102400]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, str(REPO / "tests" / "fault_servers" / "faulty.py"), "sized"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(calls: int, sizes: list[int], out: Path) -> list[tuple[int, list[float], list[float]]]:
    proxied = [
        sys.executable,
        "-m",
        "promcp.cli",
        "proxy",
        "mcp",
        "--out",
        str(out),
        "--run-id",
        "bench",
        "--",
        *SERVER,
    ]
    results = []
    async with (
        stdio_client(StdioServerParameters(command=SERVER[0], args=SERVER[1:])) as (r1, w1),
        ClientSession(r1, w1) as direct,
        stdio_client(StdioServerParameters(command=proxied[0], args=proxied[1:])) as (r2, w2),
        ClientSession(r2, w2) as proxy,
    ):
        await direct.initialize()
        await proxy.initialize()
        for size in sizes:
            for session in (direct, proxy):  # warm-up
                for _ in range(20):
                    await session.call_tool("lookup", {"key": str(size)})
            d: list[float] = []
            p: list[float] = []
            for i in range(calls):
                pair = ((direct, d), (proxy, p))
                for session, sink in pair if i % 2 == 0 else pair[::-1]:  # alternate who goes first
                    t = time.perf_counter()
                    res = await session.call_tool("lookup", {"key": str(size)})
                    sink.append((time.perf_counter() - t) * 1000)
                    assert len(res.content[0].text) == size
            results.append((size, d, p))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--sizes", default="1024,102400")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(bench(args.calls, sizes, Path(tmp)))
    print(f"tools/call round trip, {args.calls} interleaved calls per size (ms)\n")
    print("| result | direct median | proxied median | added (median) | ratio | direct p90 | proxied p90 |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size, d, p in rows:
        dm, pm = statistics.median(d), statistics.median(p)
        print(
            f"| {size / 1024:g} KB | {dm:.3f} | {pm:.3f} | {pm - dm:+.3f} | {pm / dm:.2f}× "
            f"| {_pct(d, 0.9):.3f} | {_pct(p, 0.9):.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
