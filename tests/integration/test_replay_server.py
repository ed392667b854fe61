"""The replay server as a real MCP server: the recorded tools/list on the wire (stdio, raw JSON-RPC) and through
the mcp client over streamable HTTP; recorded and synthetic tools/call results; the latency model."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from promcp.catalogs import load_catalog

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "catalogs"
pytestmark = [pytest.mark.servers]


def _catalog(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"shared reference data not present: {path}")
    return path


def _rpc(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> bytes | None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()
    if "id" not in msg:
        return None
    return proc.stdout.readline()


def test_stdio_wire_carries_the_recorded_list_and_answers(tmp_path: Path) -> None:
    catalog_path = _catalog("mcp-universe-servers.json")
    responses = tmp_path / "responses.jsonl"
    responses.write_text('{"tool": "get_today_date", "result": "2025-01-02"}\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "promcp.servers.replay", "--catalog", str(catalog_path), "--server", "date",
         "--responses", str(responses), "--latency-ms", "30"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        line = _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert line is not None
        result = json.loads(line)["result"]
        server = load_catalog(catalog_path).server("date")
        recorded = [dict(t.wire) for t in server.tools]
        # same tools, same keys in the same order, down to the schema text the host renders
        assert json.dumps(result["tools"]) == json.dumps(recorded)
        assert recorded == [t for t in json.loads(catalog_path.read_text())[0]["tools"]]

        t0 = time.perf_counter()
        line = _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "get_today_date", "arguments": {}}})  # fmt: skip
        elapsed = time.perf_counter() - t0
        assert line is not None
        recorded_answer = json.loads(line)["result"]
        assert recorded_answer["content"][0]["text"] == "2025-01-02"
        assert "promcp/synthetic" not in (recorded_answer.get("_meta") or {})
        assert elapsed >= 0.03

        call = {
            "name": "convert_timezone",
            "arguments": {"date": "2025-01-01", "from_tz": "UTC", "to_tz": "CET"},
        }
        names = [t["name"] for t in recorded]
        call["name"] = next(n for n in names if n != "get_today_date")
        first = json.loads(
            _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call}) or b""
        )
        again = json.loads(
            _rpc(proc, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call}) or b""
        )
        assert first["result"]["_meta"]["promcp/synthetic"] is True
        assert first["result"] == again["result"]  # deterministic
        unknown = json.loads(
            _rpc(proc, {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "nope"}}) or b""
        )
        assert unknown["result"]["isError"] is True
    finally:
        proc.kill()
        proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_through_the_mcp_client() -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    catalog_path = _catalog("mcp-bench-servers.json")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "promcp.servers.replay", "--catalog", str(catalog_path), "--server", "Wikipedia",
         "--transport", "streamable-http", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    async def talk() -> tuple[list[Any], Any]:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool("search_wikipedia", {"query": "MCP"})
            return list(listed.tools), result

    try:
        tools, result = asyncio.run(talk())
    finally:
        proc.kill()
        proc.wait()
    server = load_catalog(catalog_path).server("Wikipedia")
    assert [t.name for t in tools] == [t.name for t in server.tools]
    for got, want in zip(tools, server.tools, strict=True):
        assert json.dumps(got.input_schema) == json.dumps(want["input_schema"])
        assert got.description == want["description"]
    assert result.meta["promcp/synthetic"] is True
    assert len(result.content[0].text) > 200
