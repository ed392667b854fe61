"""One instrumented host run holds S1–S6: the real OpenAI / Anthropic SDK clients (talking to stub LLM servers on
127.0.0.1) plan a tool call, the host sends it to promcp's real ``echo`` MCP server over stdio without setting any
scope, and promcp.instrument() joins the model's tool-call id to the MCP tools/call (S2 = S3 = S4 tool_call_id)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import promcp
from tests.stubs.llm_http import Reply, StubServer, anthropic_reply, openai_text, openai_tool_call

ECHO = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])
TOOL_OPENAI = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Return the text unchanged.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


def _rows(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        if isinstance(r.get("attrs"), str):
            r["attrs"] = json.loads(r["attrs"])
    return sorted(rows, key=lambda r: r["seq"])


def _keys(row: dict[str, Any]) -> set[str]:
    return {p[1] if isinstance(p, list | tuple) else p["key"] for p in row["parts"] or ()}


@pytest.mark.servers
def test_openai_host_s1_to_s6_joined(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    replies = [
        Reply(200, openai_tool_call("echo", '{"text": "joined"}', call_id="call_join_1")),
        Reply(200, openai_text("It said joined.")),
    ]

    async def host(base_url: str) -> None:
        llm = openai.AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        async with stdio_client(ECHO) as (r, w), ClientSession(r, w) as mcp:
            await mcp.initialize()
            await mcp.list_tools()
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Echo 'joined'."}]
            first = await llm.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=[TOOL_OPENAI]
            )
            call = first.choices[0].message.tool_calls[0]
            result = await mcp.call_tool(call.function.name, json.loads(call.function.arguments))
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": result.content[0].text},
            ]
            await llm.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[TOOL_OPENAI])

    with StubServer(replies, wire="openai") as stub:
        promcp.instrument(out=tmp_path / "traces", topology="c-cust")
        try:
            asyncio.run(host(stub.url + "/v1"))
        finally:
            path = promcp.uninstrument()
        assert stub.violations == []
    rows = _rows(path)
    stages = [r["stage"] for r in rows if r["stage"] != "INIT"]
    assert stages == ["S1", "S2", "S3", "S4", "S5", "S6"]
    by = {r["stage"]: r for r in rows if r["stage"] != "INIT"}
    assert by["S2"]["tool_call_id"] == by["S3"]["tool_call_id"] == by["S4"]["tool_call_id"] == "call_join_1"
    assert by["S3"]["tool"] == by["S2"]["tool"] == "echo" and by["S3"]["server"] == "echo"
    assert by["S4"]["resp_preview"] == "joined" and by["S4"]["footprint_tokens"] >= 1
    assert by["S1"]["round"] == 1 and by["S5"]["round"] == 2 and by["S6"]["round"] == 2
    assert "call_join_1" in _keys(by["S5"]) and by["S5"]["in_tool_results"] > 0
    # schema part keyed <server>/<tool>: tools/list told the LLM wrapper which server offers "echo"
    assert "echo/echo" in _keys(by["S1"])
    assert by["S1"]["tokens_in"] == 412 and by["S6"]["tokens_out"] == 12  # provider usage from the wire
    assert {r["phase"] for r in rows if r["stage"] == "INIT"} >= {"spawn", "initialize", "tools_discovery"}


@pytest.mark.servers
def test_anthropic_host_join_and_scope_wins(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic")
    use = {"type": "tool_use", "id": "toolu_join", "name": "reverse", "input": {"text": "abc"}}
    replies = [Reply(200, anthropic_reply([use], stop="tool_use"))]

    async def host(base_url: str) -> None:
        llm = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)
        async with stdio_client(ECHO) as (r, w), ClientSession(r, w) as mcp:
            await mcp.initialize()
            msg = await llm.messages.create(
                model="claude-haiku-4-5",
                max_tokens=64,
                messages=[{"role": "user", "content": "reverse abc"}],
                tools=[{"name": "reverse", "description": "Reverse.", "input_schema": {"type": "object"}}],
            )
            block = msg.content[0]
            await mcp.call_tool(block.name, block.input)  # joined through the id table
            with promcp.scope(tool_call_id="host-own-id"):
                await mcp.call_tool("reverse", {"text": "abc"})  # an explicit scope wins over the table

    with StubServer(replies) as stub:
        promcp.instrument(out=tmp_path / "traces")
        try:
            asyncio.run(host(stub.url))
        finally:
            path = promcp.uninstrument()
    rows = [r for r in _rows(path) if r["stage"] in ("S2", "S3", "S4")]
    assert [(r["stage"], r["tool_call_id"]) for r in rows] == [
        ("S2", "toolu_join"),
        ("S3", "toolu_join"),
        ("S4", "toolu_join"),
        ("S3", "host-own-id"),
        ("S4", "host-own-id"),
    ]
    assert rows[2]["resp_preview"] == "cba"
