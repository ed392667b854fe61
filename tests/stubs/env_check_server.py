"""A minimal stdio MCP server that checks its environment: ``python env_check_server.py REPORT EXPECTED``.

EXPECTED is a JSON file ``{NAME: VALUE}`` (the values stay out of the server's arguments). It writes one line to
REPORT — ``ok`` when every NAME holds exactly VALUE and no ``PROMCP_MCP_ENV_*`` variable
reached it, else which NAME was wrong (never a value) — and exits 1 on a mismatch, so a client shows it failed.
Then it answers ``initialize``, ``tools/list`` (one tool, ``noop``) and any other request with an empty result.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    report = sys.argv[1]
    with open(sys.argv[2], encoding="utf-8") as fh:
        wanted: dict[str, str] = json.load(fh)
    wrong = [name for name, value in wanted.items() if os.environ.get(name) != value]
    leaked = sorted(k for k in os.environ if k.startswith("PROMCP_MCP_ENV_"))
    with open(report, "a", encoding="utf-8") as fh:
        fh.write(("ok" if not wrong and not leaked else f"wrong: {wrong} leaked: {leaked}") + "\n")
    if wrong or leaked:
        return 1
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        if msg.get("method") == "initialize":
            version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "env-check", "version": "1"},
            }
        elif msg.get("method") == "tools/list":
            schema = {"type": "object", "properties": {}}
            result = {"tools": [{"name": "noop", "description": "does nothing", "inputSchema": schema}]}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
