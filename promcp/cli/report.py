"""``promcp report DIR``: the attribution tables of a dataset (journals of crashed runs read in place; nothing is
written)."""

from __future__ import annotations

import argparse
import sys

from promcp.analysis.render import FORMATS, to_csv, to_json, to_markdown, to_rich
from promcp.analysis.report import SECTIONS, report
from promcp.cli._common import stdout
from promcp.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="print phase attribution, latency segments, start-up and re-send tables of a dataset",
        description="Print the attribution tables of a promcp dataset (a directory written by run/import/"
        "instrument, one run's events.parquet, or a journal). Journals left by a crashed run are read in place; "
        "reading never writes ('promcp finalize DIR' does).",
    )
    p.add_argument("path", help="dataset directory, run directory, events.parquet or journal file")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
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
        help="only these sections (repeatable; default: all)",
    )
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
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    tokenizer_names = [t.strip() for t in args.tokenizers.split(",") if t.strip()]
    sections = args.sections
    if args.format == "csv":
        sections = [args.table]
    try:
        rep = report(args.path, by=by, sections=sections, tokenizers=tokenizer_names, resend_top=args.top)
    except KeyError as exc:
        raise ConfigError(f"--by: {exc.args[0]}", source="--by") from None
    if args.format == "table":
        to_rich(rep, by, stdout())
    elif args.format == "markdown":
        sys.stdout.write(to_markdown(rep, by))
    elif args.format == "json":
        sys.stdout.write(to_json(rep) + "\n")
    else:
        sys.stdout.write(to_csv(rep, args.table))
    return 0
