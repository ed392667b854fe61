"""``promcp import PATH…``: turn chat-client exports into a c-ots dataset (see docs/import.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape
from rich.progress import TaskID
from rich.table import Table

from promcp.cli._common import add_content_options, progress, stderr, stdout
from promcp.collectors import ImportSummary
from promcp.errors import PromcpError, StorageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from promcp.collectors import FORMATS

    p = sub.add_parser(
        "import",
        help="import Claude.ai / ChatGPT conversations.json or Claude Code sessions as a c-ots dataset",
        description="Reconstruct the S1–S6 stages from off-the-shelf clients' exports: Claude.ai / Claude Desktop "
        "conversations.json (or .jsonl), ChatGPT conversations.json, Claude Code session .jsonl files or a "
        "~/.claude/projects folder. One run per input file; problems are reported with where they are.",
    )
    p.add_argument("paths", nargs="+", type=Path, help="export files or a Claude Code projects folder")
    p.add_argument("--format", choices=list(FORMATS), help="force a format instead of detecting it")
    p.add_argument("--out", type=Path, default=Path("traces"), help="dataset directory (default: traces/)")
    p.add_argument("--since", help="only conversations updated at or after this ISO date/time (UTC)")
    p.add_argument("--conversation", help="only the conversation with this id")
    p.add_argument(
        "--tokenizer",
        help="count tokens with this tokenizer (default: approx:claude for Claude exports, o200k_base for ChatGPT)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing but errors (no progress bar, summary or problem list)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="import a file whose content was imported before again, and remove the earlier run "
        "(default: skip it with a note)",
    )
    add_content_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from promcp.collectors import import_path
    from promcp.collectors._importer import parse_since

    parse_since(args.since)  # a bad --since fails before any file is read
    summaries: list[ImportSummary] = []
    refused: list[str] = []  # inputs not imported at all (not an export, unreadable): named at the end
    with progress(bytes_mode=True, disable=True if args.quiet else None) as bar:
        for path in args.paths:
            total = _size(path)
            task_id = bar.add_task(f"{path.name}: 0 conversations", total=total or None)

            def tick(done: int, convs: int, task: TaskID = task_id, name: str = path.name) -> None:
                bar.update(task, completed=done, description=f"{name}: {convs} conversations")

            try:
                summaries.append(
                    import_path(
                        path,
                        args.out,
                        fmt=args.format,
                        tokenizer=args.tokenizer,
                        since=args.since,
                        conversation=args.conversation,
                        progress=tick,
                        content=args.content,
                        max_content_bytes=args.max_content_bytes,
                        replace=args.replace,
                    )
                )
            except StorageError:
                raise  # the disk refused: nothing else will import either
            except PromcpError as exc:  # this input only: the others are still imported
                refused.append(" ".join(str(exc).split()))
            bar.update(task_id, completed=total)
    if summaries and not args.quiet:  # --quiet: nothing on stdout, errors and the exit status only
        _print_summary(summaries)
        for path in args.paths:
            _note_unread(path)
    for line in refused:
        stderr().print(f"[bold red]error:[/] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
    if refused:
        stderr().print(
            f"[bold red]error:[/] {len(refused)} of {len(args.paths)} input(s) not imported (named above)"
            + (f"; the other {len(summaries)} were" if summaries else ""),
            markup=True,
            highlight=False,
            soft_wrap=True,
        )
        return 2
    done = any(s.imported or s.duplicates for s in summaries)
    return 0 if done or not any(s.problems.items for s in summaries) else 1


def _note_unread(path: Path) -> None:
    """A folder import reads Claude Code sessions (``*.jsonl``): say which other exports it left alone."""
    if not path.is_dir():
        return
    others = sorted(p for p in path.rglob("*.json") if p.is_file())
    if others:
        names = ", ".join(p.name for p in others[:5]) + (
            f" and {len(others) - 5} more" if len(others) > 5 else ""
        )
        stdout().print(
            f"note: {path}: a folder import reads Claude Code sessions (*.jsonl); {len(others)} .json file(s) not "
            f"read: {names} — name them to import them (promcp import {path}/*.json)",
            highlight=False,
            soft_wrap=True,
        )


def _print_summary(summaries: list[ImportSummary]) -> None:
    for s in summaries:
        for problem in s.problems.items:
            stderr().print(
                f"[yellow]problem:[/] {escape(str(problem))}", markup=True, highlight=False, soft_wrap=True
            )
    stdout().print(_table(summaries))
    out = stdout()
    for line in _reasons(summaries):
        out.print(line, highlight=False, soft_wrap=True)
    for s in summaries:
        for ds in s.datasets:
            out.print(f"wrote {ds}", highlight=False, soft_wrap=True)
        for name, run_id in s.duplicates:
            out.print(
                f"note: {name} was imported before as run {run_id} (same content): skipped; "
                "--replace imports it again and removes that run",
                highlight=False,
                soft_wrap=True,
            )
        for run_id in s.replaced:
            out.print(f"replaced run {run_id}", highlight=False, soft_wrap=True)


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*.jsonl") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def _table(summaries: list[ImportSummary]) -> Table:
    table = Table(title="promcp import", title_justify="left")
    for col in ("input", "format", "MB", "imported", "skipped", "tasks", "events"):
        table.add_column(col, justify="left" if col in ("input", "format") else "right", overflow="fold")
    for s in summaries:
        table.add_row(
            s.path.name,
            s.format,
            f"{s.bytes / 1e6:.2f}",
            str(s.imported),
            str(s.skipped + len(s.duplicates)),  # a file imported before: skipped whole (note below)
            str(s.tasks),
            str(s.events),
        )
    return table


def _reasons(summaries: list[ImportSummary]) -> list[str]:
    lines = []
    for s in summaries:
        for reason, n in sorted(s.skip_reasons.items()):
            lines.append(f"{s.path.name}: skipped {n}: {reason}")
        for kind, n in sorted(s.problems.by_kind().items()):
            lines.append(f"{s.path.name}: problems {n}: {kind}")
    return lines
