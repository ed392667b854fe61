"""Backbone benchmarks (issue #2): token counting and the store/report path. Prints tables; asserts nothing.

    .venv/bin/python tests/perf/bench_store.py [--events 1000000] [--repeat 5]

(a) Counting the 221-tool catalog (../shared/data/catalogs/paper-tools-flat.json, each tool as the JSON a host puts
    in a prompt) under o200k_base and cl100k_base: raw ``tiktoken.encode_ordinary`` vs promcp cold (empty cache) vs
    promcp cached. Targets: cold ≥ 0.9× raw throughput; cached ≥ 50× faster than cold.
(b) N synthetic events (tests/synth.py): journal append rate through a real Recorder, finalize to Parquet, the full
    ``promcp report`` computation, and the same phase attribution written directly in DuckDB over the same Parquet.
    Targets: report ≤ 3 s for 1,000,000 events; ≤ 2× DuckDB.
Ratios are measured in one run (the machines are noisy); medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from promcp import tokenizers  # noqa: E402
from promcp.events import Topology  # noqa: E402
from promcp.recorder import Recorder  # noqa: E402
from tests import synth  # noqa: E402

CATALOG = ROOT.parent / "shared" / "data" / "catalogs" / "paper-tools-flat.json"
console = Console()


def median_time(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_tokenizers(repeat: int) -> None:
    if not CATALOG.is_file():
        console.print(f"[yellow]skipped (a): {CATALOG} not found[/]")
        return
    tools = json.loads(CATALOG.read_text())
    texts = [json.dumps({k: t[k] for k in ("name", "description", "inputSchema") if k in t}) for t in tools]
    nbytes = sum(len(t.encode()) for t in texts)
    table = Table(
        title=f"(a) counting the {len(texts)}-tool catalog ({nbytes / 1024:.0f} KiB), median of {repeat}"
    )
    for col in (
        "tokenizer",
        "tokens",
        "raw tiktoken ms",
        "promcp cold ms",
        "cold / raw throughput",
        "promcp cached ms",
        "cached speed-up vs cold",
    ):
        table.add_column(col, justify="right")
    for name in ("o200k_base", "cl100k_base"):
        tok = tokenizers.get(name)
        enc = tok.base.encoding  # type: ignore[attr-defined]
        total = sum(len(enc.encode_ordinary(t)) for t in texts)
        raw = median_time(lambda enc=enc: [enc.encode_ordinary(t) for t in texts], repeat)
        cold = median_time(lambda tok=tok: [tok.count(t) for t in texts], repeat, setup=tok.clear)
        tok.clear()
        for t in texts:
            tok.count(t)
        cached = median_time(lambda tok=tok: [tok.count(t) for t in texts], repeat)
        table.add_row(
            name,
            f"{total:,}",
            f"{raw * 1e3:.2f}",
            f"{cold * 1e3:.2f}",
            f"{raw / cold:.2f}×",
            f"{cached * 1e3:.3f}",
            f"{cold / cached:.0f}×",
        )
    console.print(table)


DUCKDB_PHASES = """
WITH ev AS (
  SELECT topology, run_id, task_id,
    CASE WHEN stage IN ('S1','S5') THEN 'context' WHEN stage = 'S2' THEN 'llm_plan'
         WHEN stage = 'S3' THEN 'tool_call' WHEN stage = 'S4' THEN 'tool_result' ELSE 'final_answer' END AS phase,
    CASE WHEN stage IN ('S1','S5') THEN tokens_in WHEN stage IN ('S2','S6') THEN tokens_out
         ELSE footprint_tokens END AS tokens,
    latency_ms
  FROM read_parquet('{glob}', hive_partitioning = false)
  WHERE task_id IS NOT NULL AND stage <> 'INIT' AND status <> 'context_overflow'
), per_task AS (
  SELECT topology, run_id, task_id, phase, sum(tokens) AS tokens, sum(latency_ms) AS latency
  FROM ev GROUP BY ALL
), tasks AS (SELECT DISTINCT topology, run_id, task_id FROM per_task),
grid AS (
  SELECT t.*, p.phase FROM tasks t CROSS JOIN (VALUES ('context'),('llm_plan'),('tool_call'),('tool_result'),
    ('final_answer')) p(phase)
), full_ AS (
  SELECT g.topology, g.run_id, g.task_id, g.phase, coalesce(pt.tokens, 0) AS tokens,
         coalesce(pt.latency, 0) AS latency
  FROM grid g LEFT JOIN per_task pt USING (topology, run_id, task_id, phase)
), totals AS (
  SELECT topology, run_id, task_id, 'total' AS phase, sum(tokens) AS tokens, sum(latency) AS latency
  FROM full_ GROUP BY ALL
), all_ AS (SELECT * FROM full_ UNION ALL SELECT * FROM totals)
SELECT topology, phase, avg(tokens) AS tokens_mean, stddev_samp(tokens) AS tokens_std,
       avg(latency) AS latency_mean, stddev_samp(latency) AS latency_std, count(*) AS tasks
