"""Benchmark: `promcp import` of a Claude Code corpus vs `json.loads` per line (and ccusage when installed).

    .venv/bin/python tests/perf/bench_import_corpus.py [--sessions 1331] [--rounds 2] [--big 10000]
        [--report-events 1000000]

(a) The corpus: the public Claude Code sessions of ../shared/data/exports copied with distinct ids
    (tests/perf/corpus_claude_code.py) into a temporary ``projects`` folder — 1,331 sessions ≈ 100 MB by default.
    Rows, each in its own process, interleaved over --rounds: ``json.loads`` of every line of every file;
    ``promcp import`` into a fresh dataset (the CLI, as a user runs it); the same import again (unchanged folder);
    ``promcp import --content none`` (no text kept: what the secret scan of previews and content costs);
    ``promcp import`` after 10 sessions grew; ``ccusage session --json`` (17.2.1, a devDependency in package.json:
    node_modules/.bin, or on PATH; the row says so when it is absent) and promcp's ratio to it per round. Wall time, CPU time (user +
    sys of the child), peak RSS (the child's ru_maxrss), Parquet files written, and the token totals of the dataset
    next to an independent tally (final usage per message id, read straight from the JSONL).
(b) --big N sessions imported in one call, the wall and CPU time per thousand files printed as they pass (flat =
    linear).
(d) --compact N sessions imported one run each (the layout before batching), then ``promcp compact``: time, files
    before and after, token totals before and after.
(e) --overlap N: the corpus in one import next to its two halves imported by two processes at once (what
    overlapping the import's work across the two cores could gain at best, on this machine at this load).
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
t0, c0 = time.perf_counter(), time.process_time()
state = {"n": 0}
def tick(done, convs):
    if convs and convs % 1000 == 0 and convs != state["n"]:
        state["n"] = convs
        marks.append((convs, time.perf_counter() - t0, time.process_time() - c0))
s = import_path(sys.argv[1], sys.argv[2], progress=tick)
marks.append((s.imported, time.perf_counter() - t0, time.process_time() - c0))
print(" ".join(f"{n}:{t:.3f}:{c:.3f}" for n, t, c in marks))
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
    """Input and output tokens of the dataset's LLM calls, read through promcp's loader (run files and packs)."""
    from promcp.analysis import load_table

    t = load_table(out, columns=["stage", "tokens_in", "tokens_out"]).to_pydict()
    tin = tout = 0
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
            (  # what keeping and redacting the text costs: no content, no previews, so no secret scan
                "promcp import --content none (fresh dataset)",
                [
                    *(PY, "-m", "promcp.cli", "import", str(folder)),
                    *("--out", str(tmp / f"none{r}"), "--quiet", "--content", "none"),
                ],
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
    print(
        f"\n(a) {sessions} sessions, {size / 1e6:.1f} MB, {rounds} interleaved round(s), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
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
        print(
            "| ccusage session --json | not in node_modules (`npm install`: a devDependency): skipped | | | | |"
        )
    else:  # the target: promcp import within 2x ccusage on the same folder
        ours, theirs = rows["promcp import (fresh dataset)"], rows["ccusage session --json"]
        for what in ("cpu", "wall"):
            ratios = [float(a[what]) / float(b[what]) for a, b in zip(ours, theirs, strict=True)]  # type: ignore[arg-type]
            print(f"promcp import / ccusage, {what} (per round): " + ", ".join(f"{x:.2f}" for x in ratios))
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
    print(f"load average {os.getloadavg()[0]:.1f}; CPU: the importing process's own (user + sys)")
    print(
        "| sessions | wall s | CPU s | wall ms per session in this thousand | CPU ms per session in this thousand |"
    )
    print("|---|---|---|---|---|")
    last_n, last_t, last_c = 0, 0.0, 0.0
    for n, t, c in marks:
        n_i, t_f, c_f = int(n), float(t), float(c)
        if n_i > last_n:
            per = 1000 / (n_i - last_n)
            print(
                f"| {n_i:,} | {t_f:.1f} | {c_f:.1f} | {(t_f - last_t) * per:.2f} | {(c_f - last_c) * per:.2f} |"
            )
            last_n, last_t, last_c = n_i, t_f, c_f
    shutil.rmtree(folder, ignore_errors=True)


ONE_RUN_EACH = """
import sys
from promcp.collectors import import_path
s = import_path(sys.argv[1], sys.argv[2], batch_events=1)  # a run per session: the layout before batching
print(s.imported)
"""


def bench_compact(tmp: Path, sessions: int) -> None:
    """(d) ``promcp compact`` of the corpus imported one run per session (what imports wrote before batching)."""
    folder = tmp / "compact-src"
    corpus.build(folder, sessions)
    out = tmp / "one-run-each"
    child = Child()
    made = child.measure([PY, "-c", ONE_RUN_EACH, str(folder), str(out)])
    before_files = len(list(out.rglob("*.parquet"))) + len(list((out / "_content").glob("*.pq")))
    before = dataset_totals(out)
    res = child.measure([PY, "-m", "promcp.cli", "compact", str(out)])
    after_files = len(list(out.rglob("*.parquet"))) + len(list((out / "_content").glob("*.pq")))
    after = dataset_totals(out)
    print(f"\n(d) {sessions} sessions imported one run each ({made['wall']:.1f} s), then `promcp compact`")
    print("| | wall s | CPU s | peak RSS MB | Parquet files (events + content) |")
    print("|---|---|---|---|---|")
    print(
        f"| promcp compact | {res['wall']:.2f} | {res['cpu']:.2f} | {res['rss']:.0f} | {before_files:,} → {after_files:,} |"
    )
    print(f"says: {str(res['out']).strip()}")
    print(
        f"totals before {before[0]:,} / {before[1]:,}, after {after[0]:,} / {after[1]:,}; equal: {before == after}"
    )
    shutil.rmtree(folder, ignore_errors=True)


def bench_overlap(tmp: Path, sessions: int, rounds: int) -> None:
    """(e) Would spreading the import over the two cores pay? The corpus in one ``promcp import`` next to its two
    halves imported by two processes at once (the best any overlap of parsing, tokenizing and writing could do),
    interleaved over ``rounds``. The machine is shared: the second core is only free when nobody else uses it."""
    half = sessions // 2
    whole, a, b = tmp / "ov-whole", tmp / "ov-a", tmp / "ov-b"
    corpus.build(whole, 2 * half)
    corpus.build(a, half)
    corpus.build(b, half, first=half)
    one: list[float] = []
    two: list[float] = []
    cpu_two: list[float] = []
    for r in range(rounds):
        t0 = time.perf_counter()
        Child().measure(
            [PY, "-m", "promcp.cli", "import", str(whole), "--out", str(tmp / f"ov1-{r}"), "--quiet"]
        )
        one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                [PY, "-m", "promcp.cli", "import", str(src), "--out", str(tmp / f"ov2-{r}-{k}"), "--quiet"]
            )
            for k, src in enumerate((a, b))
        ]
        cpu = 0.0
        for proc in procs:
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status):
                raise SystemExit("a half import failed")
            cpu += usage.ru_utime + usage.ru_stime
        two.append(time.perf_counter() - t0)
        cpu_two.append(cpu)
    load = os.getloadavg()[0]
    print(
        f"\n(e) {2 * half} sessions: one process vs two halves at once, {rounds} round(s), load average {load:.1f}"
    )
    print("| | wall s | CPU s (both) |")
    print("|---|---|---|")
    print(f"| one `promcp import` | {min(one):.2f}–{max(one):.2f} | |")
    print(f"| two imports of half each, at once | {min(two):.2f}–{max(two):.2f} | {min(cpu_two):.2f} |")
    print(f"best wall ratio two/one: {min(two) / min(one):.2f} (1.00 = the second core gives nothing)")


def bench_report(tmp: Path, n_events: int, dataset: Path | None = None) -> None:
    from bench_store import DUCKDB_PHASES

    from promcp.events import Topology
    from promcp.recorder import Recorder
    from tests import synth

    root = dataset or tmp / "report"
    recs: dict[str, Recorder] = {}
    events = () if dataset else synth.events(n_events // 7 + 1, topologies=(Topology.L_CUST, Topology.C_CUST))
    for i, e in enumerate(events):
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
        "`promcp report --help` (the command's start-up)": [PY, "-m", "promcp.cli", "report", "--help"],
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
    walls: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(3):  # interleaved: a load spike hits every row alike
        for name, cmd in rows.items():
            m = child.measure(cmd)
            walls[name].append(float(m["wall"]))  # type: ignore[arg-type]
            cpus[name].append(float(m["cpu"]))  # type: ignore[arg-type]
    base, base_cpu = (
        min(walls["DuckDB phase query, fresh process"]),
        min(cpus["DuckDB phase query, fresh process"]),
    )
    print(
        f"\n(c) {n_events:,} synthetic events, best of 3 interleaved fresh processes each, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("| | wall s | × DuckDB (wall) | CPU s | × DuckDB (CPU) |")
    print("|---|---|---|---|---|")
    for name in rows:
        w, c = min(walls[name]), min(cpus[name])
        print(f"| {name} | {w:.2f} | {w / base:.2f} | {c:.2f} | {c / base_cpu:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=corpus.sessions_for_mb(100))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--big", type=int, default=10_000, help="sessions for the per-thousand table (0: skip)")
    ap.add_argument("--report-events", type=int, default=1_000_000, help="0: skip the report table")
    ap.add_argument(
        "--report-dataset",
        type=Path,
        default=None,
        help="an existing dataset for the report table (default: --report-events synthetic events, ~3 min)",
    )
    ap.add_argument(
        "--overlap", type=int, default=1331, help="sessions for the two-core headroom table (0: skip)"
    )
    ap.add_argument(
        "--compact", type=int, default=1331, help="sessions imported one run each, then compacted (0: skip)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="promcp-corpus-") as tmp:
        if args.sessions:
            bench_corpus(Path(tmp), args.sessions, args.rounds)
        if args.big:
            bench_big(Path(tmp), args.big)
        if args.compact:
            bench_compact(Path(tmp), args.compact)
        if args.overlap:
            bench_overlap(Path(tmp), args.overlap, args.rounds)
        if args.report_events:
            bench_report(Path(tmp), args.report_events, args.report_dataset)


if __name__ == "__main__":
    main()
