"""Benchmark: `promcp import` of a Claude Code corpus vs `json.loads` per line (and ccusage when installed).

    .venv/bin/python tests/perf/bench_import_corpus.py [--sessions 1331] [--rounds 2] [--big 10000]
        [--report-events 1000000]

(a) The corpus: the public Claude Code sessions of ../shared/data/exports copied with distinct ids
    (tests/perf/corpus_claude_code.py) into a temporary ``projects`` folder — 1,331 sessions ≈ 100 MB by default.
    Rows, each in its own process, interleaved over --rounds: ``json.loads`` of every line of every file;
    ``promcp import`` into a fresh dataset (the CLI, as a user runs it); the same import again (unchanged folder);
    ``promcp import`` after 10 sessions grew; ``ccusage session --json`` when ``ccusage`` is on PATH or in
    node_modules/.bin (not a dependency of promcp: the row says so when it is absent). Wall time, CPU time (user +
    sys of the child), peak RSS (the child's ru_maxrss), Parquet files written, and the token totals of the dataset
    next to an independent tally (final usage per message id, read straight from the JSONL).
(b) --big N sessions imported in one call, the time per thousand files printed as they pass (flat = linear).
(c) --report-events N synthetic events (tests/synth.py): a fresh-process ``promcp report`` and ``--section
    phases`` next to a fresh-process DuckDB query of the same phase table (tests/perf/bench_store.py's SQL).
The machine is shared: wall times move with its load, CPU times less so; ratios are from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import corpus_claude_code as corpus  # noqa: E402

PY = sys.executable

JSON_LOADS = """
import json, sys
from pathlib import Path
n = 0
for p in sorted(Path(sys.argv[1]).rglob("*.jsonl")):
    with p.open("rb") as fh:
        for line in fh:
            if line.strip():
                json.loads(line)
                n += 1
print(n)
"""

BIG = """
import sys, time
from promcp.collectors import import_path
files = sorted(__import__("pathlib").Path(sys.argv[1]).rglob("*.jsonl"))
marks = []
t0 = time.perf_counter()
state = {"n": 0}
def tick(done, convs):
    if convs and convs % 1000 == 0 and convs != state["n"]:
        state["n"] = convs
        marks.append((convs, time.perf_counter() - t0))
