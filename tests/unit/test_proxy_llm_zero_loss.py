"""Zero loss: a response the client received whole is recorded whole, whoever closes first.

Codex closes its connection as soon as it has read ``response.completed``; when the upstream's chunked terminator
lags behind its final event, the proxy sees the client go away mid-body. Replayed here for every streamed API
family with a real proxy, a real upstream (the stub server, terminator 300 ms after the last event) and a raw
socket client that hangs up the moment it has read the stream's end marker: the call must be recorded answered,
with its usage and output, ending when its last byte reached the client. A client that hangs up *before* the end
marker still makes a cancelled call.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

import promcp.analysis as pa
from promcp.events import Topology
from promcp.proxy.llm import LLMProxy
from promcp.recorder import Recorder
from tests.stubs.llm_http import Drip, Reply, StubServer
from tests.stubs.llm_streams import (
    SSE_HEADERS,
    anthropic_stream,
    ndjson,
    ollama_stream,
    openai_stream,
    responses_body,
    responses_stream,
    sse,
)

TERMINATOR_LAG_S = 0.3


def _families() -> dict[str, tuple[str, dict[str, Any], list[bytes], bytes, int, int]]:
    """family → (path, request body, the upstream's chunks, the end marker, input tokens, output tokens)."""
    chat = openai_stream(tool_calls=False)
    return {
        "anthropic": (
            "/v1/messages",
            {"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": True, "messages": [_user()]},
            [sse([e]) for e in anthropic_stream()],
            b"message_stop",
            21 + 1800 + 320 + 64,
            58,
        ),
        "chat-completions": (
            "/v1/chat/completions",
            {"model": "gpt-4o-mini", "stream": True, "messages": [_user()]},
            [sse([(None, c)]) for c in chat] + [sse([(None, "[DONE]")])],
            b"[DONE]",
            1412,
            42,
        ),
        "responses": (
            "/v1/responses",
            {"model": "gpt-5-mini", "stream": True, "input": "Time in Tokyo?"},
            [sse([e]) for e in responses_stream()],
            b"response.completed",
            responses_body()["usage"]["input_tokens"],
            responses_body()["usage"]["output_tokens"],
        ),
        "ollama": (
            "/api/chat",
            {"model": "qwen2.5:7b", "messages": [_user()]},
            [ndjson([line]) for line in ollama_stream()],
            b'"done": true',
            301,
            19,
        ),
    }


def _user() -> dict[str, str]:
    return {"role": "user", "content": "Time in Tokyo?"}


def _hang_up_after(url: str, path: str, body: dict[str, Any], marker: bytes) -> bytes:
    """POST ``body``, read until ``marker`` has arrived (or the response ends), close at once; the bytes read."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
    head += f"content-length: {len(data)}\r\nauthorization: Bearer sk-zero-loss-secret\r\n\r\n"
    got = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + data)
        while marker not in got:
            piece = sock.recv(65536)
            if not piece:
                break
            got += piece
    return got


def _record(tmp_path: Path, path: str, body: dict[str, Any], drip: Drip, marker: bytes) -> tuple[bytes, Any]:
    out = tmp_path / "traces"
    headers = {"content-type": "application/x-ndjson"} if path == "/api/chat" else SSE_HEADERS
    with (
        StubServer([Reply(200, drip, headers)]) as stub,
        Recorder(out, topology=Topology.C_OTS, source="proxy:llm") as rec,
        LLMProxy(stub.url, rec) as proxy,
    ):
        got = _hang_up_after(proxy.url, path, body, marker)
        time.sleep(
            TERMINATOR_LAG_S + 0.2
        )  # the upstream's terminator comes (and finds the connection closed)
    return got, pa.load(out).sort_values("seq")


@pytest.mark.parametrize("family", ["anthropic", "chat-completions", "responses", "ollama"])
def test_client_closing_before_the_terminator_loses_nothing(tmp_path: Path, family: str) -> None:
    path, body, chunks, marker, tokens_in, tokens_out = _families()[family]
    drip = Drip(chunks, delay_s=0.01, end_delay_s=TERMINATOR_LAG_S)
    got, df = _record(tmp_path, path, body, drip, marker)
    assert chunks[-1] in got  # the client read the whole response …
    assert not got.endswith(b"0\r\n\r\n")  # … and hung up before the chunked terminator
    s1, out = (r for _, r in df.iterrows())
    assert s1.stage == "S1" and s1.status == "ok" and s1.tokens_in == tokens_in
    assert out.stage in ("S2", "S6") and out.status == "ok", (out.status, out.error_type)
    assert out.tokens_out == tokens_out
    attrs = json.loads(out["attrs"])
    assert attrs["client_closed_before_terminator"] is True
    assert attrs["response_bytes"] == len(b"".join(chunks))
    # the call ended when its last byte reached the client, not when the lagging terminator would have come
    assert out.t_end_ns - s1.t_start_ns < (sum([0.01] * len(chunks)) + TERMINATOR_LAG_S) * 1e9
    assert "sk-zero-loss-secret" not in df.to_json()


@pytest.mark.parametrize("family", ["anthropic", "responses"])
def test_client_closing_before_the_end_marker_is_still_a_cancelled_call(tmp_path: Path, family: str) -> None:
    path, body, chunks, _marker, _in, _out = _families()[family]
    drip = Drip(chunks, delay_s=0.15, end_delay_s=TERMINATOR_LAG_S)
    first_event = b"message_start" if family == "anthropic" else b"response.created"
    _, df = _record(tmp_path, path, body, drip, first_event)
    [row] = [r for _, r in df.iterrows()]
    assert (row.status, row.error_type) == ("cancelled", "client_disconnected")
