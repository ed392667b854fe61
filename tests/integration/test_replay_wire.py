"""Replay servers on the wire: the recorded tools/list leaves the server byte for byte (stdio, raw JSON-RPC lines;
streamable HTTP through the SDK client); tools/call answers are recorded, else synthetic, marked and deterministic."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from promcp.catalogs import load_catalog

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "catalogs"


def _catalog(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"shared reference data not present: {path}")
    return path


class _Stdio:
    """A replay server process spoken to in raw JSON-RPC lines (so the test sees the exact bytes sent)."""

    def __init__(self, catalog: Path, server: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "promcp.servers.replay",
                "--catalog",
                str(catalog),
                "--server",
                server,
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read().decode() if self.proc.stderr else "server closed stdout"
        return line

    def handshake(self) -> dict[str, Any]:
        init = json.loads(
            self.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            )
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.proc.stdin.flush()
        return dict(init["result"])

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize(
    ("catalog", "server"),
    [
        ("mcp-bench-servers.json", "Medical Calculator"),  # dump format: input_schema → inputSchema
        (
            "mcp-bench-servers-relisted.json",
            "Scientific Computing",
        ),  # captured MCP tools with pydantic titles
        ("mcp-universe-servers.json", "yfinance"),  # outputSchema kept
        ("official-reference-servers.json", "everything"),  # annotations, non-ASCII
    ],
)
def test_stdio_tools_list_is_the_recorded_bytes(catalog: str, server: str) -> None:
    recorded = load_catalog(_catalog(catalog)).server(server)
    s = _Stdio(DATA / catalog, server)
    try:
        s.handshake()
        line = s.request("tools/list")
    finally:
        s.close()
    expected = b'{"jsonrpc":"2.0","id":2,"result":' + recorded.tools_list_bytes() + b"}\n"
    assert line == expected


def test_stdio_synthetic_calls_are_marked_deterministic_and_sized() -> None:
    cat = _catalog("mcp-bench-servers.json")
    answers = []
    for _ in range(2):  # two processes: same call → same bytes
        s = _Stdio(cat, "paper-search", "--result-bytes", "3000", "--latency-ms", "30")
        try:
            info = s.handshake()
            t0 = time.perf_counter()
            ok = json.loads(
                s.request("tools/call", {"name": "search_arxiv", "arguments": {"query": "tool tax"}})
            )
            waited = time.perf_counter() - t0
            bad = json.loads(
                s.request("tools/call", {"name": "search_arxiv", "arguments": {"max_results": "x"}})
            )
            unknown = json.loads(s.request("tools/call", {"name": "nope", "arguments": {}}))
        finally:
            s.close()
        answers.append(ok)
    assert "replay" in info["instructions"].lower()
    result = answers[0]["result"]
    assert answers[0] == answers[1]
    assert result["_meta"]["promcp/synthetic"] is True and result["isError"] is False
    text = result["content"][0]["text"]
    assert 300 < len(text.encode()) < 16 * 3000  # realistic size around --result-bytes
    assert waited >= 0.03
    assert "result" in bad  # arguments the schema rejects still get an answer, never a crash
    assert unknown["result"]["isError"] is True and "Unknown tool" in unknown["result"]["content"][0]["text"]


def test_recorded_responses_answer_before_synthetic(tmp_path: Path) -> None:
    cat = _catalog("mcp-bench-servers.json")
    recorded = {"content": [{"type": "text", "text": "Banana: sugar 12.2 g"}], "isError": False}
    responses = tmp_path / "calls.jsonl"
    responses.write_text(
        json.dumps({"tool": "get_fruit_nutrition", "arguments": {"fruit_name": "banana"}, "result": recorded})
        + "\n"
    )
    s = _Stdio(cat, "FruityVice", "--responses", str(responses))
    try:
        s.handshake()
        hit = json.loads(
            s.request("tools/call", {"name": "get_fruit_nutrition", "arguments": {"fruit_name": "banana"}})
        )
        miss = json.loads(
            s.request("tools/call", {"name": "get_fruit_nutrition", "arguments": {"fruit_name": "kiwi"}})
        )
    finally:
        s.close()
    assert hit["result"]["content"] == recorded["content"] and "_meta" not in hit["result"]
    assert miss["result"]["_meta"]["promcp/synthetic"] is True


def test_bad_catalog_or_server_exits_2_with_a_located_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"servers": {"W": {"tools": {"s": {"name": "s", "input_schema": []}}}}}')
    for argv, needle in (
        (["--catalog", str(bad), "--server", "W"], 'servers["W"].tools["s"].input_schema'),
        (["--catalog", str(_catalog("mcp-bench-servers.json")), "--server", "Nope"], "no server 'Nope'"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "promcp.servers.replay", *argv],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert needle in done.stderr.decode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_streamable_http_lists_the_recorded_tools() -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    cat = _catalog("mcp-universe-servers.json")
    recorded = load_catalog(cat).server("yfinance")
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "promcp.servers.replay",
            "--catalog",
            str(cat),
            "--server",
            "yfinance",
            "--transport",
            "streamable-http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "replay server did not listen"
                time.sleep(0.1)

        async def go() -> tuple[list[dict[str, Any]], Any]:
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams,
                ClientSession(streams[0], streams[1]) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                called = await session.call_tool("get_stock_info", {"ticker": "MSFT"})
                return [t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools], called

        tools, called = anyio.run(go)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert tools == [dict(t.wire) for t in recorded.tools]
    assert (called.meta or {}).get("promcp/synthetic") is True
