"""Shims with an in-process server (InMemoryTransport): tracing errors never change the traced call; uninstrument
restores every patched attribute; the canary names any hook target missing from the installed mcp."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer

import promcp
from promcp import analysis
from promcp.shims import _mcp, _mcpevents, _patch
from promcp.wire import mcp as wire_mcp


def make_server() -> MCPServer:
    server = MCPServer("mem")

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    return server


async def _calls() -> list[Any]:
    async with Client(InMemoryTransport(make_server())) as c:
        listed = await c.list_tools()
        result = await c.call_tool("shout", {"text": "abc"})
    return [[t.name for t in listed.tools], result.content[0].text, result.is_error]


def test_canary_every_hook_target_exists() -> None:
    missing = _mcp.missing_targets()
    assert not missing, f"mcp moved promcp hook target(s): {missing} — update promcp/shims/_mcp.py"


def test_missing_target_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_mcp, "TARGETS", (*_mcp.TARGETS, ("mcp.client.stdio", "_gone_hook")))
    with pytest.raises(promcp.errors.InstrumentationError, match=r"mcp\.client\.stdio\._gone_hook"):
        promcp.instrument(tmp_path)
    assert not promcp.shims.is_instrumented()


def test_inproc_events_and_restore(tmp_path: Path) -> None:
    import mcp
    import mcp.client.client
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    before = (JSONRPCDispatcher._write, JSONRPCDispatcher.send_raw_request, mcp.stdio_client)
    baseline = anyio.run(_calls)
    promcp.instrument(tmp_path)
    assert mcp.client.client.stdio_client is not before[2]  # import-time copies are rebound too
    try:
        assert anyio.run(_calls) == baseline
    finally:
        path = promcp.uninstrument()
    assert (JSONRPCDispatcher._write, JSONRPCDispatcher.send_raw_request, mcp.stdio_client) == before
    assert mcp.client.client.stdio_client is before[2]
    assert path is not None and path.exists()
    df = analysis.load(tmp_path)
    assert set(df["transport"]) == {"inproc"}
    assert {"tools_discovery", "tool_call", "tool_result"} <= set(df["phase"])


@pytest.mark.parametrize(
    ("owner", "target"),
    [
        (wire_mcp, "result_text"),
        (wire_mcp, "tool_text_of"),
        (wire_mcp, "arguments_text"),
        (_mcp, "_on_request"),
        (_mcp, "_on_response"),
        (_mcpevents, "finish"),
        (_mcp, "_tag_dispatcher"),
    ],
)
def test_tracing_errors_never_change_the_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, owner: Any, target: str
) -> None:
    baseline = anyio.run(_calls)

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("forced failure inside a promcp hook")

    monkeypatch.setattr(owner, target, boom)
    _patch.errors.clear()
    rec = promcp.instrument(tmp_path)
    try:
        assert anyio.run(_calls) == baseline
    finally:
        rec.flush()
        worker_errors = rec.worker_errors
        promcp.uninstrument()
    # the failure happened (inline: logged by guard; in a builder: kept by the recorder), and was contained
    assert _patch.errors or worker_errors


def test_footprint_result_text_variants() -> None:
    typed_like = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "..."},
            {"type": "text", "text": "b"},
        ],
        "structuredContent": {"x": 1},
        "_meta": {"traceparent": "00-abc"},
    }
    assert wire_mcp.result_text(typed_like) == "a\n[image content omitted]\nb"
    assert wire_mcp.result_text({"content": [], "structuredContent": {"x": 1}}) == '{"x":1}'
    assert wire_mcp.tool_text("t", None, {"type": "object"}) == (
        '{"name":"t","description":"","parameters":{"type":"object"}}'
    )


def test_footprint_matches_typed_result() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    result = CallToolResult(
        content=[
            TextContent(type="text", text="hi"),
            ImageContent(type="image", data="AA==", mime_type="image/png"),
        ]
    )
    assert wire_mcp.result_text(result) == wire_mcp.result_text(result.model_dump(by_alias=True))
