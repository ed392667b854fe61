"""Command-line entry shared by promcp's own MCP servers: ``--transport stdio|streamable-http|sse --host --port``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mcp.server.mcpserver import MCPServer

TRANSPORTS = ("stdio", "streamable-http", "sse")


def serve(server: MCPServer, argv: Sequence[str] | None = None) -> None:
    """Run ``server`` on the transport named on the command line (stdio by default; HTTP binds 127.0.0.1)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m promcp.servers.{server.name}", description=server.instructions
    )
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(args.transport, host=args.host, port=args.port)
