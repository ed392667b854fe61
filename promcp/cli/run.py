"""``promcp run BENCHMARK.yaml``: run the benchmark's tasks with the promcp host and record every stage.

Exit status: 0 when the run completed (individual tasks may have failed: they are recorded as events and listed in
the summary with their reason), 1 when ``--check`` found a problem, 2 for a usage/config error or when no task
could run at all, 130 after Ctrl-C/SIGTERM (the events recorded so far are finalized into the dataset first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import statistics
from pathlib import Path
from typing import Any

from promcp.cli._common import add_content_options, model_option, stderr, stdout
from promcp.errors import ConfigError
from promcp.events import Topology
from promcp.recorder import Recorder, new_run_id

#: Where ``promcp run`` writes unless ``--out`` says otherwise (the shipped example lives in examples/).
DEFAULT_OUT = Path("traces")
#: Backends that run the model on this machine: their runs are ``l-cust``.
LOCAL_BACKENDS = frozenset({"llama-cpp", "ollama"})


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
        default=None,
        help="l-cust (local LLM) or c-cust (cloud LLM API); default: l-cust for llama-cpp and ollama, "
        "c-cust for openai and anthropic",
    )
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"dataset directory (default: {DEFAULT_OUT}/)"
    )
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
    p.add_argument(
        "--check",
        action="store_true",
        help="first check loopback, node, servers, model, API key and endpoint (as promcp doctor); stop if one fails",
    )
    p.add_argument(
        "--strategy",
        metavar="NAME[:K[:SCORER]]",
        help="apply a tools-tax mitigation to every LLM call: slim, dedup, topk, search-tool, two-phase (K: routed "
        "tools per call, default 3; SCORER: hybrid, embedding, bm25), or full; overrides the file's strategy: keys "
        "(docs/whatif.md, 'Live runs')",
    )
    add_content_options(p)
    p.set_defaults(func=_run)


def backend_name(bench: Any, args: argparse.Namespace) -> str:
    return str(args.backend or bench.llm.backend)


def topology_for(backend: str, requested: str | None) -> str:
    """The run's topology: as requested, else from the backend; refuses a cloud topology for the embedded model."""
    if requested == Topology.C_CUST.value and backend == "llama-cpp":
        raise ConfigError(
            "the llama-cpp backend runs the model in this process: that is l-cust (--topology l-cust); "
            "c-cust needs a cloud API backend (--backend openai or anthropic)",
            source="--topology",
        )
    if requested:
        return requested
    return Topology.L_CUST.value if backend in LOCAL_BACKENDS else Topology.C_CUST.value


def _backend(bench: Any, args: argparse.Namespace) -> Any:
    from promcp.host.llm.base import get_backend

    opts = bench.llm.backend_opts()
    name = backend_name(bench, args)
    if args.backend and args.backend != bench.llm.backend:
        opts.pop("model", None)  # the file's model belongs to the file's backend
        opts.pop("tokenizer", None)
    model = model_option(name, args.model)
    if model:
        opts["model"] = model
    if args.base_url:
        opts["base_url"] = args.base_url
    return get_backend(name, **opts)


def _check(bench: Any, args: argparse.Namespace) -> bool:
    from promcp.cli.doctor import print_checks
    from promcp.host.doctor import run_checks

    checks = run_checks(
        args.benchmark,
        args.tasks,
        backend=args.backend,
        model=model_option(backend_name(bench, args), args.model),
        base_url=args.base_url,
        servers=not args.dry_run,
    )
    return print_checks(checks, stderr())


