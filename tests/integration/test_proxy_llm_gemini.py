"""The LLM proxy with the Gemini API: a tool-using conversation streamed (``:streamGenerateContent?alt=sse``), a
JSON helper call (``:generateContent``) kept out of the task, and the faults every family is tested with."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

import promcp.analysis as pa
from promcp.events import Topology
from promcp.proxy.llm import LLMProxy
from promcp.recorder import Recorder
from tests.stubs.llm_http import Drip, Reply, StubServer
from tests.stubs.llm_streams import SSE_HEADERS
from tests.stubs.scripted_llm import ScriptedGemini
from tests.unit.test_wire_gemini import main_body

KEY = "AIzaSyPROMCP-SECRET-0123456789abcdefghij"
HEADERS = {"x-goog-api-key": KEY, "x-goog-api-client": "google-genai-sdk/1.30.0 gl-node/v20"}
STREAM = "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"
ROUTE = "/v1beta/models/gemini-3.5-flash-lite:generateContent"
ROUTING = {
    "contents": [{"role": "user", "parts": [{"text": "Echo hello promcp"}]}],
    "systemInstruction": {"parts": [{"text": "You are a specialized Task Routing AI."}]},
    "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "OBJECT"}},
}


def record(tmp_path: Path, replies: Any, send: Any) -> tuple[Any, Any]:
    out = tmp_path / "traces"
    with (
        StubServer(replies) as stub,
        Recorder(out, topology=Topology.C_OTS, source="proxy:llm") as rec,
        LLMProxy(stub.url, rec) as proxy,
        httpx.Client(timeout=10) as client,
    ):
        got = send(client, proxy.url)
    return got, pa.load(out).sort_values("seq")


def attrs(row: Any) -> dict[str, Any]:
    return json.loads(row["attrs"]) if isinstance(row["attrs"], str) else {}


def test_gemini_tool_round_trip_and_side_call(tmp_path: Path) -> None:
    script = ScriptedGemini("mcp_everything_echo", {"message": "hi"}, delay_s=0.02)

    def send(c: httpx.Client, url: str) -> list[bytes]:
        got = [c.post(url + ROUTE, json=ROUTING, headers=HEADERS).content]
        got.append(c.post(url + STREAM, json=main_body(answered=False), headers=HEADERS).content)
        got.append(c.post(url + STREAM, json=main_body(answered=True), headers=HEADERS).content)
        return got

    got, df = record(tmp_path, script.gemini, send)
    assert got[1:] == script.sent  # byte for byte
    side = df[df.task_id.isna()]
    assert side.stage.tolist() == ["S1", "S6"] and {attrs(r)["side_call"] for _, r in side.iterrows()} == {
        "json_mode"
    }
    assert (
        side.iloc[0].tokens_in == 40
        and side.iloc[1].tokens_out == 5
        and side.iloc[0].model == "gemini-3.5-flash-lite"
    )
    task = df[df.task_id.notna()]
    assert task.stage.tolist() == ["S1", "S2", "S3", "S4", "S5", "S6"] and task.task_id.nunique() == 1
    calls = task[task.stage.isin(["S1", "S5"])]
    outs = task[task.stage.isin(["S2", "S6"])]
    for (_, row), (_, out), usage in zip(calls.iterrows(), outs.iterrows(), script.usage, strict=True):
        origins = row[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum()
        assert row.tokens_in == usage["promptTokenCount"] == origins
        assert row.cache_read_tokens == usage["cachedContentTokenCount"]
        assert out.tokens_out == usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
        assert out.reasoning_tokens == usage["thoughtsTokenCount"]
        assert row.provider == "google" and row.model == "gemini-3.1-pro-preview"
        assert attrs(row)["api"] == "gemini" and attrs(row)["stream"] is True
    first = calls.iloc[0]
    keys = {p["key"] for p in first.parts}
    assert {
        "everything/echo",
        "read_file",
        "googleSearch",
        "instructions:everything",
        "session_context",
    } <= keys
    s2 = task[task.stage == "S2"].iloc[0]
    assert s2.tool == "mcp_everything_echo" and attrs(s2)["tool_calls"][0]["name"] == "mcp_everything_echo"
    # the model's call had no id; the client's own id keyed the result: joined by name, derived S3/S4 made
    s3, s4 = task[task.stage == "S3"].iloc[0], task[task.stage == "S4"].iloc[0]
    assert s3.tool_call_id == s2.tool_call_id == s4.tool_call_id
    assert (s3.server, s3.tool, attrs(s3)["derived"], attrs(s3)["client_tool"]) == (
        "everything",
        "echo",
        "next_request",
        False,
    )
    for path in (tmp_path / "traces").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_gemini_upstream_down_and_429_with_retry_after(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = tmp_path / "down"
    with Recorder(out, topology=Topology.C_OTS) as rec, LLMProxy(dead, rec) as proxy:
        resp = httpx.post(proxy.url + STREAM, json=main_body(answered=False), headers=HEADERS)
    assert resp.status_code == 502
    [row] = [r for _, r in pa.load(out).iterrows()]
    assert (row.stage, row.status, row.error_type, row.provider) == (
        "S1",
        "error",
        "upstream_unreachable",
        "google",
    )

    error = {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}
    script = ScriptedGemini("mcp_everything_echo", {"message": "hi"})
    replies = iter([Reply(429, error, {"retry-after": "7"})])

    def reply(req: Any) -> Reply:
        return next(replies, None) or script.gemini(req)

    def send(c: httpx.Client, url: str) -> list[httpx.Response]:
        return [c.post(url + STREAM, json=main_body(answered=False), headers=HEADERS) for _ in range(2)]

    (first, second), df = record(tmp_path, reply, send)
    assert first.status_code == 429 and first.headers["retry-after"] == "7" and first.json() == error
    assert second.status_code == 200
    failed, retry = df.iloc[0], df.iloc[1]
    assert (failed.status, failed.error_type, attrs(failed)["retry_after"]) == ("error", "rate_limit", "7")
    assert "RESOURCE_EXHAUSTED: Resource has been exhausted" in failed.resp_preview
    assert (retry.stage, retry.task_id, retry["round"], attrs(retry)["retry"]) == (
        "S5",
        failed.task_id,
        2,
        True,
    )


def test_gemini_stream_cut_mid_way_and_client_hanging_up(tmp_path: Path) -> None:
    script = ScriptedGemini("mcp_everything_echo", {"message": "hi"})
    full = ScriptedGemini("mcp_everything_echo", {"message": "hi"})

    def cut(req: Any) -> Reply:
        reply = full.gemini(req)
        assert isinstance(reply.body, Drip)
        return Reply(200, Drip(reply.body.chunks, cut_after=1), SSE_HEADERS)

    def send(c: httpx.Client, url: str) -> str:
        try:
            c.post(url + STREAM, json=main_body(answered=False), headers=HEADERS).read()
        except httpx.RemoteProtocolError as exc:
            return type(exc).__name__
        return "complete"

    got, df = record(tmp_path / "cut", cut, send)
    assert got == "RemoteProtocolError"
    [row] = [r for _, r in df.iterrows()]
    assert (row.stage, row.status, row.error_type) == ("S1", "error", "upstream_cut")
    assert attrs(row)["response_bytes"] == len(full.sent[0].split(b"\n\n")[0]) + 2

    # the client reads the last chunk and hangs up at once: the call is complete, nothing lost
    def hang_up(c: httpx.Client, url: str) -> bytes:
        with c.stream("POST", url + STREAM, json=main_body(answered=False), headers=HEADERS) as resp:
            data = b""
            for chunk in resp.iter_raw():
                data += chunk
                if data == script.sent[-1]:
                    break
        time.sleep(0.1)
        return data

    got, df = record(tmp_path / "hang", script.gemini, hang_up)
    assert got == script.sent[0]
    assert df.stage.tolist() == ["S1", "S2"] and set(df.status) == {"ok"}
    assert df.iloc[0].tokens_in == script.usage[0]["promptTokenCount"]
