"""``promcp proxy llm --strategy``: the request's tool list rewritten in flight, per API family, against scripted
loopback upstreams, with the real memory MCP server's tool definitions (listed once through the MCP SDK).

Each family plays one task of two calls (the model calls ``create_entities``, then answers): the upstream must
receive what :func:`promcp.strategies.live.plan_call` decides (the same function ``promcp run --strategy`` and the
what-if use), the client must get the upstream's bytes unchanged, and the input events must hold both the client's
and the upstream's split by origin, with ``saved_tokens`` their difference.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pandas as pd
import pytest

import promcp.analysis as pa
from promcp.proxy._http import ExchangeObserver, ProxyRequest, ReverseProxy
from promcp.proxy.llm import LLMProxy
from promcp.proxy.llm._rewrite import TOOL_SEARCH, TOOL_SEARCH_BETA, Rewriter
from promcp.recorder import Recorder
from promcp.strategies import payloads as pl
from promcp.strategies.live import parse_strategy
from promcp.strategies.routing import Router
from promcp.strategies.schema import slim_tool
from tests.stubs.llm_http import Reply, StubServer
from tests.stubs.scripted_llm import Scripted, ScriptedGemini, ScriptedResponses

ROOT = Path(__file__).resolve().parents[2]
MEMORY = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
PROMCP = Path(sys.executable).parent / "promcp"
PROMPT = "Create the entity promcp in the knowledge graph"
ARGS = {"entities": [{"name": "promcp", "entityType": "project", "observations": ["records"]}]}

pytestmark = pytest.mark.skipif(not MEMORY.exists(), reason="npm packages not installed (npm ci)")


@pytest.fixture(scope="module")
def memory_tools(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The memory server's tools as it lists them (MCP form, by alias: inputSchema, outputSchema…)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = {"PATH": os.environ["PATH"], "MEMORY_FILE_PATH": str(tmp_path_factory.mktemp("mem") / "m.jsonl")}

    async def listed() -> list[dict[str, Any]]:
        params = StdioServerParameters(command="node", args=[str(MEMORY)], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            return [t.model_dump(by_alias=True, exclude_none=True) for t in tools]

    return asyncio.run(listed())


# -- each family's request shapes ------------------------------------------------------------------------------


def anthropic_body(tools: list[dict[str, Any]], called: bool) -> dict[str, Any]:
    defs = [
        {"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]} for t in tools
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    if called:
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0001", "name": "create_entities", "input": ARGS}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0001", "content": "created"}]},
        ]  # fmt: skip
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": True, "system": "Be brief.", "tools": defs,
            "messages": messages}  # fmt: skip


def openai_body(tools: list[dict[str, Any]], called: bool) -> dict[str, Any]:
    defs = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
             "parameters": t["inputSchema"]}} for t in tools]  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": PROMPT},
    ]
    if called:
        call = {
            "id": "call_0001",
            "type": "function",
            "function": {"name": "create_entities", "arguments": json.dumps(ARGS)},
        }
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": "call_0001", "content": "created"}]  # fmt: skip
    return {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True}, "tools": defs,
            "messages": messages}  # fmt: skip


def responses_body(tools: list[dict[str, Any]], called: bool) -> dict[str, Any]:
    """As Codex sends an MCP server's tools: one namespace holding them."""
    inner = [{"type": "function", "name": t["name"], "description": t["description"], "parameters": t["inputSchema"],
              "strict": False} for t in tools]  # fmt: skip
    space = {"type": "namespace", "name": "mcp__memory", "description": "Memory server.", "tools": inner}
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPT}]}
    ]
    if called:
        items += [{"type": "function_call", "call_id": "call_0001", "namespace": "mcp__memory", "name": "create_entities",
                   "arguments": json.dumps(ARGS)},
                  {"type": "function_call_output", "call_id": "call_0001", "output": "created"}]  # fmt: skip
    return {
        "model": "gpt-5-codex",
        "instructions": "Be brief.",
        "stream": True,
        "tools": [space],
        "input": items,
    }


def gemini_body(tools: list[dict[str, Any]], called: bool) -> dict[str, Any]:
    decls = [
        {"name": t["name"], "description": t["description"], "parametersJsonSchema": t["inputSchema"]}
        for t in tools
    ]
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": PROMPT}]}]
    if called:
        contents += [{"role": "model", "parts": [{"functionCall": {"name": "create_entities", "args": ARGS}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "create_entities", "response": {"output": "created"}}}]}]  # fmt: skip
    return {"systemInstruction": {"parts": [{"text": "Be brief."}]}, "tools": [{"functionDeclarations": decls}],
            "contents": contents}  # fmt: skip


