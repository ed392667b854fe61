"""The same measurements through the host path (``promcp run``) and the shim path (``promcp.instrument()``) give
identical events: every column (identity aside), including ``protocol_version``, ``jsonrpc_id``, wire bytes and the
prefill/generation split. Both sources read one injected :class:`~promcp.stages.FakeClock` that moves only where the
test moves it (inside the LLM API's answer, inside the MCP tool, on each message handed to the transport), so the
instants are the same on both paths without a sleep.

* LLM calls: the host's real backend (``OllamaBackend`` / ``OpenAIBackend``) through ``Agent._llm_call`` against
  the stub API behind the transport seam, and ``promcp.shims.wrap_chat`` around a function returning the same
  response body for the request body the host sent.
* tools/call: the host's ``ServerConnection.call`` and the instrumented mcp SDK ``ClientSession``, each against a
  real in-process ``MCPServer`` over the SDK's memory transport.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pyarrow.parquet as pq
import pytest
from mcp import ClientSession
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer

import promcp
from promcp import stages, tokenizers
from promcp.events import Origin, Transport
from promcp.host.agent import Agent, TaskResult
from promcp.host.config import Policy, ServerConfig, TaskConfig
from promcp.host.llm.base import Message, Sampling, ToolCall, ToolSpec, get_backend
from promcp.host.servers.connection import ServerConnection
from promcp.host.servers.wire_log import TimedReadStream as _TimedReadStream
from promcp.host.servers.wire_log import TimedWriteStream as _TimedWriteStream
from promcp.host.servers.wire_log import WireLog as _WireLog
from promcp.recorder import Recorder, scope
from promcp.shims import _config, _join, wrap_chat
from promcp.stages import FakeClock
from promcp.wire import mcp
from tests.stubs.llm_http import MockAPI, Reply, ollama_reply, openai_text

IDENTITY = ("run_id", "seq")
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
TOOLS = [ToolSpec("add", "Add two integers.", SCHEMA, "calc", "add")]
SYSTEM = "You are a calculator."
TASK = TaskConfig("t1", "What is 2 + 3?", ("calc",))
ROUND_1 = [
    Message("system", SYSTEM, origin=Origin.SYSTEM, key="system"),
    Message("user", TASK.prompt, origin=Origin.USER, key="prompt"),
]
ROUND_2 = [
    *ROUND_1,
    Message(
        "assistant",
        "",
        tool_calls=[ToolCall("call_7", "add", {"a": 2, "b": 3}, '{"a":2,"b":3}')],
        key="msg:2",
    ),
    Message("tool", "5", tool_call_id="call_7", name="add", origin=Origin.TOOL_RESULTS, key="call_7"),
]


def rows(rec: Recorder) -> list[dict[str, Any]]:
    path = rec.close()
    assert path is not None
    out = sorted(pq.read_table(path).to_pylist(), key=lambda r: r["seq"])
    return [{k: v for k, v in r.items() if k not in IDENTITY} for r in out]


@pytest.fixture
def shim_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    clock = FakeClock()
    monkeypatch.setattr(_config.settings, "clock", clock)
    _join.join.note_tools("calc", ["add"])  # what a tools/list through the hooks tells the wrappers
    yield clock
    _join.join.clear()


def host_llm(
    tmp_path: Path, backend_name: str, reply: dict[str, Any], messages: list[Message], rnd: int, ms: float
) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    clock = FakeClock()
    api = MockAPI([Reply(200, reply)], wire=backend_name, on_request=lambda _req: clock.advance(ms))  # type: ignore[arg-type]
    model = "qwen2.5:7b" if backend_name == "ollama" else "gpt-4o-mini"
    backend = get_backend(
        backend_name, base_url=api.url, model=model, api_key="k", transport=api.transport, clock=clock
    )
    rec = Recorder(tmp_path / "host", topology="c-cust", fsync="never")
    agent = Agent(
        backend=backend,
        pool=None,  # type: ignore[arg-type]  # no tool is called here
        recorder=rec,
        policy=Policy(),
        sampling=Sampling(),
        tool_choice="auto",
        system_prompt=SYSTEM,
        clock=clock,
    )
    agent._prompt = TASK.prompt

    async def call() -> None:
        with rec.activate():
            await agent._llm_call(TASK, rnd, messages, TOOLS, "auto", TaskResult(TASK.id))
        await backend.aclose()

    asyncio.run(call())
    assert api.violations == []
    return rows(rec), api.requests[0].body, backend.provider


def shim_llm(
    tmp_path: Path,
    clock: FakeClock,
    api: str,
    provider: str,
    body: dict[str, Any],
    reply: dict[str, Any],
    ms: float,
) -> list[dict[str, Any]]:
    def chat(**_request: Any) -> dict[str, Any]:
        clock.advance(ms)
        return reply

    rec = Recorder(tmp_path / "shim", topology="c-cust", fsync="never")
    with rec.activate():
        wrap_chat(chat, provider=provider, wire=api)(**body)  # type: ignore[arg-type]
    return rows(rec)


@pytest.mark.parametrize("ms", [1000.0, 300.0], ids=["split", "prefill-clamped"])
def test_llm_call_ollama_prefill_split_identical(tmp_path: Path, shim_clock: FakeClock, ms: float) -> None:
    reply = ollama_reply(tool=("add", {"a": 2, "b": 3}))  # the server reports a 640 ms prefill
    reply["message"]["tool_calls"][0]["id"] = "call_9"  # (an id is generated when Ollama sends none)
    host, body, provider = host_llm(tmp_path, "ollama", reply, ROUND_1, 1, ms)
    shim = shim_llm(tmp_path, shim_clock, "ollama", provider, body, reply, ms)
    assert [r["stage"] for r in host] == ["S1", "S2"]
    assert shim == host
    s1, s2 = host
    assert s1["latency_ms"] == min(640.0, ms) and s1["latency_ms"] + s2["latency_ms"] == ms
    assert s1["tokens_in"] == 301 and s1["token_source"] == "provider" and s2["tokens_out"] == 19
    assert [p[1] if isinstance(p, list) else p["key"] for p in s1["parts"]] == [
        "system",
        "calc/add",
        "prompt",
    ]


def test_llm_call_openai_later_round_identical(tmp_path: Path, shim_clock: FakeClock) -> None:
    reply = openai_text("2 + 3 = 5.")
    host, body, provider = host_llm(tmp_path, "openai", reply, ROUND_2, 2, 250.0)
    shim = shim_llm(tmp_path, shim_clock, "openai", provider, body, reply, 250.0)
    assert [r["stage"] for r in host] == ["S5", "S6"]
    assert shim == host
    s5, s6 = host
    assert s5["latency_ms"] is None and s6["latency_ms"] == 250.0 and s5["round"] == s6["round"] == 2
    assert s5["in_tool_results"] > 0 and s5["in_history"] > 0 and s5["tokens_in"] == 480


# -- tools/call ------------------------------------------------------------------------------------------------------


def calc_server(clock: list[FakeClock]) -> MCPServer:
    server = MCPServer("calc")

    @server.tool()
    async def add(a: int, b: int) -> str:
        """Add two integers."""
        for _ in range(20):  # let the caller note its "sent" instant first, then take 20 ms
            await anyio.sleep(0)
        clock[0].advance(20)
        return str(a + b)

    return server


class _Advancing:
    """The client's write stream: each message handed over takes 0.5 ms on the fake clock."""

    def __init__(self, inner: Any, clock: FakeClock) -> None:
        self._inner, self._clock = inner, clock

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        self._clock.advance(0.5)

    async def __aenter__(self) -> _Advancing:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_tools_call_identical_with_protocol_version(tmp_path: Path, shim_clock: FakeClock) -> None:
    tok = tokenizers.get("o200k_base")
    host_clock = FakeClock()
    host_rec = Recorder(tmp_path / "host", topology="l-cust", fsync="never")

    async def host() -> None:
        conn = ServerConnection(ServerConfig("calc"), Transport.INPROC, clock=host_clock)
        conn.wire = log = _WireLog(host_clock)
        async with InMemoryTransport(calc_server([host_clock])) as (read, write):
            streams = (_TimedReadStream(read, log), _TimedWriteStream(_Advancing(write, host_clock), log))
            async with ClientSession(*streams) as session:
                conn.session = session
                conn.protocol_version = mcp.handshake(await session.initialize()).protocol_version
                _, measure = await conn.call(
                    "add",
                    {"a": 2, "b": 3},
                    10,
                    tokenizer=tok,
                    tool_call_id="call_7",
                    put_text=host_rec.put_text,
                )
        for event in stages.tools_call_events(measure):
            host_rec.emit(event)

    asyncio.run(host())
    shim_rec = Recorder(tmp_path / "shim", topology="l-cust", fsync="never")

    async def shim() -> None:
        async with (
            InMemoryTransport(calc_server([shim_clock])) as (read, write),
            ClientSession(read, _Advancing(write, shim_clock)) as session,
        ):
            await session.initialize()
            with scope(tool_call_id="call_7"):
                await session.call_tool("add", {"a": 2, "b": 3})

    promcp.instrument(recorder=shim_rec, llm=False)
    try:
        asyncio.run(shim())
    finally:
        promcp.flush(shim_rec)
        promcp.uninstrument()
    shim_rows = [r for r in rows(shim_rec) if r["stage"] in ("S3", "S4")]
    host_rows = rows(host_rec)
    assert [r["stage"] for r in host_rows] == ["S3", "S4"]
    assert shim_rows == host_rows
    s3, s4 = host_rows
    assert s3["protocol_version"] and s3["protocol_version"] == s4["protocol_version"]
    assert s3["jsonrpc_id"] is not None and (s3["tool_call_id"], s3["transport"]) == ("call_7", "inproc")
    assert (s3["latency_ms"], s4["latency_ms"]) == (0.5, 20.0)
    assert s4["resp_preview"] == "5" and s4["footprint_bytes"] > s3["footprint_tokens"]