s = import_path(sys.argv[1], sys.argv[2], progress=tick)
marks.append((s.imported, time.perf_counter() - t0))
print(" ".join(f"{n}:{t:.3f}" for n, t in marks))
"""


class Child:
    """Wall, CPU and peak RSS of one child process alone (``os.wait4``)."""

    def measure(self, cmd: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        out = err = proc.stdout.read()  # type: ignore[union-attr]  # one pipe: it cannot fill while we wait
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd[:5])} failed ({proc.returncode}): {err.decode()[-2000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return {"wall": wall, "cpu": cpu, "rss": usage.ru_maxrss / 1024, "out": out.decode()}


def tally(folder: Path) -> tuple[int, int]:
    """Input (with cache reads and writes) and output tokens: the final usage of every message id."""
    final: dict[str, tuple[int, int]] = {}
    for p in folder.rglob("*.jsonl"):
        for raw in p.read_bytes().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            msg = line.get("message") if isinstance(line, dict) else None
            if not isinstance(msg, dict) or not isinstance(msg.get("usage"), dict) or line.get("isSidechain"):
                continue
            u = msg["usage"]
            inp = sum(
                int(u.get(k) or 0)
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            out = int(u.get("output_tokens") or 0)
            key = f"{line.get('sessionId')}:{msg.get('id') or line.get('uuid')}"
            if key not in final or out >= final[key][1]:
                final[key] = (inp, out)
    return sum(i for i, _ in final.values()), sum(o for _, o in final.values())


def dataset_totals(out: Path) -> tuple[int, int]:
    import pyarrow.parquet as pq

    tin = tout = 0
    for path in out.glob("topology=*/run_id=*/events.parquet"):
        t = pq.read_table(path, columns=["stage", "tokens_in", "tokens_out"]).to_pydict()
        for stage, i, o in zip(t["stage"], t["tokens_in"], t["tokens_out"], strict=True):
            tin += (i or 0) if stage in ("S1", "S5") else 0
            tout += (o or 0) if stage in ("S2", "S6") else 0
    return tin, tout


def ccusage_cmd() -> list[str] | None:
    local = ROOT / "node_modules" / ".bin" / "ccusage"
    if local.exists():
        return [str(local)]
    found = shutil.which("ccusage")
    return [found] if found else None


def grow(folder: Path, n: int) -> None:
    """Append one more prompt and answer to ``n`` sessions (what a running Claude Code does)."""
    for k, p in enumerate(sorted(folder.rglob("*.jsonl"))[:n]):
        sid = p.stem
        line = {
            "parentUuid": None,
            "sessionId": sid,
            "type": "user",
            "uuid": f"grow-{k}",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "and one more"},
        }
        with p.open("a") as fh:
            fh.write(json.dumps(line) + "\n")


def bench_corpus(tmp: Path, sessions: int, rounds: int) -> None:
    folder = tmp / "projects"
    t0 = time.perf_counter()
    files, size = corpus.build(folder, sessions)
    print(
        f"corpus: {files} sessions, {size / 1e6:.1f} MB, built in {time.perf_counter() - t0:.1f} s ({folder})"
    )
    child = Child()
    cc = ccusage_cmd()
    rows: dict[str, list[dict[str, object]]] = {}
    parquet = 0
    for r in range(rounds):
        out = tmp / f"ds{r}"
        steps: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("json.loads per line", [PY, "-c", JSON_LOADS, str(folder)], None),
            (
                "promcp import (fresh dataset)",
                [PY, "-m", "promcp.cli", "import", str(folder), "--out", str(out), "--quiet"],
                None,
            ),
            (
                "promcp import again (unchanged)",
                [PY, "-m", "promcp.cli", "import", str(folder), "--out", str(out), "--quiet"],
                None,
            ),
        ]
        if cc:
            steps.append(
                (
                    "ccusage session --json",
                    [*cc, "session", "--json", "--offline"],
                    {"CLAUDE_CONFIG_DIR": str(tmp)},
                )
            )
        for name, cmd, env in steps:
            rows.setdefault(name, []).append(child.measure(cmd, env))
        parquet = len(list(out.rglob("*.parquet")))
        if r == 0:
            grow(folder, 10)
            rows.setdefault("promcp import after 10 sessions grew", []).append(
                child.measure([PY, "-m", "promcp.cli", "import", str(folder), "--out", str(out), "--quiet"])
            )
            truth = tally(folder)
            got = dataset_totals(out)
    print(f"\n(a) {sessions} sessions, {size / 1e6:.1f} MB, {rounds} interleaved round(s)")
    print("| | wall s | CPU s | MB/s (wall) | peak RSS MB | files written |")
    print("|---|---|---|---|---|---|")
    for name, ms in rows.items():
        walls = [float(m["wall"]) for m in ms]  # type: ignore[arg-type]
        cpus = [float(m["cpu"]) for m in ms]  # type: ignore[arg-type]
        rss = max(float(m["rss"]) for m in ms)  # type: ignore[arg-type]
        span = f"{min(walls):.2f}–{max(walls):.2f}" if len(walls) > 1 else f"{walls[0]:.2f}"
        cspan = f"{min(cpus):.2f}–{max(cpus):.2f}" if len(cpus) > 1 else f"{cpus[0]:.2f}"
        files_col = str(parquet) if name.startswith("promcp import (fresh") else "—"
        print(f"| {name} | {span} | {cspan} | {size / 1e6 / min(walls):.1f} | {rss:.0f} | {files_col} |")
    if not cc:
        print("| ccusage session --json | not installed (not a promcp dependency): row skipped | | | | |")
    print(
        f"\ntotals after the grown sessions: promcp input {got[0]:,} / output {got[1]:,}; "
        f"final usage per message id input {truth[0]:,} / output {truth[1]:,}; equal: {got == truth}"
    )


def bench_big(tmp: Path, sessions: int) -> None:
    folder = tmp / "big"
    files, size = corpus.build(folder, sessions)
    res = Child().measure([PY, "-c", BIG, str(folder), str(tmp / "bigds")])
    marks = [tuple(x.split(":")) for x in str(res["out"]).strip().splitlines()[-1].split()]
    print(
        f"\n(b) {files} sessions ({size / 1e6:.0f} MB) in one import: wall {res['wall']:.1f} s, CPU "
        f"{res['cpu']:.1f} s, peak RSS {res['rss']:.0f} MB, "
        f"{len(list((tmp / 'bigds').rglob('*.parquet')))} Parquet files"
    )
    print("| sessions | seconds | ms per session in this thousand |")
    print("|---|---|---|")
    last_n, last_t = 0, 0.0
    for n, t in marks:
        n_i, t_f = int(n), float(t)
        if n_i > last_n:
            print(f"| {n_i:,} | {t_f:.1f} | {(t_f - last_t) * 1000 / (n_i - last_n):.2f} |")
            last_n, last_t = n_i, t_f
    shutil.rmtree(folder, ignore_errors=True)


def bench_report(tmp: Path, n_events: int) -> None:
    from bench_store import DUCKDB_PHASES

    from promcp.events import Topology
    from promcp.recorder import Recorder
    from tests import synth

    root = tmp / "report"
    recs: dict[str, Recorder] = {}
    for i, e in enumerate(synth.events(n_events // 7 + 1, topologies=(Topology.L_CUST, Topology.C_CUST))):
        if i >= n_events:
            break
        rec = recs.get(e.run_id)
        if rec is None:
            rec = recs[e.run_id] = Recorder(root, topology=e.topology, run_id=e.run_id, fsync="never")
        rec.emit(e)
    for rec in recs.values():
        rec.close()
    glob = str(root / "topology=*" / "run_id=*" / "events.parquet")
    duck = f"import duckdb; c = duckdb.connect(); c.execute('SET threads = 2'); c.execute('''{DUCKDB_PHASES.format(glob=glob)}''').fetchall()"
    child = Child()
    rows = {
        "python -c 'import promcp.cli' (start-up)": [PY, "-c", "import promcp.cli"],
        "DuckDB phase query, fresh process": [PY, "-c", duck],
        "promcp report --section phases, fresh process": [
            PY,
            "-m",
            "promcp.cli",
            "report",
            str(root),
            "--section",
            "phases",
        ],
        "promcp report (all tables), fresh process": [PY, "-m", "promcp.cli", "report", str(root)],
    }
    results = {name: min(float(child.measure(cmd)["wall"]) for _ in range(2)) for name, cmd in rows.items()}
    base = results["DuckDB phase query, fresh process"]
    print(f"\n(c) {n_events:,} synthetic events, best of 2 fresh processes each")
    print("| | seconds | × DuckDB |")
    print("|---|---|---|")
    for name, secs in results.items():
        print(f"| {name} | {secs:.2f} | {secs / base:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=corpus.sessions_for_mb(100))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--big", type=int, default=10_000, help="sessions for the per-thousand table (0: skip)")
    ap.add_argument("--report-events", type=int, default=1_000_000, help="0: skip the report table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="promcp-corpus-") as tmp:
        if args.sessions:
            bench_corpus(Path(tmp), args.sessions, args.rounds)
        if args.big:
            bench_big(Path(tmp), args.big)
        if args.report_events:
            bench_report(Path(tmp), args.report_events)


if __name__ == "__main__":
    main()
