"""``promcp mcp DATASET``: promcp as a stdio MCP server over a dataset folder, read only (docs/mcp.md).

Register it in a client with one line: ``claude mcp add promcp -- promcp mcp DATASET``."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve a dataset to an agent as an MCP server (stdio): report, top_schemas, whatif, diff, footprint",
        description="Serve the dataset DATASET (read only) as a stdio MCP server whose tools answer what promcp "
        "report, whatif, diff and footprint answer, so an agent can be asked about its own tools tax. Register "
        "it with: claude mcp add promcp -- promcp mcp DATASET. It never records itself.",
    )
    p.add_argument("dataset", help="the dataset folder to read (written by run, record, import or collect)")
    p.add_argument(
        "--allow-spawn",
        action="store_true",
        help="let the footprint tool start the server commands the agent names (default: URLs only)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from promcp.servers.dataset import serve

    serve(args.dataset, allow_spawn=args.allow_spawn)
    return 0
