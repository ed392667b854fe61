"""OpenTelemetry export of instrumented MCP calls to a real OTLP/HTTP receiver on 127.0.0.1 (protobuf decoded).

The mcp SDK's own ``MCP send …`` CLIENT spans are enriched (no duplicates); the in-process server's SERVER span is
a child of the client span through the ``traceparent`` the SDK carries in ``_meta``."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import promcp
from promcp import tokenizers

TOK = "o200k_base"


class Receiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.paths.append(self.path)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            attrs = {a.key: _value(a.value) for a in sp.attributes}
                            receiver.spans.append(
                                {
                                    "name": sp.name,
                                    "kind": sp.kind,
                                    "trace_id": sp.trace_id.hex(),
                                    "span_id": sp.span_id.hex(),
                                    "parent": sp.parent_span_id.hex(),
                                    "attrs": attrs,
                                    "scope": ss.scope.name,
                                }
                            )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    r = Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.url)
    yield r
    r.server.shutdown()


def make_server() -> MCPServer:
    server = MCPServer("mem")

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    return server


async def _session() -> None:
    async with Client(InMemoryTransport(make_server())) as c:
        with promcp.scope(tool_call_id="call_7"):
            await c.call_tool("shout", {"text": "trace me"})
    params = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.list_tools()
        await s.call_tool("echo", {"text": "over stdio"})


def test_otlp_export_enriches_sdk_spans(receiver: Receiver, tmp_path: Path) -> None:
    promcp.instrument(tmp_path, tokenizer=TOK)
    try:
        anyio.run(_session)
    finally:
        promcp.uninstrument()  # flushes the batch processor
    assert receiver.paths and all(p == "/v1/traces" for p in receiver.paths)
    spans = receiver.spans
    count = tokenizers.get(TOK).count

    client = [s for s in spans if s["name"] == "MCP send tools/call shout"]
    assert len(client) == 1, [s["name"] for s in spans]  # the SDK's span, enriched, not duplicated
    c = client[0]["attrs"]
    assert c["mcp.method.name"] == "tools/call" and c["gen_ai.tool.name"] == "shout"
    assert c["gen_ai.operation.name"] == "execute_tool" and c["gen_ai.tool.call.id"] == "call_7"
    assert (c["promcp.stage"], c["promcp.transport"], c["network.transport"]) == ("S3", "inproc", "inproc")
    assert c.get("promcp.footprint.tokens") == count("TRACE ME"), c
    assert c["promcp.request.tokens"] == count('{"text":"trace me"}')
    assert c["promcp.request.bytes"] > 0 and c["promcp.response.bytes"] > 0 and c["promcp.wire_rtt_ms"] >= 0

    server = [s for s in spans if s["name"] == "tools/call shout"]
    assert len(server) == 1
    assert server[0]["trace_id"] == client[0]["trace_id"]
    assert server[0]["parent"] == client[0]["span_id"]  # server span carries the client's trace context

    stdio = {s["name"]: s["attrs"] for s in spans if s["attrs"].get("promcp.transport") == "stdio"}
    assert stdio["MCP send tools/call echo"]["promcp.footprint.tokens"] == count("over stdio")
    assert stdio["MCP send tools/call echo"]["network.transport"] == "pipe"
    listed = stdio["MCP send tools/list"]
    assert listed["promcp.stage"] == "INIT" and listed["promcp.phase"] == "tools_discovery"
    assert listed["promcp.n_tools"] == 3 and listed["promcp.footprint.tokens"] > 0
    assert stdio["MCP send initialize"]["promcp.phase"] == "initialize"
