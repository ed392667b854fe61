"""How much later a server wrapped by ``promcp proxy mcp`` answers ``initialize`` than the same server started bare
— the time a client such as ``codex exec`` (which does not wait for slow servers) gives a server before its first
turn. Issue 24's target: within 50 ms of the bare server.

Each round starts the server twice, bare and wrapped (``promcp proxy mcp --out TMP --run-id … -- SERVER``, as
``promcp record`` writes it into a client's config), in alternating order, back to back, so the machine's noise
hits both halves of a pair alike. Measured per start: from ``Popen`` to the ``initialize`` answer read on the
client's end of stdout; then ``notifications/initialized`` and ``tools/list`` are sent, their answer read, stdin
closed and the process waited for, and for a wrapped start its recorder too (the frame journal gone and the run
merged, as in real use: no recorder of one round takes the CPU from the next). Reported: the
median and 90th percentile of each, the median of the per-pair differences, and the ratio of the medians. Every
start runs without ``PYTHONDONTWRITEBYTECODE``: promcp runs from compiled modules, as installed.

Servers: the npm ``@modelcontextprotocol/server-everything`` (node, the server of the Codex end-to-end test) and
a minimal Python MCP server (``tests/fault_servers/faulty.py``), whose fast start makes the proxy's own start-up
show.

Two reference rows: ``cat`` (a "server" that answers at once: what is left is the proxy's own start-up) and
``python floor`` (an interpreter that only copies lines, against bare ``cat``: what any Python wrapper costs on
this machine before it runs a line of promcp).

``--before TREE`` adds a third arm, interleaved in the same rounds: the server wrapped by the promcp of another
source tree (``PYTHONPATH=TREE``, e.g. a ``git worktree`` of the previous commit), so a change's before / after
comes from one run on one machine state.

    .venv/bin/python tests/perf/bench_mcp_startup.py [--rounds 15] [--server everything|python|cat|all]
        [--before TREE]
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


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every start: this one, without ``PYTHONDONTWRITEBYTECODE`` — an installed promcp runs from
    compiled modules (pip compiles them), so the warm-up start of each arm writes them and the measured ones use
    them (a tree run from source without them spends ~8 ms more compiling promcp's relay modules on every start)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **(extra or {})}


def _recorded(out: Path, timeout_s: float = 60.0) -> None:
    """Wait until every wrapped session's recorder has finished — its frame journal gone and the run merged (the
    parts folder gone): a recorder still loading its tokenizer, or merging the run into Parquet, would otherwise
    take the CPU from the next round's starts."""
    deadline = time.monotonic() + timeout_s
    while list(out.glob("_journal/*.parts")) and time.monotonic() < deadline:
        time.sleep(0.02)


def one_start(command: list[str], env: dict[str, str] | None = None, out: Path | None = None) -> float:
    """Milliseconds from Popen to the ``initialize`` answer."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
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
    if out is not None:
        _recorded(out)
    return took


def bench(name: str, rounds: int, out: Path, before: Path | None = None) -> dict[str, object]:
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
    arms: dict[str, tuple[list[str], dict[str, str], Path | None]] = {
        "bare": (bare, _child_env(), None),
        "wrapped": (wrapped, _child_env(), out),
    }
    if before is not None and name != "python floor":
        arms["before"] = (wrapped, _child_env({"PYTHONPATH": str(before)}), out)
    for command, env, folder in arms.values():  # warm the file cache (and compile promcp) for every arm
        one_start(command, env, folder)
    names = list(arms)
    times: dict[str, list[float]] = {kind: [] for kind in names}
    diffs: dict[str, list[float]] = {kind: [] for kind in names if kind != "bare"}
    for i in range(rounds):
        order = names[i % len(names) :] + names[: i % len(names)]  # each arm goes first in turn
        got = {kind: one_start(*arms[kind]) for kind in order}
        for kind, ms in got.items():
            times[kind].append(ms)
        for kind in diffs:
            diffs[kind].append(got[kind] - got["bare"])
    b = statistics.median(times["bare"])
    row: dict[str, object] = {"server": name, "bare_median": b, "bare_p90": _p90(times["bare"])}
    for kind in diffs:
        row[f"{kind}_median"] = statistics.median(times[kind])
        row[f"{kind}_p90"] = _p90(times[kind])
        row[f"{kind}_added"] = statistics.median(diffs[kind])
        row[f"{kind}_ratio"] = statistics.median(times[kind]) / b
    return row


def _p90(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(0.9 * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--server", choices=["everything", "python", "cat", "all"], default="all")
    parser.add_argument("--before", type=Path, metavar="TREE", help="also wrap with the promcp of this tree")
    args = parser.parse_args()
    names = ["everything", "python", "cat", "python floor"] if args.server == "all" else [args.server]
    if "everything" in names and not EVERYTHING.exists():  # pragma: no cover
        sys.exit("server-everything is not installed (npm ci)")
    if args.before is not None and not (args.before / "promcp" / "__init__.py").exists():
        sys.exit(f"--before {args.before}: not a promcp source tree (no promcp/__init__.py)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="promcp-bench-startup-") as tmp:
        for name in names:
            rows.append(bench(name, args.rounds, Path(tmp), args.before))
    arms = ["wrapped", "before"] if args.before is not None else ["wrapped"]
    print(f"initialize answered, ms from spawn ({args.rounds} interleaved rounds, {os.cpu_count()} cores,")
    print(f"load average {os.getloadavg()[0]:.1f} at the end; 'before': PYTHONPATH={args.before})")
    head = f"{'server':<14}{'arm':<9}{'median':>9}{'p90':>9}{'added (median of pairs)':>25}{'ratio':>8}"
    print(head)
    for r in rows:
        print(f"{r['server']:<14}{'bare':<9}{r['bare_median']:>9.1f}{r['bare_p90']:>9.1f}")
        for kind in arms:
            if f"{kind}_median" in r:
                print(
                    f"{'':<14}{kind:<9}{r[f'{kind}_median']:>9.1f}{r[f'{kind}_p90']:>9.1f}"
                    f"{r[f'{kind}_added']:>+25.1f}{r[f'{kind}_ratio']:>8.2f}"
                )


if __name__ == "__main__":
    main()
