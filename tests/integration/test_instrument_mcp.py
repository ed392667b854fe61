"""promcp.instrument() against real MCP servers: the project's own on stdio, streamable HTTP and SSE, a tiny
server for error paths, and the official npm server-everything over stdio."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pandas as pd
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import promcp
from promcp import analysis, tokenizers
from promcp.wire import mcp as wire_mcp

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = REPO / "node_modules" / ".bin" / "mcp-server-everything"
TOK = "o200k_base"

TINY_SERVER = '''
import time
from mcp.server.mcpserver import MCPServer
mcp = MCPServer("tiny")
@mcp.tool()
def blob(n: int) -> str:
    """Return n bytes of text."""
    return ("lorem ipsum dolor sit amet " * (n // 27 + 1))[:n]
@mcp.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)
@mcp.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"
mcp.run("stdio")
'''


def count(text: str) -> int:
    return tokenizers.get(TOK).count(text)


def load(out: Path) -> pd.DataFrame:
    df = analysis.load(out)
    return df.sort_values("seq").reset_index(drop=True)


@contextlib.contextmanager
def instrumented(out: Path) -> Iterator[None]:
    promcp.instrument(out, tokenizer=TOK)
    try:
        yield
    finally:
        promcp.uninstrument()


def attrs(row: pd.Series) -> dict[str, Any]:
    value = row["attrs"]
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(transport: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "promcp.servers.echo", "--transport", transport, "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"echo server ({transport}) exited with {proc.returncode}")
            time.sleep(0.05)
        path = "/mcp" if transport == "streamable-http" else "/sse"
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def one(df: pd.DataFrame, **where: Any) -> pd.Series:
    rows = df
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, f"expected one row for {where}, got {len(rows)}:\n{df[['stage', 'phase', 'tool']]}"
    return rows.iloc[0]


def check_discovery(df: pd.DataFrame, tools: list[Any], transport: str) -> None:
    row = one(df, phase="tools_discovery", transport=transport)
    expected = {t.name: count(wire_mcp.tool_text(t.name, t.description, t.input_schema)) for t in tools}
    info = row.pipe(attrs)
    assert info["n_tools"] == len(tools)
    assert {k: v["tokens"] for k, v in info["tools"].items()} == expected
    assert row["footprint_tokens"] == sum(expected.values()) > 0
    assert row["footprint_bytes"] == sum(v["bytes"] for v in info["tools"].values())
    assert row["tokenizer"] == TOK and pd.isna(row["task_id"])


async def _stdio_session(out: Path, server: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    params = StdioServerParameters(command=sys.executable, args=[str(server)])
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as s:
            await _tiny_calls(s, seen)
    return seen


async def _tiny_calls(s: ClientSession, seen: dict[str, Any]) -> None:
    if True:
        await s.initialize()
        seen["tools"] = (await s.list_tools()).tools
        with promcp.scope(tool_call_id="call_blob"):
            seen["blob"] = await s.call_tool("blob", {"n": 1024})
        seen["fail"] = await s.call_tool("fail", {"reason": "boom"})
        with pytest.raises(MCPError) as bad:
            await s._dispatcher.send_raw_request("tools/call", {"name": 5})  # JSON-RPC invalid params
        seen["bad_code"] = bad.value.error.code
        with pytest.raises(MCPError):
            await s.call_tool("slow", {"seconds": 3}, read_timeout_seconds=0.3)


def test_stdio_init_footprints_and_errors(tmp_path: Path) -> None:
    server = tmp_path / "tiny_server.py"
    server.write_text(TINY_SERVER)
    out = tmp_path / "traces"
    with instrumented(out):
        seen = anyio.run(_stdio_session, out, server)
    df = load(out)
    init = df[df["stage"] == "INIT"]
    assert list(init["phase"]) == ["spawn", "ready", "initialize", "tools_discovery"]
    assert set(init["server"]) == {"tiny"} and set(init["transport"]) == {"stdio"}
    assert init["latency_ms"].notna().all() and (init["latency_ms"] >= 0).all()
    assert one(df, phase="spawn").pipe(attrs)["pid"] > 0
    assert one(df, phase="initialize")["protocol_version"] == "2025-11-25"
    check_discovery(df, seen["tools"], "stdio")

    blob_s3 = one(df, stage="S3", tool="blob")
    blob_s4 = one(df, stage="S4", tool="blob")
    assert blob_s3["footprint_tokens"] == count('{"n":1024}')
    assert blob_s3["tool_call_id"] == blob_s4["tool_call_id"] == "call_blob"
    assert blob_s3["jsonrpc_id"] == blob_s4["jsonrpc_id"] is not None
    text = seen["blob"].content[0].text
    assert len(text) == 1024
    assert blob_s4["footprint_tokens"] == count(
        text
    )  # only the content text, not envelope/structuredContent/_meta
    assert blob_s4["footprint_bytes"] > 2 * 1024  # the wire carries content and structuredContent
    assert blob_s4["status"] == "ok" and blob_s4["latency_ms"] > 0

    fail = one(df, stage="S4", tool="fail")
    assert (fail["status"], fail["error_type"], fail.pipe(attrs)["is_error"]) == ("error", "tool_error", True)
    assert fail["footprint_tokens"] == count(seen["fail"].content[0].text)

    bad = df[(df["stage"] == "S4") & (df["tool"] == "5")].iloc[0]
    assert (bad["status"], bad["error_type"], bad.pipe(attrs)["jsonrpc_code"]) == (
        "error",
        "mcp_error",
        seen["bad_code"],
    )

    slow = one(df, stage="S4", tool="slow")
    assert (slow["status"], slow["error_type"]) == ("timeout", "timeout")
    assert 250 <= slow["latency_ms"] < 3000


async def _http_session(url: str, transport: str) -> list[Any]:
    factory = streamable_http_client if transport == "streamable-http" else sse_client
    async with factory(url) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        tools = (await s.list_tools()).tools
        result = await s.call_tool("echo", {"text": "héllo " * 50})
        assert result.content[0].text == "héllo " * 50
    return list(tools)


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_http_transports(tmp_path: Path, transport: str) -> None:
    out = tmp_path / "traces"
    with http_server(transport) as url, instrumented(out):
        tools = anyio.run(_http_session, url, transport)
    df = load(out)
    kind = transport.replace("-", "_")
    assert list(df[df["stage"] == "INIT"]["phase"]) == ["ready", "initialize", "tools_discovery"]
    assert set(df["transport"]) == {kind}
    assert one(df, phase="ready").pipe(attrs)["ready"] == "transport_open"
    check_discovery(df, tools, kind)
    s4 = one(df, stage="S4", tool="echo")
    assert s4["footprint_tokens"] == count("héllo " * 50)
    assert s4["server"] == "echo" and s4["status"] == "ok"


async def _client_auto(url: str) -> None:
    async with Client(url) as c:  # high-level Client, mode auto: server/discover
        await c.call_tool("word_count", {"text": "one two three"})


def test_high_level_client_modern_era(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    with http_server("streamable-http") as url, instrumented(out):
        anyio.run(_client_auto, url)
    df = load(out)
    handshake = one(df, phase="initialize")
    assert handshake["mcp_method"] == "server/discover"
    assert handshake["protocol_version"] == "2026-07-28"
    s4 = one(df, stage="S4", tool="word_count")
    assert s4["footprint_tokens"] == count("3") and s4["transport"] == "streamable_http"


async def _everything() -> tuple[list[Any], str]:
    params = StdioServerParameters(command=str(EVERYTHING), args=["stdio"])
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            tools = (await s.list_tools()).tools
            result = await s.call_tool("echo", {"message": "from promcp"})
    return list(tools), wire_mcp.result_text(result)


def test_npm_server_everything_stdio(tmp_path: Path) -> None:
    if not EVERYTHING.exists():
        pytest.skip("node_modules/.bin/mcp-server-everything is not installed (run make install)")
    out = tmp_path / "traces"
    with instrumented(out):
        tools, text = anyio.run(_everything)
    df = load(out)
    assert list(df[df["stage"] == "INIT"]["phase"]) == ["spawn", "ready", "initialize", "tools_discovery"]
    check_discovery(df, tools, "stdio")
    assert len(tools) > 5
    s4 = one(df, stage="S4", tool="echo")
    assert "from promcp" in text and s4["footprint_tokens"] == count(text)
