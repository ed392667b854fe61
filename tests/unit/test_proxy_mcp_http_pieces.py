"""Pieces of the HTTP MCP proxy: the legacy SSE endpoint rewriter (alone and through the core's rewrite hook), the
session routing of promcp/proxy/mcp/http_exchanges.py fed synthetic exchanges on a fake clock, and the probe rule."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pandas as pd
import pytest

from promcp.analysis.tables import session_init
from promcp.events import Phase, Status
from promcp.proxy._http import Outcome, ProxyRequest, ProxyResponse
from promcp.proxy.mcp.http import McpHttpProxy
from promcp.proxy.mcp.http_exchanges import HttpSessions
from promcp.proxy.mcp.session_registry import SessionRegistry
from promcp.proxy.mcp.sse_endpoint import EndpointRewriter, session_query
from promcp.stages import Failure, FakeClock, initialize_event
from promcp.tokenizers import get as get_tokenizer
from tests.stubs.llm_http import Drip, Reply, StubServer

ENDPOINT = b"event: endpoint\r\ndata: http://0.0.0.0:8080/messages?sessionId=abc\r\n\r\n"
MESSAGE = b'event: message\ndata: {"jsonrpc":"2.0","method":"ping"}\n\n'


def test_endpoint_rewriter_points_absolute_urls_back_at_the_proxy() -> None:
    body = ENDPOINT + MESSAGE
    expected = body.replace(b"http://0.0.0.0:8080", b"http://127.0.0.1:9")
    for cut in range(len(body) + 1):  # the first event may arrive in any pieces
        rw = EndpointRewriter("http://127.0.0.1:9")
        got = b"".join(rw(piece) for piece in (body[:cut], body[cut:]) if piece) + rw(b"")  # b"": the end
        assert got == expected, cut
        assert rw.rewrote
    relative = b"event: endpoint\ndata: /messages/?session_id=ff\n\n" + MESSAGE
    rw = EndpointRewriter("http://127.0.0.1:9")
    assert rw(relative) == relative and not rw.rewrote  # a path already reaches the proxy
    other = b"event: message\ndata: http://0.0.0.0:8080/x\n\n"
    assert EndpointRewriter("http://h:1")(other) == other  # only the endpoint event is touched
    rw = EndpointRewriter("http://h:1")
    assert rw(b"data: " + b"x" * 70_000) == b"data: " + b"x" * 70_000  # no event end within 64 KiB: let go
    rw = EndpointRewriter("http://h:1")
    assert rw(b"event: endpoint\n") == b"" and rw(b"") == b"event: endpoint\n"  # held bytes go out at the end
    assert session_query("/messages?sessionId=abc") == "abc" and session_query("/m/?session_id=x") == "x"
    assert session_query("/mcp") is None


def test_core_rewrites_the_endpoint_event_of_a_legacy_stream(tmp_path: Path) -> None:
    """Through the real core: the client reads the proxy's own origin in the endpoint event, the rest unchanged."""
    stream = Drip([ENDPOINT, MESSAGE], delay_s=0.05)
    sse = {"content-type": "text/event-stream"}
    with (
        StubServer([Reply(200, stream, sse)]) as stub,
        McpHttpProxy(stub.url + "/sse", out=tmp_path / "ds", name="legacy") as proxy,
        httpx.Client() as client,
        client.stream("GET", proxy.url) as resp,
    ):
        body = b"".join(resp.iter_raw())
    origin = f"http://127.0.0.1:{proxy.port}".encode()
    assert body == ENDPOINT.replace(b"http://0.0.0.0:8080", origin) + MESSAGE


# -- sessions, fed synthetic exchanges ---------------------------------------------------------------------------


class Driver:
    """Plays exchanges into an HttpSessions worker as the core would (request, head, chunks, end)."""

    def __init__(self, out: Path, run_id: str | None = None) -> None:
        self.clock = FakeClock(step_ms=1)
        tok = get_tokenizer("o200k_base")
        registry = SessionRegistry(
            out=out,
            name="srv",
            run_id=run_id,
            tokenizer=lambda: tok,
            content="full",
            max_content_bytes=None,
            timeout_s=None,
            meta={},
        )
        self.sessions = HttpSessions(registry, max_message=1 << 20)

    def exchange(
        self,
        method: str,
        body: Any = None,
        *,
        status: int = 200,
        answer: Any = None,
        sse: bool = False,
        session: str | None = None,
        new_session: str | None = None,
        target: str = "/mcp",
        error: str | None = None,
    ) -> None:
        now = self.clock.now
        headers = [("content-type", "application/json")]
        if session:
            headers.append(("mcp-session-id", session))
        raw = json.dumps(body).encode() if body is not None else b""
        request = ProxyRequest(method, target, headers, raw, now(), "127.0.0.1:1")
        ex = self.sessions.observe(request, now())
        sent = now()
        if error is not None:
            ex.end(Outcome(end=now(), error=error, message=error, status=502, sent=None))
            return
        rheaders = [("content-type", "text/event-stream" if sse else "application/json")]
        if new_session:
            rheaders.append(("mcp-session-id", new_session))
        ex.response(ProxyResponse(status, rheaders, now(), sent))
        data = b""
        if answer is not None:
            text = json.dumps(answer).encode()
            data = b"event: message\ndata: " + text + b"\n\n" if sse else text
            ex.chunk(data, now())
        ex.end(Outcome(end=now(), status=status, bytes_to_client=len(data), sent=sent))

    def stop(self) -> None:
        self.sessions.stop(self.clock.now())