def sent_names(api: str, body: dict[str, Any]) -> list[str]:
    """The function tools an upstream received, by name."""
    tools = body.get("tools") or []
    if api == "anthropic":
        return [t["name"] for t in tools if "input_schema" in t and not t.get("defer_loading")]
    if api == "openai":
        return [t["function"]["name"] for t in tools]
    if api == "openai-responses":
        return [f"{s['name']}__{t['name']}" for s in tools for t in s["tools"]]
    return [d["name"] for t in tools for d in t["functionDeclarations"]]


FAMILIES: dict[str, tuple[Callable[..., dict[str, Any]], str, Callable[[], Any], str]] = {
    "anthropic": (anthropic_body, "/v1/messages", lambda: Scripted("create_entities", ARGS), "anthropic"),
    "openai": (openai_body, "/v1/chat/completions", lambda: Scripted("create_entities", ARGS), "openai"),
    "openai-responses": (
        responses_body,
        "/v1/responses",
        lambda: ScriptedResponses("mcp__memory__create_entities", ARGS),
        "responses",
    ),
    "gemini": (
        gemini_body,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        lambda: ScriptedGemini("create_entities", ARGS),
        "gemini",
    ),
}


def run_task(tmp_path: Path, api: str, tools: list[dict[str, Any]], strategy: str, **proxy: Any) -> tuple[Any, StubServer, pd.DataFrame, list[bytes]]:  # fmt: skip
    """Two calls of one task through the proxy with ``strategy``; the script, its server, the events, the bytes
    the client got."""
    build, path, make, method = FAMILIES[api]
    script = make()
    got = []
    out = tmp_path / "traces"
    with (
        StubServer(getattr(script, method)) as stub,
        Recorder(out, topology="c-ots", source="proxy:llm", content="redacted") as rec,
        LLMProxy(stub.url, rec, strategy=parse_strategy(strategy), **proxy) as prx,
    ):
        for called in (False, True):
            r = httpx.post(
                prx.url + path, json=build(tools, called), headers={"x-api-key": "sk-test"}, timeout=30
            )
            assert r.status_code == 200, r.text
            got.append(r.content)
    return script, stub, pa.load(out), got


def inputs(df: pd.DataFrame) -> list[dict[str, Any]]:
    calls = df[df.stage.isin(["S1", "S5"])].sort_values("seq")
    return [json.loads(a) for a in calls["attrs"]]


@pytest.mark.parametrize("api", list(FAMILIES))
def test_topk_sends_the_routed_tools_and_records_both_splits(
    tmp_path: Path, memory_tools: list[dict[str, Any]], api: str
) -> None:
    script, stub, df, got = run_task(tmp_path, api, memory_tools, "topk:2:bm25")
    # the upstream received the plan: the 2 best-routed of the 9 tools (the same ranking the host would use)
    ranking, _ms = Router(memory_tools, "bm25").rank(PROMPT)
    expected = [memory_tools[i]["name"] for i in sorted(ranking[:2])]
    first, second = (sent_names(api, r.body) for r in stub.requests)
    prefix = "mcp__memory__" if api == "openai-responses" else ""
    assert first == [prefix + n for n in expected] and "create_entities" in expected
    assert second == first  # the used tool was among them: nothing else to keep
    assert script.steps == ["tool", "answer"]
    assert got == script.sent  # the client got the upstream's bytes, unchanged

    a1, a2 = inputs(df)
    for attrs in (a1, a2):
        assert (
            attrs["strategy"] == "topk:2:bm25" and attrs["client_tools"] == 9 and attrs["strategy_tools"] == 2
        )
        assert attrs["client_origins"]["schemas"] > attrs["upstream_origins"]["schemas"] > 0
        for origin in ("user", "system"):
            assert attrs["client_origins"][origin] == attrs["upstream_origins"][origin]
        assert attrs["saved_tokens"] == attrs["client_tokens_in"] - sum(attrs["upstream_origins"].values())
        assert (
            attrs["saved_tokens"] == attrs["client_origins"]["schemas"] - attrs["upstream_origins"]["schemas"]
        )
        assert attrs["upstream_origins"]["schemas"] < attrs["client_origins"]["schemas"] / 2
        assert attrs["routing_ms"] >= 0
    # the event's parts are what the upstream received (2 schema parts), reconciled with its usage
    s1 = df[df.stage == "S1"].iloc[0]
    tools = [p for p in s1.parts if p["origin"] == "schemas" and "#instructions" not in p["key"]]
    assert len(tools) == 2  # (a Responses namespace's instructions are a schema part of their own)
    assert sum(p["tokens"] for p in s1.parts) == s1.tokens_in


