"""The LLM proxy end to end with a recorder: what each API's calls become, what each fault becomes, and that no
credential is ever written (promcp/proxy/llm/)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pandas as pd
import pytest

import promcp.analysis as pa
from promcp.events import Topology
from promcp.proxy.llm import LLMProxy
from promcp.recorder import Recorder
from tests.stubs.llm_http import Drip, Reply, StubServer, anthropic_error, anthropic_reply, openai_text
from tests.stubs.llm_streams import (
    SSE_HEADERS,
    anthropic_stream,
    openai_sse,
    openai_stream,
    responses_body,
    sse,
)

SECRETS = (
    "sk-ant-api03-SECRET-abcdefghijklmnopqrstuvwxyz",
    "Bearer sk-proj-SECRET-abcdefghijklmnop",
    "sid=SECRET42",
)
HEADERS = {
    "x-api-key": SECRETS[0],
    "authorization": SECRETS[1],
    "cookie": SECRETS[2],
    "anthropic-version": "2023-06-01",
}
MESSAGES = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "Time in Tokyo?"}],
}


def record(tmp_path: Path, replies: Any, send: Any) -> tuple[Any, Any]:
    """Run ``send(client, proxy_url)`` through an LLM proxy in front of a stub; return (send's result, events)."""
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


def test_streamed_anthropic_call_becomes_s1_s2_with_usage_cache_and_ttfb(tmp_path: Path) -> None:
    stream = sse(anthropic_stream())
    got, df = record(
        tmp_path,
        [
            Reply(
                200, Drip([stream[: len(stream) // 2], stream[len(stream) // 2 :]], delay_s=0.05), SSE_HEADERS
            )
        ],
        lambda c, url: c.post(
            url + "/v1/messages?beta=true", json={**MESSAGES, "stream": True}, headers=HEADERS
        ),
    )
    assert got.content == stream  # byte for byte
    s1, s2 = df.iloc[0], df.iloc[1]
    assert (s1.stage, s2.stage, s1.task_id, s1["round"]) == ("S1", "S2", "task-001", 1)
    assert (
        s1.tokens_in
        == 21 + 1800 + 384
        == s1[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum()
    )
    a1, a2 = attrs(s1), attrs(s2)
    assert (s1.cache_read_tokens, s1.cache_write_tokens, a1["api"]) == (1800, 384, "anthropic")
    assert a1["path"] == "/v1/messages" and a1["stream"] is True
    assert s2.tool == "get_time" and s2.tool_call_id == "toolu_01A" and s2.tokens_out == 58
    assert a2["finish_reason"] == "tool_use" and a2["tool_calls"][0]["name"] == "get_time"
    assert (
        a2["ttfb_ms"] == pytest.approx(s1.latency_ms, abs=0.01) and s2.latency_ms >= 40
    )  # the second chunk came 50 ms later
    assert s1.model == "claude-sonnet-4-5" and s1.provider == "anthropic"


def test_openai_chat_and_responses_and_non_streamed_calls(tmp_path: Path) -> None:
    chat = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    replies = [
        Reply(200, openai_sse(openai_stream()), SSE_HEADERS),
        Reply(200, openai_text("It is 7 pm."), {"x-request-id": "req_abc"}),
        Reply(200, responses_body(call=False)),
    ]

    def send(c: httpx.Client, url: str) -> list[int]:
        return [
            c.post(url + "/v1/chat/completions", json=chat).status_code,
            c.post(
                url + "/v1/chat/completions", json={**chat, "stream": False, "model": "gpt-4o"}
            ).status_code,
            c.post(
                url + "/v1/responses", json={"model": "gpt-5-mini", "input": "What time is it?"}
            ).status_code,
        ]

    got, df = record(tmp_path, replies, send)
    assert got == [200, 200, 200]
    assert df.stage.tolist() == ["S1", "S2", "S1", "S6", "S1", "S6"]
    assert df.tokens_in.dropna().tolist() == [1412, 480, 2006]
    assert df.iloc[0]["cache_read_tokens"] == 1280
    assert attrs(df.iloc[1])["tool_call_ids"] == ["call_A1", "call_B2"]
    assert attrs(df.iloc[3])["request_id"] == "req_abc"
    assert set(df.provider) == {"openai"} and df.iloc[4].tokenizer == "o200k_base"


def test_upstream_down_is_a_502_for_the_client_and_a_failed_call(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = tmp_path / "traces"
    with Recorder(out, topology=Topology.C_OTS) as rec, LLMProxy(dead, rec) as proxy:
        resp = httpx.post(proxy.url + "/v1/messages", json=MESSAGES, headers=HEADERS)
    assert resp.status_code == 502 and "cannot reach upstream" in resp.json()["error"]["message"]
    [row] = [r for _, r in pa.load(out).iterrows()]
    assert (row.stage, row.status, row.error_type) == ("S1", "error", "upstream_unreachable")
    assert "cannot reach upstream" in row.resp_preview and pd_isna(row.tokens_in)


def pd_isna(value: Any) -> bool:
    return bool(pd.isna(value))  # None, NaN or pandas' NA (token columns are nullable integers)


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit"), (529, "overloaded")])
def test_rate_limits_pass_through_with_retry_after_and_are_recorded(
    tmp_path: Path, status: int, kind: str
) -> None:
    body = anthropic_error(f"{kind}_error", "Try again later")
    replies = [
        Reply(status, body, {"retry-after": "30"}),
        Reply(200, anthropic_reply([{"type": "text", "text": "ok"}], stop="end_turn")),
    ]

    def send(c: httpx.Client, url: str) -> list[Any]:
        first = c.post(url + "/v1/messages", json=MESSAGES, headers=HEADERS)
        second = c.post(url + "/v1/messages", json=MESSAGES, headers=HEADERS)  # the client's retry
        return [first, second]

    (first, second), df = record(tmp_path, replies, send)
    assert first.status_code == status and first.headers["retry-after"] == "30" and first.json() == body
    assert second.status_code == 200
    failed, retry = df.iloc[0], df.iloc[1]
    assert (failed.status, failed.error_type) == ("error", kind)
    assert attrs(failed)["retry_after"] == "30" and attrs(failed)["http_status"] == status
    assert (retry.stage, retry.task_id, retry["round"], attrs(retry)["retry"]) == (
        "S5",
        failed.task_id,
        2,
        True,
    )


def test_stream_cut_mid_way_is_a_failed_call_and_the_client_sees_the_cut(tmp_path: Path) -> None:
    events = [sse([e]) for e in anthropic_stream()]
    replies = [Reply(200, Drip(events, cut_after=4), SSE_HEADERS)]

    def send(c: httpx.Client, url: str) -> str:
        try:
            c.post(url + "/v1/messages", json={**MESSAGES, "stream": True}, headers=HEADERS).read()
        except httpx.RemoteProtocolError as exc:
            return type(exc).__name__
        return "complete"

    got, df = record(tmp_path, replies, send)
    assert got == "RemoteProtocolError"
    [row] = [r for _, r in df.iterrows()]
    assert (row.stage, row.status, row.error_type) == ("S1", "error", "upstream_cut")
    assert attrs(row)["response_bytes"] == len(b"".join(events[:4]))


def test_client_disconnecting_mid_stream_is_a_cancelled_call(tmp_path: Path) -> None:
    events = [sse([e]) for e in anthropic_stream()]
    drip = Drip(events * 5, delay_s=0.05)

    def send(c: httpx.Client, url: str) -> None:
        with c.stream(
            "POST", url + "/v1/messages", json={**MESSAGES, "stream": True}, headers=HEADERS
        ) as resp:
            next(resp.iter_raw())
        time.sleep(0.3)

    _, df = record(tmp_path, [Reply(200, drip, SSE_HEADERS)], send)
    [row] = [r for _, r in df.iterrows()]
    assert (row.status, row.error_type) == ("cancelled", "client_disconnected")
    assert len(drip.sent) < len(drip.chunks)  # the upstream response was closed early


def test_body_that_is_not_json_is_forwarded_and_recorded_as_unparsed(tmp_path: Path) -> None:
    replies = [Reply(400, anthropic_error("invalid_request_error", "bad JSON"))]
    got, df = record(
        tmp_path, replies, lambda c, url: c.post(url + "/v1/messages", content=b"{not json", headers=HEADERS)
    )
    assert got.status_code == 400 and got.json()["error"]["message"] == "bad JSON"
    [row] = [r for _, r in df.iterrows()]
    assert (row.status, row.error_type) == ("error", "unparsed_request") and pd_isna(row.task_id)
    assert attrs(row)["http_status"] == 400 and attrs(row)["request_bytes"] == 9


def test_count_tokens_and_other_paths_are_forwarded_not_recorded(tmp_path: Path) -> None:
    replies = [Reply(200, {"input_tokens": 42}), Reply(200, {"data": [{"id": "claude-x"}]})]

    def send(c: httpx.Client, url: str) -> list[Any]:
        return [
            c.post(url + "/v1/messages/count_tokens", json=MESSAGES, headers=HEADERS).json(),
            c.get(url + "/v1/models", headers=HEADERS).json(),
            c.post(url + "/v1/messages", json=MESSAGES, headers=HEADERS).status_code,  # stub exhausted: 500
        ]

    got, df = record(tmp_path, replies, send)
    assert got == [{"input_tokens": 42}, {"data": [{"id": "claude-x"}]}, 500]
    assert df.stage.tolist() == ["S1"] and df.iloc[0].error_type == "server_error"


def test_no_credential_is_written_anywhere(tmp_path: Path) -> None:
    stream = sse(anthropic_stream(tool=None))
    body = {**MESSAGES, "stream": True, "system": "You are helpful."}
    record(
        tmp_path,
        [Reply(200, stream, SSE_HEADERS)],
        lambda c, url: c.post(url + "/v1/messages", json=body, headers=HEADERS),
    )
    files = [p for p in (tmp_path / "traces").rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for secret in ("SECRET", "sk-ant-api03", "sk-proj"):
            assert secret.encode() not in data, (path, secret)


def test_cli_listens_on_loopback_only_unless_told(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "promcp.cli",
        "proxy",
        "llm",
        "--out",
        str(tmp_path),
        "--listen",
        "0.0.0.0:0",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "loopback only unless --allow-remote" in proc.stderr
    assert "Traceback" not in proc.stderr
    bad = subprocess.run([*cmd[:-1], "nowhere"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not HOST:PORT" in bad.stderr


def test_cli_proxy_runs_until_sigterm_and_finalizes(tmp_path: Path) -> None:
    reply = anthropic_reply([{"type": "text", "text": "hello"}], stop="end_turn")
    with StubServer([Reply(200, reply)]) as stub:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "promcp.cli",
                "proxy",
                "llm",
                "--upstream",
                stub.url,
                "--out",
                str(tmp_path),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = line.split()[3]
        assert url.startswith("http://127.0.0.1:")
        assert "export ANTHROPIC_BASE_URL=" in proc.stderr.readline()
        assert httpx.post(url + "/v1/messages", json=MESSAGES, headers=HEADERS).json() == reply
        proc.terminate()
        rest = proc.stderr.read()
        assert proc.wait(30) == 0
    assert "1 LLM call(s) in 1 task(s)" in rest
    df = pa.load(tmp_path)
    assert df.stage.tolist() == ["S1", "S6"] and set(df.source) == {"proxy:llm"}


def test_bodies_nested_thousands_deep_are_relayed_and_recorded_as_unparsed(tmp_path: Path) -> None:
    """A tool input or a tool result nested 5,000–100,000 deep: the client gets the upstream's answer and every
    call has its event (``unparsed_request``), never a RecursionError with no event at all."""

    def nested(depth: int) -> str:
        return '{"a":' * depth + "1" + "}" * depth

    def body(depth: int, where: str) -> bytes:
        deep = nested(depth)
        if where == "input":
            blocks = f'[{{"type":"tool_use","id":"t1","name":"x","input":{deep}}}]'
            messages = f'[{{"role":"user","content":"hi"}},{{"role":"assistant","content":{blocks}}}]'
        else:
            result = f'[{{"type":"tool_result","tool_use_id":"t1","content":[{{"type":"text","text":"x","d":{deep}}}]}}]'
            messages = f'[{{"role":"user","content":{result}}}]'
        return f'{{"model":"claude-sonnet-4-5","max_tokens":10,"messages":{messages}}}'.encode()

    cases = [(5_000, "input"), (100_000, "result"), (20_000, "input")]
    text = [{"type": "text", "text": "ok"}]
    replies = [Reply(200, anthropic_reply(text, stop="end_turn")) for _ in range(len(cases) + 1)]

    def send(c: Any, url: str) -> list[int]:
        codes = [
            c.post(url + "/v1/messages", content=body(d, w), headers=HEADERS).status_code for d, w in cases
        ]
        codes.append(c.post(url + "/v1/messages", json=MESSAGES, headers=HEADERS).status_code)
        return codes

    codes, df = record(tmp_path, replies, send)
    assert codes == [200, 200, 200, 200]
    unparsed = df[df["error_type"] == "unparsed_request"]
    assert len(unparsed) == 3 and all("nested deeper" in p for p in unparsed["resp_preview"])
    assert df[df["stage"] == "S6"]["tokens_out"].notna().all()  # the normal call after them is whole


def test_a_long_stream_is_relayed_whole_and_recorded_bounded(tmp_path: Path) -> None:
    """A stream far longer than the head and tail promcp keeps: every byte reaches the client, the call keeps its
    usage and stop reason (in the tail), and the frames in between are counted, not held."""
    from promcp.proxy.llm import _exchange

    events = anthropic_stream(tool=None, text="ab", output_tokens=123_456)
    head, tail = events[:4], events[4:]
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x" * 500}}
    middle = [("content_block_delta", delta)] * 12_000  # ~6.7 MB of frames, over HEAD_BYTES + TAIL_BYTES
    chunks = [sse([(name, data)]) for name, data in [*head, *middle, *tail]]
    total = sum(len(c) for c in chunks)
    assert total > 3 * (_exchange.HEAD_BYTES + _exchange.TAIL_BYTES)
    replies = [Reply(200, Drip(chunks), SSE_HEADERS)]
    body = {**MESSAGES, "stream": True}
    got, df = record(
        tmp_path, replies, lambda c, url: c.post(url + "/v1/messages", json=body, headers=HEADERS)
    )
    assert got.status_code == 200 and len(got.content) == total  # relayed whole
    out = df[df["stage"] == "S6"].iloc[0]
    a = attrs(out)
    assert out["tokens_out"] == 123_456 and out["status"] == "ok"  # usage from the tail
    assert a["stream_frames_not_read"] > 9_000 and a["stream_bytes_not_read"] > 4_000_000
    assert a["stream_frames"] + a["stream_frames_not_read"] == len(chunks)  # every frame read or counted