FROM all_ GROUP BY ALL ORDER BY ALL
"""


def bench_store(n_events: int, repeat: int) -> None:
    import duckdb

    import promcp.analysis as pa
    from promcp.analysis.report import report

    with tempfile.TemporaryDirectory(prefix="promcp-bench-") as tmp:
        root = Path(tmp)
        # roughly 8 events per task in synth: generate tasks until n_events
        t0 = time.perf_counter()
        events = []
        gen = synth.events(n_events // 7 + 1, topologies=(Topology.L_CUST, Topology.C_CUST))
        for e in gen:
            events.append(e)
            if len(events) >= n_events:
                break
        t_gen = time.perf_counter() - t0
        rows = []
        recs = {}
        t0 = time.perf_counter()
        for e in events:
            rec = recs.get(e.run_id)
            if rec is None:
                rec = recs[e.run_id] = Recorder(root, topology=e.topology, run_id=e.run_id, fsync="interval")
            rec.emit(e)
        t_append = time.perf_counter() - t0
        t0 = time.perf_counter()
        for rec in recs.values():
            rec.close()
        t_final = time.perf_counter() - t0
        del events
        size = sum(p.stat().st_size for p in root.rglob("events.parquet"))
        rows.append(("generate events (Python objects)", t_gen, f"{n_events / t_gen:,.0f} ev/s"))
        rows.append(("journal append (fsync interval)", t_append, f"{n_events / t_append:,.0f} ev/s"))
        rows.append(("finalize journal → Parquet", t_final, f"{size / 2**20:.1f} MiB Parquet"))
        t_report = median_time(lambda: report(root), repeat)
        t_phase = median_time(lambda: pa.phase_attribution(pa.scan(root)), repeat)
        t_load = median_time(lambda: pa.load(root), max(1, repeat // 2))
        glob = str(root / "topology=*" / "run_id=*" / "events.parquet")
        con = duckdb.connect()
        con.execute("SET threads = 2")
        t_duck = median_time(lambda: con.execute(DUCKDB_PHASES.format(glob=glob)).fetchall(), repeat)
        rows.append(("promcp report (all tables, load included)", t_report, ""))
        rows.append(
            ("phase attribution (scan + table, as report)", t_phase, f"{t_phase / t_duck:.2f}× DuckDB")
        )
        rows.append(("same phase attribution in DuckDB SQL", t_duck, "1.00×"))
        rows.append(("promcp.analysis.load → pandas (all columns)", t_load, "for notebooks"))
        # the SQL above counts every task; the report leaves out incomplete ones (the generator's cut leaves one)
        ours = pa.phase_attribution(pa.load(root), include_incomplete=True)
        duck = con.execute(DUCKDB_PHASES.format(glob=glob)).df()
        merged = ours.merge(duck, on=["topology", "phase"], suffixes=("", "_duck"))
        agree = bool(((merged["tokens_mean"] - merged["tokens_mean_duck"]).abs() < 1e-6).all())
    table = Table(title=f"(b) {n_events:,} synthetic events, median of {repeat} for the report rows")
    for col in ("step", "seconds", "note"):
        table.add_column(col, justify="right" if col == "seconds" else "left")
    for step, secs, note in rows:
        table.add_row(step, f"{secs:.2f}", note)
    console.print(table)
    console.print(f"promcp and DuckDB phase means agree: {agree}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-tokenizers", action="store_true")
    args = parser.parse_args()
    if not args.skip_tokenizers:
        bench_tokenizers(args.repeat)
    bench_store(args.events, args.repeat)


if __name__ == "__main__":
    main()
