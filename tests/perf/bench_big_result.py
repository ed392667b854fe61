"""Benchmark: memory and time of one huge tool result through ``promcp run`` (issue 17, defect 7).

A real stdio MCP server (written to a temporary file, mcp SDK) has one tool that returns N MB of text (lines of
80 characters); the LLM is the OpenAI wire stub on 127.0.0.1 (tests/stubs/llm_http.py), which calls the tool once
and then answers, with a 128k context window so the host counts the result and records the overflow as a real
client would. Each size runs ``promcp run`` in its own process (sizes interleaved over the repeats); peak memory is
that process's ``ru_maxrss`` (the server and the stub are other processes). The table shows peak RSS, the growth
over the 0 MB run of the same repeat, that growth per byte of result, and wall time.
Usage: .venv/bin/python tests/perf/bench_big_result.py [--mb 0 10 50] [--repeat 1] [-- extra promcp run args]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.stubs.llm_http import Reply, StubServer, openai_text, openai_tool_call  # noqa: E402

SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("blob", log_level="WARNING")
    LINE = "the quick brown fox jumps over the lazy dog, 0123456789; tokens and bytes here\\n"


    @mcp.tool()
    def blob(mb: int) -> str:
        """Return about mb megabytes of text."""
        return LINE * (mb * 1_000_000 // len(LINE))


    if __name__ == "__main__":
        mcp.run("stdio")
''')

BENCH = """
name: big-result
llm:
  backend: openai
  model: gpt-4o
  context_window: 128000
policy:
  tool_timeout_s: 900
servers:
  blob:
    command: python
    args: [{server}]
tasks:
  - id: big
    prompt: "Fetch the blob."
    servers: [blob]
"""

CHILD = r"""
import json, resource, sys, time
from promcp.cli import main
t = time.perf_counter()
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "seconds": time.perf_counter() - t,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_once(tmp: Path, bench: Path, mb: int, extra: list[str]) -> dict[str, float]:
    replies = [Reply(200, openai_tool_call("blob", json.dumps({"mb": mb}))), Reply(200, openai_text("Done."))]
    out = tmp / f"out-{mb}"
    with StubServer(replies) as stub:
        argv = ["run", "--topology", "c-cust", "--base-url", f"{stub.url}/v1", "--out", str(out), *extra]
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, *argv, str(bench)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"OPENAI_API_KEY": "sk-bench-not-a-key", "PATH": "/usr/bin:/bin", "COLUMNS": "120"},
        )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"promcp run failed for {mb} MB:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, nargs="+", default=[0, 10, 50])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("extra", nargs="*", help="extra arguments for promcp run (after --)")
    args = ap.parse_args()
    sizes = sorted(set([0, *args.mb]))
    results: dict[int, list[dict[str, float]]] = {mb: [] for mb in sizes}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        server = tmp / "blob_server.py"
        server.write_text(SERVER)
        bench = tmp / "bench.yaml"
        bench.write_text(BENCH.format(server=server))
        for _ in range(args.repeat):
            for mb in sizes:  # interleaved: every repeat runs each size once
                results[mb].append(run_once(tmp, bench, mb, args.extra))
    base = statistics.median(r["maxrss_kb"] for r in results[0]) / 1024
    table = Table(title=f"one tool result through promcp run (median of {args.repeat})")
    for col in ("result MB", "peak RSS MB", "growth MB", "growth / result", "wall s"):
        table.add_column(col, justify="right")
    for mb in sizes:
        rss = statistics.median(r["maxrss_kb"] for r in results[mb]) / 1024
        wall = statistics.median(r["seconds"] for r in results[mb])
        ratio = f"{(rss - base) / mb:.2f}×" if mb else "—"
        table.add_row(str(mb), f"{rss:.0f}", f"{rss - base:.0f}", ratio, f"{wall:.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
