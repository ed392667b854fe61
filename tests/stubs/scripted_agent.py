"""A scripted agent for ``promcp record`` (tests/perf/bench_record_sigterm.py, tests/secret_scan.py): one LLM call
through ``$ANTHROPIC_BASE_URL`` (with the ``x-api-key``, ``authorization`` and ``cookie`` headers of
``$AGENT_API_KEY`` / ``$AGENT_AUTHORIZATION`` / ``$AGENT_COOKIE`` when set), then ``CALLS`` ``tools/call`` of the
npm ``everything`` server's echo tool with ``MESSAGE`` (0: until stopped) through ``promcp proxy mcp`` (which finds
the run through ``PROMCP_OUT`` / ``PROMCP_RUN_ID``, as ``record`` sets them). Each answered call's JSON-RPC id is
appended to ``LOG`` as it arrives. On SIGTERM (passed on by ``record``) it does what Claude Code does with its stdio
servers when it quits: SIGTERM to the server process, wait, exit.

    python tests/stubs/scripted_agent.py LOG EVERYTHING_BIN [CALLS [MESSAGE]]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from typing import Any


def main() -> None:
    log_path, everything = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    text = sys.argv[4] if len(sys.argv) > 4 else ""
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text or "go"}],
    }
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    headers["x-api-key"] = os.environ.get("AGENT_API_KEY", "sk-test")
    for name, variable in (("authorization", "AGENT_AUTHORIZATION"), ("cookie", "AGENT_COOKIE")):
        if os.environ.get(variable):
            headers[name] = os.environ[variable]
    url = os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages"
    urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers), timeout=30).read()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "proxy",
            "mcp",
            "--name",
            "everything",
            "--",
            "node",
            everything,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    stdin, stdout = server.stdin, server.stdout

    def quit_(_signum: int, _frame: Any) -> None:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        os._exit(143)

    signal.signal(signal.SIGTERM, quit_)

    def send(message: dict[str, Any]) -> None:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    def answer(jsonrpc_id: int) -> dict[str, Any]:
        while True:
            line = stdout.readline()
            if not line:
                raise SystemExit(1)
            message = json.loads(line)
            if message.get("id") == jsonrpc_id:
                return message

    info = {"name": "scripted-agent", "version": "1"}
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}})  # fmt: skip
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    with open(log_path, "a") as log:
        for jsonrpc_id in range(1, calls + 1 if calls else 1_000_000):
            message = text or f"call {jsonrpc_id} " + "x" * 2000
            call = {"name": "echo", "arguments": {"message": message}}
            send({"jsonrpc": "2.0", "id": jsonrpc_id, "method": "tools/call", "params": call})
            answer(jsonrpc_id)
            log.write(f"{jsonrpc_id}\n")
            log.flush()
    stdin.close()  # done: the server's proxy finishes its part
    server.wait(60)


if __name__ == "__main__":
    main()
