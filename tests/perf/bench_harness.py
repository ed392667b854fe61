"""Harness overhead of the promcp host per round: task wall time minus server start-up, LLM calls and tool calls.

Runs tasks of the default benchmark that use promcp's own servers with the real embedded model, REPEATS times,
and prints one table (per task: rounds, wall, LLM, tool, overhead per round; then the median over all rounds).
Usage: .venv/bin/python tests/perf/bench_harness.py [REPEATS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from promcp.host import config
from promcp.host.llm.base import get_backend
from promcp.host.runner import prepare_workspace, run_benchmark
from promcp.recorder import Recorder

REPO = Path(__file__).resolve().parents[2]
TASKS = ["calc-mul", "echo-reverse", "dates-weekday", "med-map"]


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    backend = get_backend("llama-cpp")
    table = Table(title=f"promcp host overhead per round ({repeats} repeats, {backend.model})")
    for col in ("task", "rounds", "wall ms", "LLM ms", "tool ms", "overhead ms/round"):
        table.add_column(col, justify="left" if col == "task" else "right")
    per_round: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        bench = config.load(REPO / "benchmark.yaml", workspace=out / "ws")
        prepare_workspace(bench, out / "ws")
        for _ in range(repeats):
            with Recorder(out, topology="l-cust", benchmark=bench.name) as rec:
                result = asyncio.run(
                    run_benchmark(
                        bench,
                        bench.select(TASKS),
                        recorder=rec,
                        backend=backend,
                        workspace=out / "ws",
                        log_dir=out / "logs",
                        tool_choice=bench.tool_choice,
                    )
                )
            for r in result.tasks:
                ov = r.overhead_ms / max(r.rounds, 1)
                per_round.append(ov)
                table.add_row(
                    r.task_id,
                    str(r.rounds),
                    f"{r.wall_ms - r.init_ms:.0f}",
                    f"{r.llm_ms:.0f}",
                    f"{r.tool_ms:.1f}",
                    f"{ov:.2f}",
                )
    table.add_row("median", "", "", "", "", f"{statistics.median(per_round):.2f}", style="bold")
    Console().print(table)


if __name__ == "__main__":
    main()
