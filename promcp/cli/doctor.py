"""``promcp doctor [BENCHMARK]``: check what a run needs before starting a long one (docs/run.md).

Exit status 0 when every check passed (or did not apply), 1 when one failed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from promcp.cli._common import model_option, stdout
from promcp.cli._logging import without_progress
from promcp.host.doctor import Check

DEFAULT_BENCHMARK = Path("benchmark.yaml")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="check loopback, Node.js, MCP servers, model file, API key and endpoint before a run",
        description="Check in seconds what a promcp run needs: loopback networking, Node.js for the npm "
        "servers, every MCP server the benchmark's tasks use (started, listed, stopped), the model file of the "
        "embedded backend, the API key and the endpoint of a network backend. Nothing is recorded.",
    )
    p.add_argument(
        "benchmark",
        type=Path,
        nargs="?",
        help=f"benchmark file whose servers and LLM to check (default: {DEFAULT_BENCHMARK} if present)",
    )
    p.add_argument("--task", action="append", dest="tasks", metavar="ID", help="only this task's servers")
    p.add_argument("--backend", help="LLM backend to check (overrides llm.backend)")
    p.add_argument("--model", help="model name or .gguf path (overrides llm.model)")
    p.add_argument("--base-url", help="endpoint of a network backend (overrides llm.base_url)")
    p.add_argument("--no-servers", action="store_true", help="skip starting the MCP servers")
    p.set_defaults(func=_run)


def print_checks(checks: Sequence[Check], console: Console) -> bool:
    """Print the checks as a table; True when none failed."""
    from promcp.analysis.views import Column, Document, Table, get_renderer

    marks = {"ok": "ok", "fail": "FAIL", "skip": "n/a"}
    rows = [{"check": c.name, "result": marks[c.outcome], "detail": c.detail} for c in checks]
    failed = [c for c in checks if c.outcome == "fail"]
    doc = Document("promcp doctor", header=f"{len(checks)} check(s), {len(failed)} failed")
    doc.add(Table("checks", "checks", [Column("check"), Column("result"), Column("detail")], rows))
    get_renderer("table", console=console).write(doc, console.file)
    return not failed


def _run(args: argparse.Namespace) -> int:
    from promcp.host.doctor import run_checks

    path = args.benchmark or (DEFAULT_BENCHMARK if DEFAULT_BENCHMARK.is_file() else None)
    backend = args.backend
    with without_progress("promcp.host.servers.pool"):  # the table says which servers started
        checks = run_checks(
            path,
            args.tasks,
            backend=backend,
            model=model_option(backend or "llama-cpp", args.model) if args.model else None,
            base_url=args.base_url,
            servers=not args.no_servers,
        )
    return 0 if print_checks(checks, stdout()) else 1