def test_topk_keeps_a_tool_the_conversation_used(tmp_path: Path, memory_tools: list[dict[str, Any]]) -> None:
    """The model called ``read_graph`` earlier; topk:1 routes ``create_entities`` first and keeps ``read_graph``."""
    script = Scripted("create_entities", ARGS)
    body = anthropic_body(memory_tools, False)
    body["messages"] += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_x", "name": "read_graph", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "{}"}]},
    ]
    with (
        StubServer(script.anthropic) as stub,
        Recorder(tmp_path / "t", topology="c-ots", source="proxy:llm") as rec,
        LLMProxy(stub.url, rec, strategy=parse_strategy("topk:1:bm25")) as prx,
    ):
        assert httpx.post(prx.url + "/v1/messages", json=body, timeout=30).status_code == 200
    assert sent_names("anthropic", stub.requests[0].body) == [
        "create_entities",
        "read_graph",
    ]  # client's order
    (attrs,) = inputs(pa.load(tmp_path / "t"))
    assert attrs["strategy_kept"] == 1 and attrs["strategy_tools"] == 2


def test_slim_and_dedup_send_the_same_functions_output(
    tmp_path: Path, memory_tools: list[dict[str, Any]]
) -> None:
    _script, stub, df, _got = run_task(tmp_path / "slim", "anthropic", memory_tools, "slim")
    sent = stub.requests[0].body["tools"]
    assert [t["input_schema"] for t in sent] == [slim_tool(t)["inputSchema"] for t in memory_tools]
    assert all("$schema" not in t["input_schema"] for t in sent)
    a1, _a2 = inputs(df)
    assert 0 < a1["saved_tokens"] == a1["client_origins"]["schemas"] - a1["upstream_origins"]["schemas"]

    _script, stub, df, _got = run_task(tmp_path / "dedup", "openai", memory_tools, "dedup")
    payload = pl.dedup(memory_tools)
    assert payload.extra, "the memory server's relation schema repeats: dedup has a $defs block"
    body = stub.requests[0].body
    assert [t["function"]["parameters"] for t in body["tools"]] == [
        d["inputSchema"] for _i, d in payload.sent
    ]
    assert body["messages"][1] == {"role": "system", "content": payload.extra[0]}  # after the client's system
    s1 = df[df.stage == "S1"].iloc[0]
    assert "$defs" in {
        p["key"] for p in s1.parts if p["origin"] == "schemas"
    }  # counted as schemas, not system
    a1, _a2 = inputs(df)
    assert a1["client_origins"]["system"] == a1["upstream_origins"]["system"]


