"""How much later a server wrapped by ``promcp proxy mcp`` answers ``initialize`` than the same server started bare
— the time a client such as ``codex exec`` (which does not wait for slow servers) gives a server before its first
turn. Issue 24's target: within 50 ms of the bare server.

Each round starts the server twice, bare and wrapped (``promcp proxy mcp --out TMP --run-id … -- SERVER``, as
``promcp record`` writes it into a client's config), in alternating order, back to back, so the machine's noise
hits both halves of a pair alike. Measured per start: from ``Popen`` to the ``initialize`` answer read on the
client's end of stdout; then ``notifications/initialized`` and ``tools/list`` are sent, their answer read, stdin
closed and the process waited for (the wrapped run's journal part is written, as in real use). Reported: the
median and 90th percentile of each, the median of the per-pair differences, and the ratio of the medians.

Servers: the npm ``@modelcontextprotocol/server-everything`` (node, the server of the Codex end-to-end test) and
a minimal Python MCP server (``tests/fault_servers/faulty.py``), whose fast start makes the proxy's own start-up
show.

Two reference rows: ``cat`` (a "server" that answers at once: what is left is the proxy's own start-up) and
``python floor`` (an interpreter that only copies lines, against bare ``cat``: what any Python wrapper costs on
this machine before it runs a line of promcp).

    .venv/bin/python tests/perf/bench_mcp_startup.py [--rounds 15] [--server everything|python|cat|all]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = REPO / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
SERVERS = {
    "everything": ["node", str(EVERYTHING)],
    "python": [sys.executable, str(REPO / "tests" / "fault_servers" / "faulty.py"), "sized"],
    "cat": ["cat"],  # answers at once (echoes the request back): the proxy's own start-up, nothing else
}
#: the floor of any Python wrapper: an interpreter that only copies lines (compared with bare ``cat``)
FLOOR = [
    sys.executable,
    "-c",
    "import sys\nfor line in sys.stdin: sys.stdout.write(line); sys.stdout.flush()",
]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def _line(obj: dict[str, object]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _read_answer(proc: subprocess.Popen[bytes], rid: int) -> None:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed stdout before answering request {rid}")
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("id") == rid:
            return


def one_start(command: list[str]) -> float:
    """Milliseconds from Popen to the ``initialize`` answer."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    proc.stdin.write(_line(INIT))
    proc.stdin.flush()
    _read_answer(proc, 1)
    took = (time.perf_counter() - start) * 1000
    proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    proc.stdin.write(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
    proc.stdin.flush()
    _read_answer(proc, 2)
    proc.stdin.close()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return took


def bench(name: str, rounds: int, out: Path) -> dict[str, object]:
    if name == "python floor":
        bare, wrapped = SERVERS["cat"], FLOOR
    else:
        bare = SERVERS[name]
        wrapped = [
            str(PROMCP),
            "proxy",
            "mcp",
            "--out",
            str(out),
            "--run-id",
            f"bench-{name}",
            "--name",
            name,
        ]
        wrapped += ["--", *bare]
    one_start(bare)  # warm the file cache for both
    one_start(wrapped)
    times: dict[str, list[float]] = {"bare": [], "wrapped": []}
    diffs: list[float] = []
    for i in range(rounds):
        order = ["bare", "wrapped"] if i % 2 == 0 else ["wrapped", "bare"]
        got = {kind: one_start(bare if kind == "bare" else wrapped) for kind in order}
        for kind, ms in got.items():
            times[kind].append(ms)
        diffs.append(got["wrapped"] - got["bare"])
    b, w = statistics.median(times["bare"]), statistics.median(times["wrapped"])
    return {
        "server": name,
        "bare_median": b,
        "bare_p90": _p90(times["bare"]),
        "wrapped_median": w,
        "wrapped_p90": _p90(times["wrapped"]),
        "added_median": statistics.median(diffs),
        "ratio": w / b,
    }


def _p90(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(0.9 * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--server", choices=["everything", "python", "cat", "all"], default="all")
    args = parser.parse_args()
    names = ["everything", "python", "cat", "python floor"] if args.server == "all" else [args.server]
    if "everything" in names and not EVERYTHING.exists():  # pragma: no cover
        sys.exit("server-everything is not installed (npm ci)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="promcp-bench-startup-") as tmp:
        for name in names:
            rows.append(bench(name, args.rounds, Path(tmp)))
    print(f"initialize answered, ms from spawn ({args.rounds} interleaved pairs, {os.cpu_count()} cores)")
    head = f"{'server':<14}{'bare median':>13}{'bare p90':>10}{'wrapped median':>16}{'wrapped p90':>13}"
    print(head + f"{'added (median of pairs)':>25}{'ratio':>8}")
    for r in rows:
        print(
            f"{r['server']:<14}{r['bare_median']:>13.1f}{r['bare_p90']:>10.1f}{r['wrapped_median']:>16.1f}"
            f"{r['wrapped_p90']:>13.1f}{r['added_median']:>25.1f}{r['ratio']:>8.2f}"
        )


if __name__ == "__main__":
    main()