def _init(i: int) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": params}


def _init_result(i: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "serverInfo": {"name": "s", "version": "2"},
        },
    }


def _call(i: int, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    req = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"m": text}},
    }
    res = {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": text}]}}
    return req, res


def _runs(out: Path) -> list[pd.DataFrame]:
    return [pd.read_parquet(f) for f in sorted(out.glob("topology=c-ots/run_id=*/events.parquet"))]


def test_sessions_apart_by_id_same_jsonrpc_ids_each_its_own_run(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    d = Driver(out)
    d.exchange("POST", _init(1), answer=_init_result(1), sse=True, new_session="A")
    d.exchange("POST", _init(1), answer=_init_result(1), sse=True, new_session="B")
    qa, ra = _call(2, "alpha")  # both sessions use JSON-RPC id 2
    qb, rb = _call(2, "beta")
    d.exchange("POST", qa, answer=ra, session="A", sse=True)
    d.exchange("POST", qb, answer=rb, session="B")  # a JSON answer this time
    d.exchange("DELETE", session="A")
    deadline = (
        time.monotonic() + 20
    )  # the first run written loads pyarrow (and the recorder its secret scanner)
    while not _runs(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_runs(out)) == 1  # A's run is finalized by its DELETE while B goes on
    d.stop()
    runs = _runs(out)
    assert len(runs) == 2
    for ev in runs:
        s4 = ev[ev["stage"] == "S4"]
        assert len(s4) == 1 and s4.iloc[0]["status"] == "ok"
        assert {"ready", "initialize"} <= set(ev.loc[ev["stage"] == "INIT", "phase"])
        ready = ev[ev["phase"] == "ready"].iloc[0]
        assert json.loads(ready["attrs"])["session"] not in ("A", "B")  # a digest, never the id
    assert {ev[ev["stage"] == "S4"].iloc[0]["resp_preview"] for ev in runs} == {"alpha", "beta"}
    deleted = [ev for ev in runs if (ev["attrs"].fillna("").str.contains('"DELETE"')).any()]
    assert len(deleted) == 1


def test_probe_then_initialize_one_session_and_failures(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    d = Driver(out, run_id="fixed")
    discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}
    refused = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Server not initialized"}}
    d.exchange("POST", discover, status=400, answer=refused)
    d.exchange("POST", _init(1), answer=_init_result(1), new_session="S")
    batch = [_call(2, "x")[0], _call(3, "y")[0]]
    d.exchange("POST", batch, answer=[_call(2, "x")[1], _call(3, "y")[1]], session="S")
    q, _ = _call(4, "lost")
    d.exchange("POST", q, session="S", error="upstream_unreachable")
    q, _ = _call(5, "gone")
    d.exchange(
        "POST",
        q,
        session="S",
        status=404,
        answer={"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}},
    )
    d.stop()
    (ev,) = _runs(out)
    init = ev[ev["stage"] == "INIT"]
    assert list(init["phase"]) == ["ready", "probe", "initialize"]
    probe = init[init["phase"] == "probe"].iloc[0]
    assert json.loads(probe["attrs"])["http_status"] == 400 and probe["error_type"] == "mcp_error"
    s4 = ev[ev["stage"] == "S4"].set_index("jsonrpc_id")
    assert s4.loc["2", "status"] == "ok" and s4.loc["3", "status"] == "ok"
    assert json.loads(s4.loc["2", "attrs"]).get("batch") == 2
    s3 = ev[ev["stage"] == "S3"].set_index("jsonrpc_id")
    assert s3.loc["4", "error_type"] == "upstream_unreachable" and "4" not in s4.index  # never sent
    assert (s4.loc["5", "error_type"], json.loads(s4.loc["5", "attrs"])["http_status"]) == ("mcp_error", 404)
    table = session_init(ev)
    assert table["failures"].sum() == 0 and table["probes"].sum() == 1


def test_probe_rule() -> None:
    clock = FakeClock(step_ms=1)
    common = {"server": "s", "transport": None, "start": clock.now(), "end": clock.now(), "handshake": None}
    refused = Failure(Status.ERROR, "mcp_error", "Method not found", {"jsonrpc_code": -32601})
    assert initialize_event(method="server/discover", failure=refused, **common).phase is Phase.PROBE
    http_4xx = Failure.of("bad_request", "HTTP 400", http_status=400)
    assert initialize_event(method="server/discover", failure=http_4xx, **common).phase is Phase.PROBE
    down = Failure.of("upstream_unreachable", "refused", http_status=502)
    assert initialize_event(method="server/discover", failure=down, **common).phase is Phase.INITIALIZE
    assert initialize_event(method="initialize", failure=refused, **common).phase is Phase.INITIALIZE


@pytest.mark.parametrize("run_id", [None, "one-run"])
def test_legacy_sse_session_from_its_endpoint_event(tmp_path: Path, run_id: str | None) -> None:
    out = tmp_path / "ds"
    d = Driver(out, run_id=run_id)
    now = d.clock.now
    get = d.sessions.observe(ProxyRequest("GET", "/sse", [], b"", now(), "c"), now())
    get.response(ProxyResponse(200, [("content-type", "text/event-stream")], now(), now()))
    get.chunk(b"event: endpoint\ndata: /messages?sessionId=L1\n\n", now())
    d.exchange("POST", _init(1), status=202, target="/messages?sessionId=L1")
    get.chunk(b"event: message\ndata: " + json.dumps(_init_result(1)).encode() + b"\n\n", now())
    q, r = _call(2, "z")
    d.exchange("POST", q, status=202, target="/messages?sessionId=L1")
    get.chunk(b"event: mess", now())  # an event split across chunks
    get.chunk(b"age\ndata: " + json.dumps(r).encode() + b"\n\n", now())
    get.end(Outcome(end=now(), error="client_disconnected", status=200, sent=now()))
    time.sleep(0.3)
    if run_id is None:  # the stream's end ended the session: its run is finalized at once
        assert len(_runs(out)) == 1
    d.stop()
    (ev,) = _runs(out)
    assert set(ev["transport"]) == {"sse"}
    assert ev.loc[ev["stage"] == "S4", "status"].tolist() == ["ok"]
    stream = ev[(ev["stage"] == "MCP") & ev["mcp_method"].isna()].iloc[0]
    assert json.loads(stream["attrs"])["ended_by"] == "client" and stream["status"] == "ok"


def test_a_late_message_for_an_ended_session_goes_into_that_sessions_run(tmp_path: Path) -> None:
    """A client's notifications/cancelled that reaches the proxy after its DELETE ended the session (the mcp SDK
    sends both as it gives up on a call) is written into the session's run, not a run of its own."""
    out = tmp_path / "ds"
    d = Driver(out)
    d.exchange("POST", _init(1), answer=_init_result(1), sse=True, new_session="A")
    q, _r = _call(2, "alpha")
    d.exchange("POST", q, status=202, session="A")  # accepted; the answer would come on a stream
    d.exchange("DELETE", session="A")
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "t"},
    }
    d.exchange("POST", cancel, status=404, session="A")  # the server forgot the session
    d.stop()
    deadline = time.monotonic() + 20
    while list(out.glob("_journal/*.parts/*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    (ev,) = _runs(out)
    assert "notifications/cancelled" in set(ev["mcp_method"])
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert s4["error_type"] == "session_closed"  # the DELETE ended the call; the late cancel changes nothing


def test_a_full_recording_queue_reports_the_exchange_lost_and_the_next_one_is_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker's queue (promcp/bounded_worker.py) refuses a hook: the loop never waits, the exchange is marked
    lost, only its end reaches the worker, which closes its requests ``no_response`` and counts and says it; the
    next exchange, once there is room, is recorded whole."""
    from promcp.bounded_worker import BoundedWorker

    out = tmp_path / "ds"
    d = Driver(out)
    s = d.sessions
    running = s._worker
    running._on_stop = None  # swapped for a small queue the test fills before its thread starts
    running.close(timeout=5)
    s._worker = BoundedWorker(
        s._handle_item, name="t", max_items=2, full="refuse", on_stop=s._stopped, start=False
    )
    d.exchange(
        "POST", _init(1), answer=_init_result(1), new_session="A"
    )  # request, head queued; body refused
    assert s._worker.stats.refused == 1
    s._worker.start()
    assert s._worker.flush(timeout=20)
    s._worker.max_items = None  # room again (2 records would not keep up with the next exchange either)
    q, r = _call(2, "after")
    d.exchange("POST", q, answer=r, session="A")
    d.stop()
    said = [r.getMessage() for r in caplog.records if r.name.startswith("promcp.proxy.mcp.")]
    assert s.lost == 1 and any("promcp proxy: " in m and "relayed but not recorded" in m for m in said), said
    (ev,) = _runs(out)
    init = ev[(ev["stage"] == "INIT") & (ev["phase"] == "initialize")].iloc[0]
    assert init["error_type"] == "no_response"  # reported, not silently dropped
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert s4["status"] == "ok" and s4["resp_preview"] == "after"
