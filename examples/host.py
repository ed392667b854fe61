"""The host of the README's tour, step 9: an MCP host that calls promcp's echo server three times, instrumented.

    python examples/host.py                                                   # writes local/
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python examples/host.py # ...and sends it to `promcp collect`

``promcp.instrument(out="local")`` records the session start-up (spawn, ready, initialize, tools/list) and every
``tools/call`` (S3/S4) into ``local/``; with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set it also exports its spans, rows
carried, to that receiver, which writes them back into the same run (docs/collect.md).
"""

from __future__ import annotations

import asyncio
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import promcp

ECHO = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])


async def main() -> None:
    async with stdio_client(ECHO) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for text in ("one", "two", "three"):
            await session.call_tool("echo", {"text": text})


if __name__ == "__main__":
    promcp.instrument(out="local")
    try:
        asyncio.run(main())
    finally:
        path = promcp.uninstrument()
    print(f"events: {path}")
