"""MCP messages the tests send as a client would."""

from __future__ import annotations

from typing import Any

#: a client's ``initialize`` request (protocol 2025-06-18, no capabilities)
INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
