"""The HTTP MCP proxy relaying an SSE answer faster than it can record it (issue 23, item 8 for ``proxy mcp``): every
byte reaches the client, the recording side holds a bounded backlog — the stream's last chunks are kept, what did not
fit is counted (``attrs.stream_chunks_not_read`` / ``stream_bytes_not_read``) — and the call still gets its answer
(the last event). Memory stays flat for an endless stream: tests/perf/bench_reliability.py."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import httpx2 as httpx
import pytest

from promcp.proxy import _bounded
from promcp.proxy.mcp import http_exchanges
from promcp.proxy.mcp.http import McpHttpProxy
from tests.integration.test_proxy_mcp_http import ACCEPT, attrs, runs

PROGRESS = (
    b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,'
    b'"progress":1,"message":"' + b"x" * 400 + b'"}}\n\n'
)
RESULT = (
    b'event: message\ndata: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}\n\n'
)
MB = 40


async def _stream_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A server that answers one tools/call with a ``MB``-megabyte SSE stream of progress, then the result."""
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    block = PROGRESS * 64
    for _ in range(MB * 1024 * 1024 // len(block)):
        writer.write(b"%x\r\n%s\r\n" % (len(block), block))
        await writer.drain()
    writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(RESULT), RESULT))
    await writer.drain()
    writer.close()


def test_a_stream_faster_than_the_recording_is_relayed_whole_and_recorded_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        http_exchanges, "BACKLOG_BYTES", 256 * 1024
    )  # a small backlog: the bound is reached for sure
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(_stream_server, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    out = tmp_path / "ds"
    try:
        with McpHttpProxy(f"http://127.0.0.1:{port}/mcp", out=out, name="flood") as proxy:
            call = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "flood", "arguments": {}},
            }
            with httpx.Client(timeout=120) as client:
                got = client.post(proxy.url, json=call, headers={**ACCEPT, "mcp-session-id": "s1"})
            sessions = proxy.sessions
            # the backlog never held more than its bound plus the tail flushed at the end
            assert sessions.peak_backlog <= 256 * 1024 + _bounded.TAIL_BYTES + 64 * 1024
    finally:
        loop.call_soon_threadsafe(loop.stop)
    blocks = MB * 1024 * 1024 // (len(PROGRESS) * 64)
    total = blocks * len(PROGRESS) * 64 + len(RESULT)
    assert got.status_code == 200 and len(got.content) == total  # every byte relayed
    (ev,) = runs(out)
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert s4["status"] == "ok" and s4["resp_preview"] == "done"  # the answer, in the stream's tail
    (post,) = [attrs(r) for _, r in ev.iterrows() if attrs(r).get("http_method") == "POST"]
    assert post["stream_chunks_not_read"] > 0 and post["stream_bytes_not_read"] > 0
    progress = ev[ev["mcp_method"] == "notifications/progress"]
    read = len(progress) * len(PROGRESS)
    # what was read plus what was counted is the stream (a cut event at a gap is dropped with the gap's chunks)
    assert read + post["stream_bytes_not_read"] <= total
    assert (
        read + post["stream_bytes_not_read"]
        >= total - len(PROGRESS) * (post["stream_chunks_not_read"] + 2) - 65536
    )
    assert json.loads(ev[ev["stage"] == "S3"].iloc[0]["req_preview"]) == {}
