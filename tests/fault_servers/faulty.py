"""An MCP server that misbehaves on purpose (fault tests of the promcp host and proxies).

``python faulty.py MODE [--http PORT]``: ``crash`` exits in the middle of a tools/call, ``hang`` never answers a
tools/call, ``garbage`` writes non-JSON lines to stdout before answering, ``nostart`` exits before speaking MCP at
all, ``noise`` speaks raw JSON-RPC without the SDK and writes two non-JSON lines on the protocol channel before its
tools/call answer (the SDK keeps ``garbage``'s prints off that channel; over HTTP its tools/call answer is a 200
body that is not JSON), ``big`` answers with a result of ``PROMCP_BIG_MB`` megabytes (default 50), ``sized`` answers
``lookup(key)`` with ``int(key)`` bytes of text (the proxy benchmark's payloads).

With ``--http PORT`` the server speaks streamable HTTP on ``127.0.0.1:PORT/mcp`` instead of stdio.

``python faulty.py stubborn PORT PIDFILE``: serves streamable HTTP on 127.0.0.1:PORT, ignores SIGTERM and SIGINT,
starts a child process that does the same, writes both pids to PIDFILE, and hangs on every tools/call.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

MODE = sys.argv[1] if len(sys.argv) > 1 else "crash"
HTTP_PORT = int(sys.argv[sys.argv.index("--http") + 1]) if "--http" in sys.argv else None


def _noise() -> None:
    import json

    def send(obj: dict[str, object]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        result: dict[str, object] = {}
        if msg["method"] == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "faulty-noise", "version": "1"},
            }
        elif msg["method"] == "tools/list":
            result = {"tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]}
        elif msg["method"] == "tools/call":
            sys.stdout.write("this is not JSON-RPC\n{broken json\n")
            result = {"content": [{"type": "text", "text": "value of k"}]}
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


def _noise_http(port: int) -> None:
    """The same raw JSON-RPC over streamable HTTP (JSON answers, no session): tools/call gets a non-JSON body."""
    import json

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def mcp_endpoint(request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        msg = json.loads(await request.body())
        if "id" not in msg:
            return Response(status_code=202)
        result: dict[str, object] = {}
        if msg["method"] == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "faulty-noise", "version": "1"},
            }
        elif msg["method"] == "tools/list":
            result = {"tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]}
        elif msg["method"] == "tools/call":
            return Response(b"this is not JSON-RPC\n{broken json", media_type="application/json")
        return JSONResponse({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    app = Starlette(routes=[Route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if MODE == "noise":
    _noise() if HTTP_PORT is None else _noise_http(HTTP_PORT)
    sys.exit(0)
if MODE == "nostart":
    sys.stderr.write("faulty: refusing to start\n")
    sys.exit(3)

mcp = MCPServer(f"faulty-{MODE}", log_level="WARNING")


@mcp.tool(structured_output=False)  # the result is its text only (no structuredContent copy)
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
        size = int(float(os.environ.get("PROMCP_BIG_MB", "50")) * 1024 * 1024)
        words = "".join(f"word{i % 9973} " for i in range(20_000))  # text, not one endless token
        return (words * (size // len(words) + 1))[:size]
    if MODE == "sized":
        return "y" * int(key)
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
    elif HTTP_PORT is None:
        mcp.run("stdio")
    else:
        mcp.run("streamable-http", host="127.0.0.1", port=HTTP_PORT)
