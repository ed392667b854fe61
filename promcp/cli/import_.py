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
        "~/.claude/projects folder. Many files go into one run; importing the same folder again reads only new or "
        "changed files. Problems are reported with where they are.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="export files or a Claude Code projects folder (none: the clients' default locations, e.g. "
        "$CLAUDE_CONFIG_DIR/projects or ~/.claude/projects)",
    )
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
        help="import files whose content was imported before again, and remove their earlier rows "
        "(default: skip them with a note)",
    )
    add_content_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from promcp.collectors import import_path
    from promcp.collectors._importer import parse_since

    parse_since(args.since)  # a bad --since fails before any file is read
    summaries: list[ImportSummary] = []
    refused: list[str] = []  # inputs not imported at all (not an export, unreadable): named at the end
    targets = _targets(args)
    if not targets:
        return 1
    with progress(bytes_mode=True, disable=True if args.quiet else None) as bar:
        for path, fmt in targets:
            total = _size(path)
            task_id = bar.add_task(f"{path.name}: 0 conversations", total=total or None)

            def tick(done: int, convs: int, task: TaskID = task_id, name: str = path.name) -> None:
                bar.update(task, completed=done, description=f"{name}: {convs} conversations")

            try:
                summaries.append(
                    import_path(
                        path,
                        args.out,
                        fmt=fmt,
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
        for path, _fmt in targets:
            _note_unread(path)
    for line in refused:
        stderr().print(f"[bold red]error:[/] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
    if refused:
        stderr().print(
            f"[bold red]error:[/] {len(refused)} of {len(targets)} input(s) not imported (named above)"
            + (f"; the other {len(summaries)} were" if summaries else ""),
            markup=True,
            highlight=False,
            soft_wrap=True,
        )
        return 2
    done = any(s.imported or s.duplicates or s.unchanged for s in summaries)
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
        for line in _incremental(s):
            out.print(line, highlight=False, soft_wrap=True)


def _targets(args: argparse.Namespace) -> list[tuple[Path, str | None]]:
    """The paths given, or (none given) the default locations that exist on this machine."""
    if args.paths:
        return [(path, args.format) for path in args.paths]
    from promcp.collectors._formats import FORMATS, default_locations

    found: list[tuple[Path, str | None]] = [
        (folder, fmt) for fmt, folder in default_locations() if args.format in (None, fmt)
    ]
    if not found:
        looked = [str(p) for name, f in FORMATS.items() if args.format in (None, name) for p in f.locations()]
        stderr().print(
            f"error: no path given and no client folder found (looked in {', '.join(looked) or 'nothing'}); "
            "pass the export files or folders to import",
            highlight=False,
            soft_wrap=True,
        )
        return []
    for folder, fmt in found:
        stderr().print(f"importing {folder} ({fmt})", highlight=False, soft_wrap=True)
    return found


def _incremental(s: ImportSummary) -> list[str]:
    """What the import index decided (docs/import.md, "Importing again")."""
    lines = []
    if s.unchanged:
        lines.append(f"{s.path.name}: {s.unchanged} file(s) unchanged since imported: not read")
    if s.changed:
        lines.append(
            f"{s.path.name}: {len(s.changed)} file(s) changed since imported ({_names(s.changed)}): "
            "imported again, their earlier rows replaced"
        )
    if len(s.duplicates) > 3:
        lines.append(
            f"note: {len(s.duplicates)} files hold content imported before (e.g. {s.duplicates[0][0]} in run "
            f"{s.duplicates[0][1]}): skipped; --replace imports them again and removes their earlier rows"
        )
    else:
        for name, run_id in s.duplicates:
            lines.append(
                f"note: {name} was imported before as run {run_id} (same content): skipped; "
                "--replace imports it again and removes its earlier rows"
            )
    for run_id in s.replaced:
        lines.append(f"replaced run {run_id}'s rows of the files imported again")
    return lines


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


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
            str(
                s.skipped + len(s.duplicates) + s.unchanged
            ),  # a file imported before or unchanged: skipped whole (note below)
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
