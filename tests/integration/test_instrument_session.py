"""promcp.shims.record_session(): one session recorded into a harness's own recorder, no process-wide recorder,
other sessions untouched — against promcp's real echo server over stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pyarrow.parquet as pq
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import promcp
from promcp import shims
from promcp.errors import InstrumentationError
from promcp.recorder import Recorder, current_recorder

ECHO = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])


def _rows(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: r["seq"])


@pytest.mark.servers
def test_session_opened_after_hooks_gets_startup_and_calls(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "a", topology="l-cust")
    other = Recorder(tmp_path / "b", topology="l-cust")

    async def main() -> None:
        async with stdio_client(ECHO) as (r0, w0), ClientSession(r0, w0) as first:
            shims.record_session(first, other, server="first", transport="stdio")  # installs the hooks
            async with stdio_client(ECHO) as (r, w), ClientSession(r, w) as mine:
                shims.record_session(mine, rec, server="fs-bench-name")
                await mine.initialize()
                await mine.list_tools()
                assert (await mine.call_tool("reverse", {"text": "abc"})).content[0].text == "cba"
                assert current_recorder() is None  # nothing process-wide
                async with stdio_client(ECHO) as (r2, w2), ClientSession(r2, w2) as untouched:
                    await untouched.initialize()
                    await untouched.call_tool("echo", {"text": "not recorded"})
            await first.initialize()
            await first.call_tool("echo", {"text": "into the other recorder"})

    try:
        anyio.run(main)
    finally:
        shims.flush(rec)
        shims.flush(other)
        promcp.uninstrument()
    rows = _rows(rec.close())
    got = [(r["stage"], r["phase"]) for r in rows]
    assert got == [
        ("INIT", "spawn"),
        ("INIT", "ready"),
        ("INIT", "initialize"),
        ("INIT", "tools_discovery"),
        ("S3", "tool_call"),
        ("S4", "tool_result"),
    ]
    assert {r["server"] for r in rows} == {"fs-bench-name"}
    assert rows[-1]["resp_preview"] == "cba" and rows[-1]["transport"] == "stdio"
    others = _rows(other.close())
    # opened before the hooks: no start-up events, but its handshake and calls, under the name given; the SDK's
    # implicit tools/list (ClientSession validates a result against the output schema of a tool never listed)
    # is on the wire, so it is recorded too
    assert [(r["stage"], r["phase"]) for r in others] == [
        ("INIT", "initialize"),
        ("S3", "tool_call"),
        ("S4", "tool_result"),
        ("INIT", "tools_discovery"),
    ]
    assert {r["server"] for r in others} == {"first"}
    assert "not recorded" not in {r["resp_preview"] for r in rows + others}


@pytest.mark.servers
def test_unknown_transport_is_a_clear_error(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "c")

    async def main() -> None:
        async with stdio_client(ECHO) as (r, w), ClientSession(r, w) as session:
            with pytest.raises(InstrumentationError, match="transport='stdio'"):
                shims.record_session(session, rec)

    try:
        anyio.run(main)
    finally:
        promcp.uninstrument()
        rec.close()
