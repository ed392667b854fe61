"""``promcp report DIR``: the attribution tables of a dataset (finalizing leftover journals first)."""

from __future__ import annotations

import argparse
import sys

from promcp.analysis.render import FORMATS, to_csv, to_json, to_markdown, to_rich
from promcp.analysis.report import SECTIONS, report
from promcp.cli._common import stderr, stdout
from promcp.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="print phase attribution, latency segments, start-up and re-send tables of a dataset",
        description="Print the attribution tables of a promcp dataset (a directory written by run/import/"
        "instrument, one run's events.parquet, or a journal). Unfinalized journals are finalized first.",
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
    p.add_argument(
        "--html",
        metavar="OUT.html",
        default=None,
        help="write a self-contained HTML report (charts, task timelines, context fill, schema weight) to "
        "OUT.html instead of printing the tables; prints the page's path",
    )
    p.add_argument(
        "--whatif",
        nargs="?",
        const=_COMPUTE,
        default=None,
        metavar="RESULT.json",
        help="with --html: draw a what-if result — computed now over the dataset (no value; k=3, hybrid scorer), "
        "or read from a saved `promcp whatif --format json` file. Default: DATASET/whatif.json if present",
    )
    p.set_defaults(func=_run)


_COMPUTE = "\0compute"


def _run(args: argparse.Namespace) -> int:
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    if args.whatif is not None and args.html is None:
        raise ConfigError("draws into the HTML page: add --html OUT.html", source="--whatif")
    if args.html is not None:
        return _write_html(args, by)
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


def _write_html(args: argparse.Namespace, by: list[str]) -> int:
    from promcp.analysis.views.html import write_html

    whatif = None
    if args.whatif == _COMPUTE:
        from promcp.analysis.whatif import whatif_dataset

        with stderr().status("what-if: routing every recorded LLM call under each strategy"):
            whatif = whatif_dataset(args.path, with_scaling=True)
    elif args.whatif is not None:
        from promcp.analysis.whatif import read_result

        whatif = read_result(args.whatif)
    with stderr().status("writing the HTML report"):
        try:
            out = write_html(args.path, args.html, by=by, whatif=whatif)
        except KeyError as exc:
            raise ConfigError(str(exc.args[0]), source="--by") from None
    size = out.stat().st_size
    stdout().print(f"wrote {out} ({size / 2**20:.1f} MiB)", highlight=False, soft_wrap=True)
    return 0
