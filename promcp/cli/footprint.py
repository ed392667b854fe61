"""``promcp footprint -- SERVER COMMAND`` / ``--url URL``: one MCP server's tools tax, without an agent, and a
CI gate on it (docs/footprint.md). Exit status: 0 within the gate, 1 over budget or regressed, 2 when the server
could not be measured (it did not start, never answered, or the input is wrong) or a provider count asked for
failed (the other tokenizers are still printed)."""

from __future__ import annotations

import argparse
import os
import sys

from promcp.cli._common import stderr, stdout
from promcp.cli._logging import without_progress
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ConfigError

#: Exit status when the measurement worked but the gate failed (over budget, regression).
EXIT_GATE = 1
#: Exit status when the server (or a provider count asked for) could not be measured.
EXIT_UNMEASURED = 2
FORMATS = ("table", "markdown", "json")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "footprint",
        help="start one MCP server, list its tools and print their schema tokens, bytes and start-up time",
        description="Start one MCP server (stdio: -- COMMAND ARGS; HTTP: --url, optionally with -- COMMAND that "
        "serves it), list every page of its tools, stop it, and print each tool's schema tokens under one or more "
        "tokenizers, bytes, the largest fields, what slim/dedup would save and the start-up time. --budget and "
        "--baseline make it a CI gate (exit 1 when it fails; 2 when the server cannot be measured).",
    )
    p.add_argument(
        "--url", help="the server's streamable HTTP or SSE endpoint (e.g. http://127.0.0.1:3001/mcp)"
    )
    p.add_argument(
        "--transport",
        choices=["streamable_http", "sse"],
        help="the URL's transport (default: sse when the path ends in /sse, else streamable_http)",
    )
    p.add_argument(
        "--name", default=None, help="the server's name in the output (default: the name it gives itself)"
    )
    p.add_argument(
        "--tokenizers",
        default=DEFAULT_TOKENIZER,
        help="comma-separated tokenizers, the first one for the budget "
        "(e.g. o200k_base,cl100k_base,approx:claude; default o200k_base); anthropic:count_tokens[:MODEL] and "
        "gemini:count_tokens[:MODEL] ask the provider for its exact count (ANTHROPIC_API_KEY / GEMINI_API_KEY; "
        "ANTHROPIC_BASE_URL / GOOGLE_GEMINI_BASE_URL honoured)",
    )
    p.add_argument(
        "--budget", type=_tokens, metavar="N", help="exit 1 when the total exceeds N tokens (first tokenizer)"
    )
    p.add_argument(
        "--baseline", metavar="FILE", help="a saved `promcp footprint --format json` output to compare with"
    )
    p.add_argument(
        "--tolerance",
        default="0",
        help="with --baseline: growth allowed before it counts as a regression, a percentage (5%%) or tokens "
        "(200); default 0",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--top", type=_tokens, default=10, metavar="N", help="largest fields shown (default: 10)")
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds the server may take to start, and to answer each tools/list page (default: 30)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY[=VALUE]",
        help="an environment variable for the server (repeatable; KEY alone passes this shell's value). The "
        "server starts with a neutral environment otherwise",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the server command and its arguments")
    p.set_defaults(func=_run)


def _tokens(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key:
            raise ConfigError(f"{item!r}: expected KEY=VALUE or KEY", source="--env")
        if not sep:
            if key not in os.environ:
                raise ConfigError(f"{key} is not set in this shell", source="--env")
            value = os.environ[key]
        env[key] = value
    return env


def _run(args: argparse.Namespace) -> int:
    from promcp.analysis.views import get_renderer
    from promcp.analysis.views.footprint import footprint_document
    from promcp.footprint import Target, Tolerance, judge, measure, read_baseline

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command and not args.url:
        raise ConfigError(
            "name a server: promcp footprint -- COMMAND [ARGS…], or --url URL", source="footprint"
        )
    names = [t.strip() for t in args.tokenizers.split(",") if t.strip()]
    if not names:
        raise ConfigError("name at least one tokenizer", source="--tokenizers")
    tolerance = Tolerance.parse(args.tolerance)
    baseline = (
        read_baseline(args.baseline) if args.baseline else None
    )  # a bad file fails before the server starts
    name = args.name or "the server"
    target = Target(
        name=args.name, command=tuple(command), url=args.url, transport=args.transport, env=_env(args.env)
    )
    with (
        stderr().status(f"starting {name} and listing its tools"),
        without_progress("promcp.host.servers.pool"),  # the status line says it
    ):
        fp = measure(target, names, timeout_s=args.timeout, top_fields=args.top)
    verdict = judge(fp, budget=args.budget, baseline=baseline, tolerance=tolerance)
    doc = footprint_document(fp, verdict if (args.budget is not None or baseline is not None) else None)
    if args.format == "table":
        get_renderer("table", console=stdout()).write(doc, sys.stdout)
    else:
        get_renderer(args.format).write(doc, sys.stdout)
    for failure in verdict.failures:
        stderr().print(f"[bold red]fail:[/] {failure}", markup=True, highlight=False, soft_wrap=True)
    for reason in fp.errors.values():  # a provider count asked for and not made: the rest is printed above
        stderr().print(f"promcp footprint: {reason}", markup=False, highlight=False, soft_wrap=True)
    if fp.errors:
        return EXIT_UNMEASURED
    return 0 if verdict.passed else EXIT_GATE
