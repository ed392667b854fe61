"""An MCP server that misbehaves on purpose (fault tests of the promcp host).

``python faulty.py MODE``: ``crash`` exits in the middle of a tools/call, ``hang`` never answers a tools/call,
``garbage`` writes non-JSON lines to stdout before answering, ``nostart`` exits before speaking MCP at all,
``big`` answers with a result of ``PROMCP_BIG_MB`` megabytes (default 50), ``sized`` answers ``lookup(key)`` with
``int(key)`` bytes of text (the proxy benchmark's payloads).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

MODE = sys.argv[1] if len(sys.argv) > 1 else "crash"
if MODE == "nostart":
    sys.stderr.write("faulty: refusing to start\n")
    sys.exit(3)

mcp = MCPServer(f"faulty-{MODE}", log_level="WARNING")


@mcp.tool()
def lookup(key: str) -> str:
    """Look up a key."""
    if MODE == "crash":
        os._exit(17)
    if MODE == "hang":
        time.sleep(3600)
    if MODE == "garbage":
        sys.stdout.write("this is not JSON-RPC\n{broken json\n")
        sys.stdout.flush()
    if MODE == "big":
        return "x" * (int(float(os.environ.get("PROMCP_BIG_MB", "50")) * 1024 * 1024))
    if MODE == "sized":
        return "y" * int(key)
    return f"value of {key}"


if __name__ == "__main__":
    mcp.run("stdio")
