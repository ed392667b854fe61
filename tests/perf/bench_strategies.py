"""What a live strategy adds to each LLM call of ``promcp run --strategy``: the time of
:func:`promcp.strategies.live.plan_call` (routing included) per call, p50/p95, per strategy and scorer, and the memory
the embedding model takes (resident set before and after loading it).

Tools: the official everything + filesystem + memory servers' real tools/list (36 tools, ../shared/data); queries:
the default benchmark's task prompts (benchmark.yaml). Prints one table; asserts nothing.
Usage: .venv/bin/python tests/perf/bench_strategies.py [CALLS_PER_QUERY]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from promcp.strategies import live  # noqa: E402
from promcp.strategies.routing import Router, embedding_model  # noqa: E402

#: ../shared beside the repository (a git worktree one level deeper: ../../shared)
CATALOG = (
    next(
        (
            p
            for p in (REPO / ".." / "shared", REPO / ".." / ".." / "shared")
            if (p / "data" / "catalogs" / "official-reference-servers.json").exists()
        ),
        REPO / ".." / "shared",
    )
    / "data"
    / "catalogs"
    / "official-reference-servers.json"
)
SERVERS = ("everything", "filesystem", "memory")


def rss_mib() -> float:
    """This process's resident set size (Linux ``/proc``), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def catalog() -> list[dict[str, object]]:
    doc = json.loads(CATALOG.read_text())
    return [{**t, "server": s["server"]} for s in doc if s["server"] in SERVERS for t in s["tools"]]


def prompts() -> list[str]:
    bench = yaml.safe_load((REPO / "benchmark.yaml").read_text())
    return [t["prompt"] for t in bench["tasks"]]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main() -> None:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tools, queries = catalog(), prompts()
    before = rss_mib()
    t0 = time.perf_counter()
    model = embedding_model()
    load_s = time.perf_counter() - t0
    after = rss_mib()
    table = Table(title=f"plan_call per LLM call — {len(tools)} tools, {len(queries)} prompts × {repeat}")
    for col in ("strategy", "router build ms", "p50 ms", "p95 ms", "definitions sent"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for label in ("full", "slim", "dedup", "topk:3:bm25", "topk:3:embedding", "topk:3", "two-phase:3"):
        spec = live.parse_strategy(label)
        t1 = time.perf_counter()
        router = Router(tools, spec.scorer, model=model) if spec.routed else None
        build_ms = (time.perf_counter() - t1) * 1000
        times: list[float] = []
        sent = 0
        for _ in range(repeat):
            for q in queries:
                t2 = time.perf_counter()
                plan = live.plan_call(spec, tools, live.Conversation(q), router)
                times.append((time.perf_counter() - t2) * 1000)
                sent = len(plan.sent)
        table.add_row(
            label,
            f"{build_ms:,.1f}" if router else "—",
            f"{statistics.median(times):.2f}",
            f"{pct(times, 0.95):.2f}",
            str(sent),
        )
    con = Console()
    con.print(table)
    con.print(
        f"embedding model ({live.EMBEDDING_MODEL}): loaded in {load_s:.1f} s; resident set {before:,.0f} → "
        f"{after:,.0f} MiB (+{after - before:,.0f} MiB, torch included)"
    )


if __name__ == "__main__":
    main()
