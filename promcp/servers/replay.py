"""replay: a real MCP server (mcp SDK 2.x, low-level ``Server``) that serves one server of a recorded catalog.

::

    python -m promcp.servers.replay --catalog FILE --server NAME [--format auto]
        [--transport stdio|streamable-http|sse] [--host 127.0.0.1] [--port 8000]
        [--responses FILE] [--latency-ms 50 | 20-80] [--latency-per-kb-ms 0] [--result-bytes 1500] [--seed 0]

``tools/list`` answers with the catalog's recorded list: the tools as the source listed them (MCP ``Tool`` form,
key order kept; a captured ``tools/list`` result is sent as its exact bytes). The SDK's result validation would
re-order keys, so a server middleware answers ``tools/list`` with the recorded dict itself. ``tools/call`` answers
from ``--responses`` when an entry matches (see :mod:`promcp.servers._replay_recorded`), else with a deterministic
synthetic result (:mod:`promcp.servers._replay_synth`) marked ``_meta: {"promcp/synthetic": true}``; an unknown
tool is a tool error. Every call waits as the latency model says before answering.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from promcp.catalogs import CatalogServer, load_catalog
from promcp.errors import PromcpError
from promcp.servers._replay_recorded import LatencyModel, RecordedResponses, load_responses
from promcp.servers._replay_synth import call_seed, synthetic_result

TRANSPORTS = ("stdio", "streamable-http", "sse")


class ReplayServer:
    """The state of one replay server: its recorded tools, responses and latency model."""

    def __init__(
        self,
        server: CatalogServer,
        *,
        responses: RecordedResponses | None = None,
        latency: LatencyModel | None = None,
        result_bytes: int = 1500,
        seed: int = 0,
    ) -> None:
        self.catalog_server = server
        self.tools_result: dict[str, Any] = server.tools_list_result()
        self.wire_tools = {str(t["name"]): t for t in self.tools_result.get("tools", [])}
        self.responses = responses or RecordedResponses()
        self.latency = latency or LatencyModel()
        self.result_bytes = result_bytes
        self.seed = seed
        recorded_info = server.meta.get("serverInfo")
        info: dict[str, Any] = recorded_info if isinstance(recorded_info, dict) else {}
        self.server = Server(
            str(info.get("name") or server.slug),
            version=str(info.get("version") or "replay"),
            instructions=f"Replay of {server.name!r} from a recorded tool catalog (promcp).",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.server.middleware.append(self._raw_tools_list)

    async def _raw_tools_list(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != "tools/list":
            return await call_next(ctx)
        result = dict(self.tools_result)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and "resultType" not in result:
            result["resultType"] = "complete"
        return result

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # reached only if the middleware is bypassed: the validated (re-ordered) form of the same list
        return types.ListToolsResult.model_validate(self.tools_result)

    def answer(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The result dict for one call (recorded, else synthetic, else an unknown-tool error)."""
        tool = self.wire_tools.get(name)
        if tool is None:
            text = f"Unknown tool {name!r}; this server lists: {', '.join(self.wire_tools)}"
            return {"content": [{"type": "text", "text": text}], "isError": True}
        recorded = self.responses.lookup(name, arguments)
        if recorded is not None:
            return recorded
        return synthetic_result(
            self.catalog_server.name, tool, arguments, target_bytes=self.result_bytes, seed=self.seed
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        result = self.answer(params.name, arguments)
        size = len(json.dumps(result, ensure_ascii=False))
        delay = self.latency.delay_s(
            call_seed(self.catalog_server.name, params.name, arguments, self.seed), size
        )
        if delay > 0:
            await anyio.sleep(delay)
        return types.CallToolResult.model_validate(result)


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def _serve_http(server: Server[Any], transport: str, host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(host=host) if transport == "streamable-http" else _sse_app(server)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def _sse_app(server: Server[Any]) -> Any:
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[Route("/sse", endpoint=handle_sse), Mount("/messages/", app=sse.handle_post_message)]
    )


def build(args: argparse.Namespace) -> ReplayServer:
    catalog = load_catalog(args.catalog, args.format)
    server = catalog.server(args.server)
    responses = load_responses(args.responses, server.name) if args.responses else None
    return ReplayServer(
        server,
        responses=responses,
        latency=LatencyModel.parse(args.latency_ms, args.latency_per_kb_ms),
        result_bytes=args.result_bytes,
        seed=args.seed,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m promcp.servers.replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--catalog", required=True, help="catalog file or directory (any promcp.catalogs format)")
    p.add_argument("--server", required=True, help="the catalog server to serve (name or slug)")
    p.add_argument("--format", default="auto", help="catalog format (default: detect)")
    p.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--responses", default=None, help="recorded tools/call responses (JSON, JSONL)")
    p.add_argument("--latency-ms", default="0", help="delay per call: MS or LOW-HIGH (uniform, seeded)")
    p.add_argument("--latency-per-kb-ms", type=float, default=0.0, help="extra delay per KB of result")
    p.add_argument("--result-bytes", type=int, default=1500, help="typical size of a synthetic result")
    p.add_argument("--seed", type=int, default=0, help="seed of synthetic results and latency draws")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        replay = build(args)
    except (PromcpError, KeyError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    if args.transport == "stdio":
        anyio.run(_serve_stdio, replay.server)
    else:
        anyio.run(_serve_http, replay.server, args.transport, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