def _run(args: argparse.Namespace) -> int:
    from promcp.analysis.views import TaskProgress
    from promcp.host import config
    from promcp.host.runner import DryBackend, prepare_workspace, run_benchmark, strategy_meta
    from promcp.store.layout import scratch_dir
    from promcp.strategies.live import parse_strategy

    # a native crash in this process (the model runs in its own) still leaves its Python stack on stderr
    faulthandler.enable()
    err = stderr()
    run_id = new_run_id()
    out: Path = args.out
    workspace = scratch_dir(out, "workspaces", run_id).resolve()  # beside the dataset: it holds only Parquet
    bench = config.load(args.benchmark, workspace=workspace)
    strategy = parse_strategy(args.strategy, key="--strategy") if args.strategy else None
    tasks = bench.select(args.tasks, args.limit)
    if not tasks:
        raise ConfigError("no task selected", source=args.benchmark, key="--task/--limit")
    topology = topology_for(backend_name(bench, args), args.topology)
    if args.check and not _check(bench, args):
        err.print("[red]check failed[/]: nothing was run (promcp doctor repeats the checks)")
        return 1
    backend: Any
    if args.dry_run:  # dry runs need only a tokenizer for the tools/list footprint
        backend = DryBackend(bench)
    else:
        with err.status("loading the LLM backend…"):
            backend = _backend(bench, args)
    prepare_workspace(bench, workspace)
    meta = {
        "benchmark_file": str(args.benchmark),
        "backend": getattr(backend, "name", None),
        "model": getattr(backend, "model", None),
        "tasks": [t.id for t in tasks],
        "dry_run": bool(args.dry_run),
        "expected_tools": {t.id: list(t.expected_tools) for t in tasks if t.expected_tools},
        **strategy_meta(tasks, strategy),
    }
    with Recorder(
        out,
        topology=topology,
        run_id=run_id,
        benchmark=bench.name,
        meta=meta,
        content=args.content,
        max_content_bytes=args.max_content_bytes,
    ) as rec:
        try:
            with TaskProgress(err, len(tasks)) as view:
                result = asyncio.run(
                    run_benchmark(
                        bench,
                        tasks,
                        recorder=rec,
                        backend=backend,
                        workspace=workspace,
                        log_dir=scratch_dir(out, "logs", run_id),
                        tool_choice=bench.tool_choice,
                        progress=view.update,
                        dry_run=args.dry_run,
                        strategy=strategy,
                    )
                )
        finally:
            with contextlib.suppress(Exception):
                asyncio.run(backend.aclose())
    path = rec.result_path
    if args.dry_run:
        return _dry_summary(result, path)
    return _summary(result, path)


def _dry_summary(result: Any, path: Path | None) -> int:
    con = stdout()
    for s in result.servers_started:
        con.print(f"[green]ok[/]     {s}")
    for name, e in result.server_errors.items():
        con.print(f"[red]failed[/] {name}: {e}", markup=True, highlight=False)
    con.print(
        f"dry run: file valid, {len(result.servers_started)} server(s) started and stopped; events: {path}",
        soft_wrap=True,
    )
    return 2 if result.server_errors and not result.servers_started else 0


def _tasks_table(result: Any) -> Any:
    from promcp.analysis.views import Column, Table

    rows = [
        {
            "task": r.task_id,
            "status": r.status,
            "rounds": r.rounds,
            "tools": ", ".join(r.tools_called) or "—",
            "expected": None if r.expected_hit is None else ("yes" if r.expected_hit else "no"),
            "wall_s": r.wall_ms / 1000,
            "error": r.error,
        }
        for r in result.tasks
    ]
    cols = [
        Column("task"),
        Column("status"),
        Column("rounds", kind="number"),
        Column("tools", "tools called"),
        Column("expected"),
        Column("wall_s", "wall s", "number", 1),
    ]
    if any(r.error for r in result.tasks):
        cols.append(Column("error"))
    return Table("tasks", "tasks", cols, rows)


def _wall_s(result: Any, path: Path | None) -> float:
    """The run's wall time as every report counts it (first event start to last event end), not this process's
    (which also waits for the servers to stop); the process's when the run left no events."""
    if path is not None:
        from promcp.analysis.tables import wall_ms

        with contextlib.suppress(Exception):  # the summary line must not fail on its figure
            ms = wall_ms(path)
            if ms is not None:
                return ms / 1000
    return float(result.wall_s)


def _summary(result: Any, path: Path | None) -> int:
    """The tasks (with the reason of every failure), then the phase tables of the run and their notes."""
    import sys

    from promcp.analysis.views import Document, get_renderer

    con = stdout()
    renderer = get_renderer("table", console=con)
    renderer.write(Document("", tables=[_tasks_table(result)]), sys.stdout)
    if path is not None and result.tasks:
        from promcp.analysis.report import report
        from promcp.analysis.views.report import report_document

        try:
            doc = report_document(report(path, by=["topology"], sections=["phases"]))
        except Exception as exc:  # the summary must not hide the dataset path
            con.print(f"phase table unavailable: {exc}", markup=False, soft_wrap=True)
        else:
            renderer.write(doc, sys.stdout)
    overheads = [r.overhead_ms / max(r.rounds, 1) for r in result.tasks if r.rounds]
    answered = sum(r.status == "ok" for r in result.tasks)
    line = f"{answered}/{len(result.tasks)} tasks answered in {_wall_s(result, path):.1f} s"
    if overheads:
        line += f"; harness overhead per round (median) {statistics.median(overheads):.1f} ms"
    con.print(line, highlight=False, soft_wrap=True)
    con.print(f"events: {path}", highlight=False, soft_wrap=True, markup=False)
    if result.tasks and all(r.status == "error" for r in result.tasks):
        return 2
    return 0
