"""An MCP server that misbehaves on purpose (fault tests of the promcp host).

``python faulty.py MODE``: ``crash`` exits in the middle of a tools/call, ``hang`` never answers a tools/call,
``garbage`` writes non-JSON lines to stdout before answering, ``nostart`` exits before speaking MCP at all.
``python faulty.py stubborn PORT PIDFILE``: serves streamable HTTP on 127.0.0.1:PORT, ignores SIGTERM and SIGINT,
starts a child process that does the same, writes both pids to PIDFILE, and hangs on every tools/call.
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
    return f"value of {key}"


if __name__ == "__main__":
    if MODE == "stubborn":
        import signal
        import subprocess

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        child = subprocess.Popen(  # inherits the ignored signals: a grandchild of promcp run
            [sys.executable, "-c", "import time; time.sleep(3600)"]
        )
        with open(sys.argv[3], "w") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
        MODE = "hang"
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run("stdio")
