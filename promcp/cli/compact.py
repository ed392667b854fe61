"""``promcp compact DIR``: merge a dataset's small run files into a few large packs, every row unchanged
(promcp/store/packs.py; docs/import.md "Compacting a dataset")."""

from __future__ import annotations

import argparse
from pathlib import Path

from promcp.cli._common import escape, progress, stderr, stdout
from promcp.errors import NotATraceError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compact",
        help="merge a dataset's run files into a few large ones (every event unchanged)",
        description="Merge the finalized runs of a dataset (one file per run: thousands for a folder of sessions "
        "imported one run each) into packs of up to --rows events per topology, with one content file each. "
        "Every event stays as it was, run id included. Atomic per pack and safe to stop at any point: run it "
        "again to finish. Journals must be finalized first ('promcp finalize DIR').",
    )
    p.add_argument("path", type=Path, help="dataset directory")
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        metavar="N",
        help="events per pack (default: 250,000; a run with more is a pack of its own)",
    )
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from promcp.errors import ConfigError
    from promcp.store.files import missing_reason
    from promcp.store.packs import PACK_ROWS, compact

    root: Path = args.path
    if not root.is_dir():
        reason = missing_reason(root) if not root.exists() else "not a dataset directory"
        raise NotATraceError(reason, path=root)
    if args.rows is not None and args.rows < 1:
        raise ConfigError(f"must be at least 1, not {args.rows}", source="--rows")
    with progress(disable=True if args.quiet else None) as bar:
        task = bar.add_task("compact: planning", total=None)

        def tick(done: int, total: int, runs: int) -> None:
            bar.update(task, completed=done, total=total, description=f"compact: {runs:,} runs packed")

        summary = compact(root, pack_rows=args.rows or PACK_ROWS, progress=tick)
    for line in summary.left:
        stderr().print(f"[yellow]note:[/] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
    if args.quiet:
        return 0
    out = stdout()
    if summary.recovered:
        out.print(
            f"finished an earlier compact that stopped: {summary.recovered} file(s) it had packed removed",
            highlight=False,
            soft_wrap=True,
        )
    if summary.merged:
        out.print(
            f"{root}: small packs merged into {len(summary.merged)} pack(s)", highlight=False, soft_wrap=True
        )
    if not summary.runs:
        if not summary.merged:
            out.print(f"{root}: no run file to pack", highlight=False, soft_wrap=True)
        return 0
    out.print(
        f"{root}: {summary.runs:,} run(s), {summary.rows:,} events packed into {len(summary.packs)} pack(s); "
        f"Parquet files {summary.files_before:,} → {summary.files_after:,}",
        highlight=False,
        soft_wrap=True,
    )
    return 0