def test_search_tool_uses_the_anthropic_apis_own_deferred_loading(
    tmp_path: Path, memory_tools: list[dict[str, Any]]
) -> None:
    def upstream(req: Any) -> Reply:
        return Reply(200, {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                           "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                           "usage": {"input_tokens": 50, "output_tokens": 2}})  # fmt: skip

    with (
        StubServer(upstream) as stub,
        Recorder(tmp_path / "t", topology="c-ots", source="proxy:llm") as rec,
        LLMProxy(stub.url, rec, strategy=parse_strategy("search-tool")) as prx,
    ):
        for called in (False, True):
            body = {**anthropic_body(memory_tools, called), "stream": False}
            r = httpx.post(
                prx.url + "/v1/messages", json=body, headers={"anthropic-beta": "context-1m"}, timeout=30
            )
            assert r.json()["content"][0]["text"] == "ok"
        # a client with its own tool search (Claude Code's ToolSearch) is left as it is
        own = anthropic_body(memory_tools, False)
        own["tools"].append(
            {"name": "ToolSearch", "description": "search", "input_schema": {"type": "object"}}
        )
        httpx.post(prx.url + "/v1/messages", json={**own, "stream": False}, timeout=30)
    first, second, third = stub.requests
    assert first.body["tools"][-1] == TOOL_SEARCH
    assert [t.get("defer_loading") for t in first.body["tools"][:-1]] == [True] * 9
    assert first.headers["anthropic-beta"] == f"context-1m,{TOOL_SEARCH_BETA}"
    # the tool the conversation used stays loaded
    assert [t["name"] for t in second.body["tools"] if not t.get("defer_loading")] == [
        "create_entities",
        TOOL_SEARCH["name"],
    ]
    assert third.body == {**own, "stream": False} and TOOL_SEARCH_BETA not in third.headers.get(
        "anthropic-beta", ""
    )
    a1, a2, a3 = inputs(pa.load(tmp_path / "t"))
    assert (
        a1["strategy_deferred"] == 9 and a1["deferred_tools"] == 9 and a1["upstream_origins"]["schemas"] < 100
    )
    assert a2["strategy_deferred"] == 8 and a2["strategy_kept"] == 1
    # the nine definitions are out of the prompt: what they cost is saved
    assert a1["saved_tokens"] == a1["client_origins"]["schemas"] - a1["upstream_origins"]["schemas"] > 500
    assert "brings its own tool search" in a3["strategy_skipped"] and "saved_tokens" in a3


def test_a_router_failure_sends_the_full_list_says_so_once_and_never_breaks_the_client(
    tmp_path: Path, memory_tools: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Router):
        def rank(self, query: str) -> tuple[list[int], float]:
            raise RuntimeError("index corrupted")

    script = Scripted("create_entities", ARGS)
    caplog.set_level(logging.WARNING, logger="promcp.proxy.llm")
    with (
        StubServer(script.anthropic) as stub,
        Recorder(tmp_path / "t", topology="c-ots", source="proxy:llm") as rec,
        LLMProxy(stub.url, rec) as prx,
    ):
        prx.recording.rewriter = Rewriter(
            parse_strategy("topk:2:bm25"), lambda tools, scorer: Broken(tools, "bm25")
        )
        for called in (False, True):
            r = httpx.post(prx.url + "/v1/messages", json=anthropic_body(memory_tools, called), timeout=30)
            assert r.status_code == 200
    assert [len(r.body["tools"]) for r in stub.requests] == [9, 9]
    assert script.steps == ["tool", "answer"]
    said = [r.getMessage() for r in caplog.records if "index corrupted" in r.getMessage()]
    assert len(said) == 1 and "full tool list" in said[0]
    for attrs in inputs(pa.load(tmp_path / "t")):
        assert "index corrupted" in attrs["strategy_fallback"] and attrs["saved_tokens"] == 0


def test_a_prepare_hook_that_fails_forwards_the_request_as_received(tmp_path: Path) -> None:
    class Failing(ExchangeObserver):
        def __init__(self) -> None:
            self.prepare = self._boom

        def _boom(self, body: bytes) -> tuple[bytes, dict[str, str]]:
            raise ValueError("bug")

    def observe(request: ProxyRequest) -> ExchangeObserver:
        return Failing()

    with StubServer([Reply(200, {"ok": True})]) as stub, ReverseProxy(stub.url, observe=observe) as proxy:
        r = httpx.post(proxy.url + "/v1/messages", content=b'{"a": 1}', timeout=30)
    assert r.json() == {"ok": True} and stub.requests[0].raw == b'{"a": 1}'


@pytest.mark.parametrize(
    ("value", "said"),
    [("two-phase", "needs a host that serves load_tool"), ("topk:x", "K must be a whole number")],
)
def test_a_strategy_the_proxy_cannot_apply_is_one_line(tmp_path: Path, value: str, said: str) -> None:
    proc = subprocess.run(
        [str(PROMCP), "proxy", "llm", "--out", str(tmp_path), "--strategy", value],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_report_has_a_strategies_section_when_runs_of_several_strategies_share_a_dataset(
    tmp_path: Path, memory_tools: list[dict[str, Any]]
) -> None:
    """A baseline through the proxy (``--strategy full``) and a topk run in one dataset: ``promcp report`` compares
    them (the same table ``promcp diff`` prints), with the saving the proxy measured."""
    from promcp.analysis.report import report
    from promcp.analysis.views.report import report_document

    for strategy in ("full", "topk:2:bm25"):
        run_task(tmp_path, "anthropic", memory_tools, strategy)
    rep = report(tmp_path / "traces")
    table = rep.tables["strategies"].set_index("strategy")
    assert list(table.index) == ["full", "topk:2:bm25"]
    assert table.at["full", "saved_per_call"] == 0 and table.at["topk:2:bm25", "saved_per_call"] > 0
    assert table.at["topk:2:bm25", "schema_per_call"] < table.at["full", "schema_per_call"]
    assert table.at["topk:2:bm25", "answered"] == "1/1"
    assert any("baseline: run" in n for n in rep.table_notes["strategies"])
    assert "strategies" in [t.name for t in report_document(rep).tables]
    # a single strategy: no section
    assert "strategies" not in report(tmp_path / "traces", latest=1).tables


def test_a_rewrite_that_raises_forwards_as_sent_and_the_event_says_why(
    tmp_path: Path, memory_tools: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("slot")

    monkeypatch.setattr("promcp.proxy.llm._rewrite.write_tools", broken)
    script, stub, df, got = run_task(tmp_path, "anthropic", memory_tools, "slim")
    assert [len(r.body["tools"]) for r in stub.requests] == [9, 9] and got == script.sent
    for attrs in inputs(df):
        assert "rewrite failed (KeyError" in attrs["strategy_skipped"] and attrs["saved_tokens"] == 0
