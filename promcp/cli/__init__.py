"""The ``promcp`` command line: one small module per subcommand.

Each subcommand module in this package exposes ``add_parser(subparsers)``, which registers its parser and sets
``func`` (a callable taking the parsed namespace and returning an exit code); a module listed in
:data:`COMMAND_MODULES` that fails to import is an error, never a command silently left out (``tests/unit/test_cli.py``
runs ``--help`` of every one). :func:`main` wires them together,
turns promcp's own errors into a one-line message and exit status 2, and makes SIGTERM behave like Ctrl-C so that
every command can finalize what it recorded.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # argparse, the command modules and ``typing`` load only past the fast path below
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

#: Subcommand modules, in the order ``promcp --help`` lists them.
COMMAND_MODULES = (
    "run",
    "import_",
    "report",
    "diff",
    "doctor",
    "whatif",
    "bench",
    "finalize",
    "compact",
    "proxy",
    "record",
    "collect",
    "export",
    "footprint",
    "mcp",
)
#: Commands a client starts once per server and waits for: only their own module is imported (the others pull
#: in pandas and DuckDB, seconds of start-up per server).
LEAN_COMMANDS = ("proxy", "mcp", "import")
#: commands whose module has another name (a Python keyword)
_MODULE_OF = {"import": "import_"}


def build_parser(only: Sequence[str] | None = None) -> argparse.ArgumentParser:
    import argparse
    import importlib

    from promcp._version import __version__

    parser = argparse.ArgumentParser(
        prog="promcp",
        description="Token-flow profiling and tracing for MCP agents: see the tools tax per stage.",
        epilog="Run 'promcp COMMAND --help' for the options of one command. Docs: docs/ in the repository.",
    )
    parser.add_argument("--version", action="version", version=f"promcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES if only is None else only:
        # strict: a listed command whose module does not import is a bug to see, not a command to leave out
        importlib.import_module(f"promcp.cli.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["proxy", "mcp"]:
        # a client starts this once per server and waits for its answer to initialize: a plain stdio invocation
        # goes straight to the relay, which imports only the standard library (docs/proxy.md "Start-up"); the
        # relay never returns. Anything else (HTTP, --help, a bad value) goes on to the full parser below.
        from promcp.proxy.mcp.stdio import fast_main

        fast_main(argv[2:])
    from promcp.cli._common import run_command

    # a command given by name loads its own module only (``promcp report`` does not import the recorder, the
    # host, the proxies and their dependencies); anything else (``--help``, a typo) builds the whole parser
    lean = bool(argv) and (argv[0] in LEAN_COMMANDS or _MODULE_OF.get(argv[0], argv[0]) in COMMAND_MODULES)
    parser = build_parser((_MODULE_OF.get(argv[0], argv[0]),) if lean else None)
    args, extra = parser.parse_known_args(argv)
    if extra:  # a mistyped option: the command's own usage, not the top-level one
        # by the word typed, not ``args.command``: a command may reuse that name for its own argument (``record``'s
        # client command line)
        command = _subparser(parser, argv[0])
        (command or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return run_command(args.func, args)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
