"""``promcp run BENCHMARK.yaml``: run the benchmark's tasks with the promcp host and record every stage.

Exit status: 0 when the run completed (individual tasks may have failed: they are recorded as events and listed in
the summary), 2 for a usage/config error or when no task could run at all, 130 after Ctrl-C/SIGTERM (the events
recorded so far are finalized into the dataset first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
from pathlib import Path
from typing import Any

from rich.live import Live
from rich.table import Table

from promcp.cli._common import stderr, stdout
from promcp.errors import ConfigError
from promcp.events import Topology
from promcp.recorder import Recorder, new_run_id


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a benchmark file's tasks with the promcp host (local or cloud LLM) and record every stage",
        description="Run the tasks of a benchmark file (YAML, see docs/run.md) through the promcp host: real MCP "
        "servers, a real LLM, every stage (INIT, S1-S6) recorded into a Parquet dataset.",
    )
    p.add_argument("benchmark", type=Path, help="benchmark file (YAML)")
    p.add_argument(
        "--topology",
        choices=[Topology.L_CUST.value, Topology.C_CUST.value],
        default=Topology.L_CUST.value,
        help="l-cust (local LLM) or c-cust (cloud LLM API); default l-cust",
    )
    p.add_argument("--out", type=Path, default=Path("traces"), help="dataset directory (default: traces/)")
    p.add_argument(
        "--task", action="append", dest="tasks", metavar="ID", help="run only this task (repeatable)"
    )
    p.add_argument("--limit", type=int, help="run at most N tasks")
    p.add_argument(
        "--backend", help="LLM backend: llama-cpp, ollama, openai, anthropic (overrides llm.backend)"
    )
    p.add_argument("--model", help="model name or .gguf path (overrides llm.model)")
    p.add_argument("--base-url", help="endpoint of a network backend (overrides llm.base_url)")
    p.add_argument(
        "--dry-run", action="store_true", help="validate the file and start/stop the servers only (no LLM)"
    )
    p.set_defaults(func=_run)


def _backend(bench: Any, args: argparse.Namespace) -> Any:
    from promcp.host.llm.base import get_backend

    llm = bench.llm
    opts = llm.backend_opts()
    name = args.backend or llm.backend
    if args.backend and args.backend != llm.backend:
        opts.pop("model", None)  # the file's model belongs to the file's backend
        opts.pop("tokenizer", None)
    if args.model:
        model = args.model
        if model.endswith(".gguf"):
            model = str(Path(model).expanduser().resolve())
        opts["model"] = model
    if args.base_url:
        opts["base_url"] = args.base_url
    return get_backend(name, **opts)


def _run(args: argparse.Namespace) -> int:
    from promcp.host import config
    from promcp.host.runner import prepare_workspace, run_benchmark

    err = stderr()
    run_id = new_run_id()
    out: Path = args.out
    workspace = (out / "workspaces" / run_id).resolve()
    bench = config.load(args.benchmark, workspace=workspace)
    tasks = bench.select(args.tasks, args.limit)
    if not tasks:
        raise ConfigError("no task selected", source=args.benchmark, key="--task/--limit")
    backend: Any = None
    if not args.dry_run:
        with err.status("loading the LLM backend…"):
            backend = _backend(bench, args)
    else:  # dry runs need only a tokenizer for the tools/list footprint: the real backend is not loaded
        backend = _DryBackend(bench)
    prepare_workspace(bench, workspace)
    meta = {
        "benchmark_file": str(args.benchmark),
        "backend": getattr(backend, "name", None),
        "model": getattr(backend, "model", None),
        "tasks": [t.id for t in tasks],
        "dry_run": bool(args.dry_run),
    }
    view = _View(len(tasks))
    with Recorder(out, topology=args.topology, run_id=run_id, benchmark=bench.name, meta=meta) as rec:
        try:
            with Live(view.render(), console=err, refresh_per_second=4, transient=True) as live:
                view.live = live
                result = asyncio.run(
                    run_benchmark(
                        bench,
                        tasks,
                        recorder=rec,
                        backend=backend,
                        workspace=workspace,
                        log_dir=out / "logs" / run_id,
                        tool_choice=bench.tool_choice,
                        progress=view.update,
                        dry_run=args.dry_run,
                    )
                )
        finally:
            with contextlib.suppress(Exception):
                asyncio.run(backend.aclose())
    path = rec.result_path
    if args.dry_run:
        return _dry_summary(result, path)
    return _summary(result, path, args.topology)


class _DryBackend:
    """Tokenizer-only stand-in for dry runs (renders and counts tool schemas like the default backend would)."""

    name = "dry-run"
    model = None

    def __init__(self, bench: Any) -> None:
        from promcp import tokenizers
        from promcp.wire.mcp import tool_text

        self.tokenizer = tokenizers.get(bench.llm.tokenizer or "o200k_base")
        self.render_tool = lambda spec: tool_text(spec.name, spec.description, spec.input_schema)

    async def aclose(self) -> None:
        return None


class _View:
    """The live progress display: tasks done, current task, round and stage."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.ok = 0
        self.task = "-"
        self.round: int | None = None
        self.stage = "starting"
        self.live: Live | None = None

    def update(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "task_start":
            self.task, self.round, self.stage = data["task"], None, "start"
        elif kind == "task_end":
            self.done += 1
            self.ok += data["result"].status == "ok"
        elif kind == "stage":
            self.task = data.get("task", self.task)
            self.round = data.get("round", self.round)
            self.stage = data["stage"]
        elif kind == "status":
            self.stage = data["message"]
        if self.live is not None:
            self.live.update(self.render())

    def render(self) -> Table:
        t = Table.grid(padding=(0, 2))
        t.add_row(
            f"[bold]tasks[/] {self.done}/{self.total} ({self.ok} answered)",
            f"[bold]task[/] {self.task}",
            f"[bold]round[/] {self.round or '-'}",
            f"[bold]stage[/] {self.stage}",
        )
        return t


def _dry_summary(result: Any, path: Path | None) -> int:
    con = stdout()
    for s in result.servers_started:
        con.print(f"[green]ok[/]     {s}")
    for name, e in result.server_errors.items():
        con.print(f"[red]failed[/] {name}: {e}")
    con.print(
        f"dry run: file valid, {len(result.servers_started)} server(s) started and stopped; events: {path}"
    )
    return 2 if result.server_errors and not result.servers_started else 0


def _summary(result: Any, path: Path | None, topology: str) -> int:
    con = stdout()
    table = Table(title="tasks", show_lines=False)
    for col in ("task", "status", "rounds", "tools called", "expected", "wall s"):
        table.add_column(col, justify="right" if col in ("rounds", "wall s") else "left")
    for r in result.tasks:
        expected = "—" if r.expected_hit is None else ("yes" if r.expected_hit else "no")
        table.add_row(
            r.task_id,
            r.status if r.status == "ok" else f"[yellow]{r.status}[/]",
            str(r.rounds),
            ", ".join(r.tools_called) or "—",
            expected,
            f"{r.wall_ms / 1000:.1f}",
        )
    con.print(table)
    if path is not None and result.tasks:
        try:
            from promcp.analysis.render import to_rich
            from promcp.analysis.report import report

            rep = report(path, by=["topology"], sections=["phases"])
            to_rich(rep, ["topology"], con)
        except Exception as exc:  # the summary must not hide the dataset path
            con.print(f"[yellow]phase table unavailable: {exc}[/]")
    overheads = [r.overhead_ms / max(r.rounds, 1) for r in result.tasks if r.rounds]
    answered = sum(r.status == "ok" for r in result.tasks)
    con.print(
        f"{answered}/{len(result.tasks)} tasks answered in {result.wall_s:.1f} s"
        + (
            f"; harness overhead per round (median) {statistics.median(overheads):.1f} ms"
            if overheads
            else ""
        )
    )
    con.print(f"events: {path}")
    if result.tasks and all(r.status == "error" for r in result.tasks):
        return 2
    return 0
