"""``promcp diff A B``: two runs or datasets side by side, tokens and latency per phase and per origin."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from promcp.analysis.views import RENDERERS
from promcp.cli._common import stdout
from promcp.errors import ConfigError

DEFAULT_DATASET = Path("traces")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff",
        help="compare two runs or datasets: tokens and latency per phase and per origin, with the change",
        description="Compare A with B (each a dataset/run path, or a run id in --dataset): mean tokens and "
        "latency per task by phase and input tokens by origin, with the change B − A. Without A and B: the two "
        "latest runs of --dataset (dry runs left out). Only complete tasks are counted unless --include-incomplete.",
    )
    p.add_argument(
        "sides", nargs="*", metavar="A B", help="two paths or run ids (default: the two latest runs)"
    )
    p.add_argument(
        "--dataset",
        type=Path,
        default=DEFAULT_DATASET,
        help=f"where run ids are looked up (default: {DEFAULT_DATASET}/)",
    )
    p.add_argument("--task", action="append", dest="tasks", metavar="ID", help="only this task (repeatable)")
    p.add_argument("--include-incomplete", action="store_true", help="count incomplete tasks too")
    p.add_argument(
        "--format", choices=list(RENDERERS), default="table", help="output format (default: table)"
    )
    p.add_argument(
        "--table", default="phases", choices=("phases", "origins", "strategies"), help="with --format csv"
    )
    p.set_defaults(func=_run)


def _side(value: str, dataset: Path) -> tuple[Path, list[str] | None]:
    path = Path(value)
    if path.exists():
        return path, None
    return dataset, [value]


def _run(args: argparse.Namespace) -> int:
    from promcp.analysis.diff import diff
    from promcp.analysis.engine import runs_of
    from promcp.analysis.load import scan
    from promcp.analysis.views import get_renderer
    from promcp.analysis.views.diff import diff_document

    if len(args.sides) == 2:
        (path_a, runs_a), (path_b, runs_b) = (_side(s, args.dataset) for s in args.sides)
        labels = list(args.sides)
    elif not args.sides:
        refs = runs_of(scan(args.dataset), dry=False)  # a dry run ran no task: nothing to compare
        if len(refs) < 2:
            dry = len(runs_of(scan(args.dataset))) - len(refs)
            also = f" (and {dry} dry run(s), which ran no task)" if dry else ""
            raise ConfigError(
                f"needs two runs to compare; found {len(refs)}{also}: give A and B", source=args.dataset
            )
        path_a = path_b = args.dataset
        runs_a, runs_b = [refs[-2].run_id], [refs[-1].run_id]
        labels = [refs[-2].run_id, refs[-1].run_id]
    else:
        raise ConfigError("give two runs or datasets (A B), or none for the two latest runs", source="diff")
    d = diff(
        path_a,
        path_b,
        runs_a=runs_a,
        runs_b=runs_b,
        tasks=args.tasks,
        include_incomplete=args.include_incomplete,
    )
    doc = diff_document(d, *labels)
    options: dict[str, Any] = {"console": stdout()} if args.format == "table" else {}
    if args.format == "csv":
        options["table"] = args.table
    get_renderer(args.format, **options).write(doc, sys.stdout)
    return 0
