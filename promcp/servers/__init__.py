"""promcp's own small MCP servers (pure computation, mcp SDK 2.x), used by the default benchmark and the tests.

Each runs as ``python -m promcp.servers.<name> --transport stdio|streamable-http|sse --host 127.0.0.1 --port N``
(HTTP paths: ``/mcp`` for streamable HTTP, ``/sse`` for SSE):

=========  =========================================================================================
scicalc    arithmetic expressions (safe AST evaluation), statistics, quadratic roots, unit conversion
medcalc    BMI, body surface area, Cockcroft-Gault creatinine clearance, mean arterial pressure, QTc
dates      day differences, adding days, weekday of a date, ISO week (no clock: same answer every run)
echo       echo, reverse and word count of a text (the smallest possible tool round trip)
=========  =========================================================================================

:func:`command` gives the argv that starts one of them with the current interpreter.
"""

from __future__ import annotations

import sys

OWN_SERVERS: dict[str, str] = {
    "scicalc": "promcp.servers.scicalc",
    "medcalc": "promcp.servers.medcalc",
    "dates": "promcp.servers.dates",
    "echo": "promcp.servers.echo",
}


def command(
    name: str, transport: str = "stdio", host: str = "127.0.0.1", port: int | None = None
) -> list[str]:
    """argv that runs own server ``name`` on ``transport`` with this interpreter."""
    argv = [sys.executable, "-m", OWN_SERVERS[name], "--transport", transport]
    if transport != "stdio":
        argv += ["--host", host, "--port", str(port or 8000)]
    return argv
