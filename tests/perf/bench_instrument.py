"""Median stdio tools/call round trip with and without promcp.instrument(), on 1 KB and 10 KB results.

One process, one server per mode, measured in the same run so the ratio is meaningful on a shared machine:
modes are interleaved in rounds (bare, instrumented, bare, ...) and each round does CALLS calls after a warm-up.
Run: ``.venv/bin/python tests/perf/bench_instrument.py [calls_per_round] [rounds]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

import promcp

SERVER = '''
from mcp.server.mcpserver import MCPServer
mcp = MCPServer("blob")
@mcp.tool()
def blob(n: int) -> str:
    """Return n bytes of text."""
    return ("lorem ipsum dolor sit amet " * (n // 27 + 1))[:n]
mcp.run("stdio")
'''


async def measure(server: Path, size: int, calls: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[str(server)])
    times: list[float] = []
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        for _ in range(20):
            await s.call_tool("blob", {"n": size})
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            await s.call_tool("blob", {"n": size})
            times.append((time.perf_counter_ns() - t0) / 1e6)
    return times


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as tmp:
        server = Path(tmp) / "blob_server.py"
        server.write_text(SERVER)
        rows = []
        for size in (1024, 10240):
            bare: list[float] = []
            inst: list[float] = []
            for _ in range(rounds):
                bare += anyio.run(measure, server, size, calls)
                promcp.instrument(Path(tmp) / "traces")
                try:
                    inst += anyio.run(measure, server, size, calls)
                finally:
                    promcp.uninstrument()
            b, i = statistics.median(bare), statistics.median(inst)
            rows.append((size, b, i, i / b))
    print(f"{calls} calls x {rounds} rounds per mode, after 20 warm-up calls per round")
    print("| result | bare median (ms) | instrumented median (ms) | ratio |")
    print("|---|---|---|---|")
    for size, b, i, ratio in rows:
        print(f"| {size // 1024} KB | {b:.3f} | {i:.3f} | {ratio:.3f}x |")


if __name__ == "__main__":
    main()
