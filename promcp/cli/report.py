"""``promcp report DIR``: the attribution tables of a dataset, of some of its runs or tasks (docs/report.md).
Journals of crashed runs are read in place; nothing is written."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from promcp.analysis.sections import DEFAULT_SECTIONS, SECTIONS
from promcp.analysis.views import RENDERERS, Document, get_renderer
from promcp.cli._common import stderr, stdout
from promcp.errors import ConfigError


def add_selection(p: argparse.ArgumentParser) -> None:
    """``--run``, ``--latest``, ``--task``, ``--include-incomplete``: shared by report and diff."""
    p.add_argument(
        "--run",
        action="append",
        dest="runs",
        metavar="ID",
        help="only this run (repeatable; a unique prefix or the suffix after '-' is enough)",
    )
    p.add_argument(
        "--latest",
        nargs="?",
        type=int,
        const=1,
        default=0,
        metavar="N",
        help="only the most recent run (or N runs)",
    )
    p.add_argument("--task", action="append", dest="tasks", metavar="ID", help="only this task (repeatable)")
    p.add_argument(
        "--include-incomplete",
        action="store_true",
        help="count failed, interrupted and unanswered tasks in the tables too (default: complete tasks only)",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="print phase attribution, latency segments, start-up, re-send, task and error tables of a dataset",
        description="Print the attribution tables of a promcp dataset (a directory written by run/import/"
        "instrument, one run's events.parquet, or a journal). Only complete tasks are counted; the others are "
        "named in a note (see --include-incomplete, --errors, --section tasks). Journals left by a "
        "crashed run are read in place; reading never writes ('promcp finalize DIR' does).",
    )
    p.add_argument(
        "path",
        nargs="?",
        default="traces",
        help="dataset directory, run directory, events.parquet or journal file (default: traces/, as diff)",
    )
    p.add_argument(
        "--format", choices=list(RENDERERS), default="table", help="output format (default: table)"
    )
    p.add_argument(
        "--by",
        default="topology",
        help="comma-separated grouping columns, e.g. topology,model or benchmark (default: topology)",
    )
    p.add_argument(
        "--section",
        action="append",
        choices=list(SECTIONS),
        dest="sections",
        help=f"only these sections (repeatable; default: {', '.join(DEFAULT_SECTIONS)})",
    )
    p.add_argument("--errors", action="store_true", help="also list every event that failed, with its reason")
    add_selection(p)
    p.add_argument(
        "--table",
        default="phases",
        choices=list(SECTIONS),
        help="with --format csv: which table to write (default: phases)",
    )
    p.add_argument(
        "--tokenizers",
        default="",
        help="compare these tokenizers over the captured content, e.g. o200k_base,cl100k_base",
    )
    p.add_argument("--top", type=int, default=15, help="rows of the re-send table (default: 15)")
    p.add_argument(
        "--prices",
        metavar="FILE",
        default=None,
        help="a JSON price file overriding the price table per model (US dollars per million tokens: "
        '{"model": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}; docs/accounting.md)',
    )
    p.add_argument(
        "--html",
        metavar="OUT.html",
        default=None,
        help="write a self-contained HTML report (the tables, task timelines, context fill, schema weight) to "
        "OUT.html instead of printing the tables, over the same selection (--run/--latest/--task/"
        "--include-incomplete/--section); prints the page's path. --format html writes it to stdout",
    )
    p.add_argument(
        "--whatif",
        nargs="?",
        const=_COMPUTE,
        default=None,
        metavar="RESULT.json",
        help="with --html: draw a what-if result — computed now over the dataset (no value; k=3, hybrid scorer), "
        "or read from a saved `promcp whatif --format json` file. Default: DATASET/_whatif.json if present",
    )
    p.set_defaults(func=_run)


_COMPUTE = "\0compute"


def _run(args: argparse.Namespace) -> int:
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    tokenizer_names = [t.strip() for t in args.tokenizers.split(",") if t.strip()]
    page = args.html is not None or args.format == "html"
    if args.whatif is not None and not page:
        raise ConfigError("draws into the HTML page: add --html OUT.html", source="--whatif")
    if args.html is not None and args.format not in ("table", "html"):
        raise ConfigError(
            f"--html writes the page, not {args.format}: leave one of them out", source="--format"
        )
    if page:
        return _write_html(args, by, tokenizer_names)
    sections = args.sections
    if args.format == "csv":
        sections = [args.table]
    elif args.errors:
        sections = [*(sections or DEFAULT_SECTIONS), "errors"]
    if _phases_only(args, sections, tokenizer_names):
        from promcp.analysis.phase_report import phase_report
        from promcp.analysis.views.report import phase_report_document

        doc = phase_report_document(
            phase_report(
                args.path,
                by=by,
                runs=args.runs,
                latest=args.latest,
                include_incomplete=args.include_incomplete,
            )
        )
    else:
        doc = _report_document(args, by, sections, tokenizer_names)
    if args.format == "table":
        get_renderer("table", console=stdout()).write(doc, sys.stdout)
    elif args.format == "csv":
        get_renderer("csv", table=args.table).write(doc, sys.stdout)
    else:
        get_renderer(args.format).write(doc, sys.stdout)
    return 0


def _phases_only(args: argparse.Namespace, sections: list[str] | None, tokenizers: list[str]) -> bool:
    """The phase table alone, printed for a reader: computed in DuckDB without pandas
    (promcp/analysis/phase_report.py; the same table, header and notes)."""
    return (
        sections == ["phases"]
        and args.format in ("table", "markdown")
        and not (args.tasks or tokenizers or args.prices)
    )


def _report_document(
    args: argparse.Namespace, by: list[str], sections: list[str] | None, tokenizers: list[str]
) -> Document:
    from promcp.analysis.cost import load_prices
    from promcp.analysis.report import report
    from promcp.analysis.views.report import report_document

    rep = report(
        args.path,
        by=by,
        sections=sections,
        tokenizers=tokenizers,
        resend_top=args.top,
        runs=args.runs,
        latest=args.latest,
        tasks=args.tasks,
        include_incomplete=args.include_incomplete,
        prices=load_prices(args.prices) if args.prices else None,
    )
    return report_document(rep)


def _write_html(args: argparse.Namespace, by: list[str], tokenizers: list[str]) -> int:
    """The HTML page (``--html OUT``, or ``--format html`` to stdout), over the same selection as the tables."""
    from promcp.analysis.views.html import page_data, render, write_html

    whatif = None
    if args.whatif == _COMPUTE:
        from promcp.analysis.whatif import whatif_dataset

        with stderr().status("what-if: routing every recorded LLM call under each strategy"):
            whatif = whatif_dataset(
                args.path, with_scaling=True, runs=args.runs, latest=args.latest, tasks=args.tasks
            )
    elif args.whatif is not None:
        from promcp.analysis.whatif import read_result

        whatif = read_result(args.whatif)
    options: dict[str, Any] = {
        "by": by,
        "sections": args.sections,
        "runs": args.runs,
        "latest": args.latest,
        "tasks": args.tasks,
        "include_incomplete": args.include_incomplete,
        "tokenizers": tokenizers,
        "resend_top": args.top,
    }
    with stderr().status("writing the HTML report"):
        if args.html is None:
            text = render(page_data(args.path, whatif=whatif, **options))
        else:
            out = write_html(args.path, args.html, whatif=whatif, **options)
    if args.html is None:
        sys.stdout.write(text)
        return 0
    size = out.stat().st_size
    stdout().print(f"wrote {out} ({size / 2**20:.1f} MiB)", highlight=False, soft_wrap=True)
    return 0
