"""``promcp record [options] -- CLIENT ARGS…``: run an off-the-shelf client with every stage recorded.

``promcp record -- claude`` is the whole instruction for a Claude Code user: its LLM API goes through a recording
proxy, its MCP servers through ``promcp proxy mcp``, both into one run; when Claude Code exits the run is merged
(tool calls joined to their MCP ``tools/call``) and the phase summary is printed. Exit status: the client's; 2 for
a usage error (no client, a program that does not exist, a bad option). See docs/record.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from promcp.cli.proxy_llm import (
    add_recording_options,
    open_recorder,
    public_url,
    strategy_meta,
    strategy_of,
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "record",
        help="run an off-the-shelf client (e.g. 'promcp record -- claude') with its LLM API and MCP servers "
        "recorded",
        description="Start a recording LLM-API proxy, wrap the client's MCP servers with 'promcp proxy mcp', run "
        "the client with the terminal attached and its base-URL variable pointing at the proxy, then merge "
        "everything into one run (topology c-ots) and print the phase summary. Claude Code's MCP servers are "
        "wrapped through a generated --mcp-config, the Gemini CLI's through the settings of a private "
        "GEMINI_CLI_HOME, Codex's provider and MCP servers through -c overrides (nothing on disk is edited). "
        "See docs/record.md.",
    )
    add_recording_options(p)
    p.add_argument(
        "--upstream",
        metavar="URL",
        help="the LLM API to forward to (default: Codex: its provider's base_url; others: the client's base-URL "
        "variable if set, else the public API)",
    )
    p.add_argument(
        "--api",
        choices=["anthropic", "openai", "gemini"],
        help="which API family the client speaks (default: anthropic for Claude Code, gemini for the Gemini CLI, "
        "openai for Codex, else anthropic and openai)",
    )
    p.add_argument(
        "--no-mcp", action="store_true", help="do not wrap the client's MCP servers (LLM API only)"
    )
    p.add_argument("--no-summary", action="store_true", help="do not print the phase summary at the end")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the client command and its arguments")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from promcp.cli._common import stderr
    from promcp.proxy.record import RecordOptions, record

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    err = stderr()
    strategy = strategy_of(args)
    meta: dict[str, Any] = {"client": Path(command[0]).name if command else None, **strategy_meta(strategy)}
    if args.upstream:
        meta["upstream"] = public_url(args.upstream)
    rec = open_recorder(args, meta)
    try:
        result = record(
            RecordOptions(
                command,
                rec,
                upstream=args.upstream,
                api=args.api,
                wrap_mcp=not args.no_mcp,
                tokenizer=args.tokenizer,
                footprint_tokenizer=args.footprint_tokenizer,
                strategy=strategy,
            )
        )
    finally:
        rec.close()
    launch = result.launch
    if launch.wrapped:
        err.print(
            f"MCP servers recorded: {', '.join(launch.wrapped)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    for name in launch.unwrapped:
        err.print(f"not recorded: {name}", highlight=False, markup=False, soft_wrap=True)
    calls = sum(p.counters.calls for p in result.proxies)
    tasks = sum(len(p.counters.by_task) for p in result.proxies)
    failed = sum(p.counters.failed for p in result.proxies)
    errors = [e for p in result.proxies for e in p.recording.errors]
    for problem in errors:
        err.print(
            f"[yellow]warning:[/] an LLM call could not be recorded: {problem}",
            highlight=False,
            soft_wrap=True,
        )
    if result.still_writing:
        err.print(
            f"{len(result.still_writing)} MCP proxy part(s) still being written: the run is merged when they "
            "end (or by 'promcp report')",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    where = result.run_file or rec.out
    err.print(
        f"promcp record: {calls} LLM call(s) in {tasks} task(s), {failed} failed; run {rec.run_id}; events: {where}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    if result.run_file is not None and not args.no_summary:
        _summary(result.run_file)
    return result.exit_code


def _summary(path: Path) -> None:
    """The run's phase and origin tables on stderr (stdout belongs to the client), through the one table view."""
    import sys

    from rich.markup import escape

    from promcp.analysis.report import report
    from promcp.analysis.views import get_renderer
    from promcp.analysis.views.report import report_document
    from promcp.cli._common import stderr

    try:
        doc = report_document(report(path, by=["topology"], sections=["phases", "origins"]))
    except Exception as exc:  # the summary must not hide the dataset path or the client's exit status
        stderr().print(f"[yellow]phase summary unavailable: {escape(str(exc))}[/]")
        return
    get_renderer("table", console=stderr()).write(doc, sys.stderr)
