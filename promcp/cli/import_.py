"""``promcp import PATH…``: turn chat-client exports into a c-ots dataset (see docs/import.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape
from rich.progress import TaskID

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
    targets, passed_over = _expand_folders(targets)
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
    if not args.quiet:
        for line in passed_over:
            stdout().print(line, highlight=False, soft_wrap=True, markup=False)
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


def _expand_folders(
    targets: list[tuple[Path, str | None]],
) -> tuple[list[tuple[Path, str | None]], list[str]]:
    """A folder holds Claude Code sessions (its ``*.jsonl``, imported as one input) and may hold other exports
    (Claude.ai or ChatGPT ``.json`` files, …): each of those becomes an input of its own, detected as a file is.
    A file in it that is no export promcp reads is named with the reason (second value); a folder holding no
    export at all stays an input, so its error is the folder's. ``--format`` given: the folder is read as that."""
    from promcp.collectors._detect import detect_format, folder_format
    from promcp.collectors._formats import FORMATS

    out: list[tuple[Path, str | None]] = []
    notes: list[str] = []
    for path, fmt in targets:
        if fmt is not None or not path.is_dir():
            out.append((path, fmt))
            continue
        sessions = folder_format(path)
        suffixes = FORMATS[sessions].folder_suffixes if sessions else ()
        files, skipped = [], []
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            if file.name.startswith(".") or file.name.endswith(suffixes):
                continue
            try:
                files.append((file, detect_format(file)))
            except PromcpError as exc:
                skipped.append(f"{file.relative_to(path)} ({_reason(exc)})")
        if sessions or not files:
            out.append((path, None))
        out += files
        if skipped:
            notes.append(f"note: {path}: {len(skipped)} file(s) not imported: " + "; ".join(skipped))
    return out, notes


def _reason(exc: PromcpError) -> str:
    """The why of a file's detection error, without the file name it starts with or the --format advice."""
    text = " ".join(str(exc).split())
    text = text.split(": ", 1)[1] if ": " in text else text
    return text.split("; force one with")[0]


def _print_summary(summaries: list[ImportSummary]) -> None:
    for s in summaries:
        for problem in s.problems.items:
            stderr().print(
                f"[yellow]problem:[/] {escape(str(problem))}", markup=True, highlight=False, soft_wrap=True
            )
    _print_table(summaries)
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


def _print_table(summaries: list[ImportSummary]) -> None:
    """The summary through the terminal renderer: at any width a file name breaks only after its separators."""
    from promcp.analysis.views import Column, Document, Table, get_renderer

    cols = [
        Column("input"),
        Column("format"),
        Column("mb", "MB", "number", 2),
        Column("imported", kind="number"),
        Column("skipped", kind="number"),
        Column("tasks", kind="number"),
        Column("events", kind="number"),
    ]
    rows = [
        {
            "input": s.path.name,
            "format": s.format,
            "mb": s.bytes / 1e6,
            "imported": s.imported,
            # a file imported before or unchanged: skipped whole (note below)
            "skipped": s.skipped + len(s.duplicates) + s.unchanged,
            "tasks": s.tasks,
            "events": s.events,
        }
        for s in summaries
    ]
    doc = Document("", tables=[Table("import", "promcp import", cols, rows)])
    get_renderer("table", console=stdout()).write(doc, sys.stdout)


def _reasons(summaries: list[ImportSummary]) -> list[str]:
    lines = []
    for s in summaries:
        for reason, n in sorted(s.skip_reasons.items()):
            lines.append(f"{s.path.name}: skipped {n}: {reason}")
        for kind, n in sorted(s.problems.by_kind().items()):
            lines.append(f"{s.path.name}: problems {n}: {kind}")
    return lines
