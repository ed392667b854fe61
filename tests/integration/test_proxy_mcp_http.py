"""``promcp proxy mcp --upstream URL`` end to end: real MCP servers over streamable HTTP and legacy SSE (the npm
``everything`` server, promcp's own ``dates`` server, the mcp SDK's server in ``tests/fault_servers/faulty.py``)
driven by the mcp SDK client through the proxy, with byte captures on both sides (a TCP tee between client and
proxy and another between proxy and server), faults, secrets, and ``promcp record`` with Claude Code."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pandas as pd
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from promcp.analysis.tables import session_init
from promcp.proxy.mcp.http import McpHttpProxy
from promcp.stages import tool_footprints
from promcp.tokenizers import get as get_tokenizer
from promcp.wire.framing import SSEDecoder
from promcp.wire.mcp import tool_text_of
from tests.conftest import REPO
from tests.stubs.tcp_tee import TcpTee, exchanges

pytestmark = pytest.mark.servers

PROMCP = [sys.executable, "-m", "promcp.cli"]
BIN = REPO / "node_modules" / ".bin"
EVERYTHING = BIN / "mcp-server-everything"
FAULTY = REPO / "tests" / "fault_servers" / "faulty.py"
ACCEPT = {"accept": "application/json, text/event-stream"}
DISCOVER = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}
SECRETS = {
    "authorization": "Bearer promcp-secret-bearer-7f3a9c",
    "cookie": "sid=promcp-secret-cookie-51d2",
    "x-api-key": "promcp-secret-apikey-88e1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}) before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {timeout} s")


@contextlib.contextmanager
def server(command: Sequence[str], port: int, log: Path, env: dict[str, str] | None = None) -> Iterator[None]:
    """A real MCP server on ``port`` for the test's duration."""
    with log.open("wb") as fh:
        proc = subprocess.Popen(list(command), env={**os.environ, **(env or {})}, stdout=fh, stderr=fh)
        try:
            wait_port(port, proc)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def everything(mode: str, port: int, tmp: Path) -> contextlib.AbstractContextManager[None]:
    if not EVERYTHING.exists():
        pytest.skip("mcp-server-everything is not installed (run `make install`)")
    return server(["node", str(EVERYTHING), mode], port, tmp / f"everything-{mode}.log", {"PORT": str(port)})


def faulty(mode: str, port: int, tmp: Path, **env: str) -> contextlib.AbstractContextManager[None]:
    return server([sys.executable, str(FAULTY), mode, "--http", str(port)], port, tmp / f"{mode}.log", env)


async def _session(
    url: str,
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    sse: bool = False,
    headers: dict[str, str] | None = None,
    read_timeout_s: float | None = None,
) -> dict[str, Any]:
    if sse:
        transport: Any = sse_client(url, headers=headers)
    else:
        client = httpx.AsyncClient(headers=headers or {}, timeout=httpx.Timeout(30, read=300))
        transport = streamable_http_client(url, http_client=client, max_sse_event_size=None)
    async with transport as (r, w), ClientSession(r, w) as s:
        init = await s.initialize()
        listed = await s.list_tools()
        results = []
        for tool, args in calls:
            timeout = None if read_timeout_s is None else read_timeout_s
            results.append(await s.call_tool(tool, args, read_timeout_seconds=timeout))
        return {"init": init, "tools": listed.tools, "results": results}


def session(url: str, calls: Sequence[tuple[str, dict[str, Any]]], **kw: Any) -> dict[str, Any]:
    return asyncio.run(_session(url, calls, **kw))


def outcome(url: str, calls: Sequence[tuple[str, dict[str, Any]]], **kw: Any) -> str:
    """What the client saw, in a form to compare with and without the proxy."""
    try:
        res = session(url, calls, **kw)
        return "ok:" + res["results"][-1].content[0].text[:60]
    except BaseException as exc:  # the SDK raises from its task groups
        while isinstance(exc, BaseExceptionGroup):
            exc = exc.exceptions[0]
        if isinstance(exc, MCPError):
            return f"mcp:{exc.error.code}:{exc.error.message[:40]}"
        return f"exc:{type(exc).__name__}"


def runs(out: Path, n: int | None = 1, timeout: float = 30.0) -> list[pd.DataFrame]:
    """The finalized runs of a dataset (waits until ``n`` exist; ``None``: at least one, then all there are)."""
    deadline = time.monotonic() + timeout
    while True:
        files = sorted(out.glob("topology=c-ots/run_id=*/events.parquet"))
        if len(files) >= (n or 1) or time.monotonic() > deadline:
            if n is None:
                time.sleep(0.5)
                files = sorted(out.glob("topology=c-ots/run_id=*/events.parquet"))
                assert files, sorted(map(str, out.rglob("*")))
            else:
                assert len(files) == n, sorted(map(str, out.rglob("*")))
            return [pd.read_parquet(f) for f in files]
        time.sleep(0.1)


def attrs(row: Any) -> dict[str, Any]:
    return json.loads(row["attrs"]) if isinstance(row["attrs"], str) else {}


def sse_data(body: bytes) -> list[bytes]:
    decoder = SSEDecoder()
    return [e.data.encode() for e in decoder.feed(body) + decoder.close() if e.data]


def per_tool(ev: pd.DataFrame) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, row in ev[ev["phase"] == "tools_discovery"].iterrows():
        out.update({k: v["tokens"] for k, v in attrs(row)["tools"].items()})
    return out


def test_streamable_http_bytes_unchanged_and_stages_recorded(tmp_path: Path) -> None:
    """everything over streamable HTTP, Claude Code's server/discover probe first, secrets in the headers; then the
    same server over stdio through the stdio proxy gives the same per-tool footprints."""
    out = tmp_path / "ds"
    port = free_port()
    calls = [("echo", {"message": "héllo"}), ("get-sum", {"a": 2, "b": 3})]
    with (
        everything("streamableHttp", port, tmp_path),
        TcpTee(port) as server_side,
        McpHttpProxy(f"http://127.0.0.1:{server_side.port}/mcp", out=out, name="everything") as proxy,
        TcpTee(proxy.port) as client_side,
    ):
        url = f"http://127.0.0.1:{client_side.port}/mcp"
        probe = httpx.post(url, json=DISCOVER, headers=ACCEPT)
        assert probe.status_code == 400  # the server speaks the handshake protocol only
        seen = session(url, calls, headers=SECRETS)
        (ev,) = runs(out)  # finalized by the client's DELETE, while the proxy still runs

    # every exchange the client saw is the one the server had: status, end-to-end headers, body bytes
    def captured(tee: TcpTee) -> collections.Counter[Any]:
        return collections.Counter(e for c in tee.conns for e in exchanges(c))

    server_ex, client_ex = captured(server_side), captured(client_side)

    def brief(c: collections.Counter[Any]) -> list[str]:
        return [
            f"{e.method} {e.request_body[:40]!r} -> {e.status} {len(e.response_body)} {e.response_body[:40]!r} {e.complete}"
            for e in c
        ]

    assert client_ex == server_ex, (brief(client_ex - server_ex), brief(server_ex - client_ex))
    methods = collections.Counter(e.method for e in server_ex.elements())
    assert methods["DELETE"] == 1 and methods["GET"] >= 1 and methods["POST"] >= 5
    with_secrets = [
        e for e in server_ex.elements() if dict(e.request_headers).get("cookie") == SECRETS["cookie"]
    ]
    assert len(with_secrets) >= 6  # forwarded as the client sent them (and never recorded: below)

    # one run: the probe, the session's start-up, the calls, the GET stream and the DELETE
    init = ev[ev["stage"] == "INIT"]
    assert list(init["phase"])[:3] == ["ready", "probe", "initialize"]
    probe_ev = init[init["phase"] == "probe"].iloc[0]
    assert (probe_ev["mcp_method"], probe_ev["status"], probe_ev["error_type"]) == (
        "server/discover",
        "error",
        "mcp_error",
    )
    assert attrs(probe_ev)["http_status"] == 400 and attrs(probe_ev)["jsonrpc_code"] == -32000
    shake = init[init["phase"] == "initialize"].iloc[0]
    assert shake["status"] == "ok" and shake["protocol_version"] == seen["init"].protocol_version
    assert attrs(shake)["server_name"] == seen["init"].server_info.name
    assert set(ev["transport"]) == {"streamable_http"} and set(ev["source"]) == {"proxy:mcp"}
    table = session_init(ev)
    assert table["failures"].sum() == 0 and table["probes"].sum() == 1 and table["sessions"].sum() == 1

    # wire bytes: the JSON-RPC message as sent (the SSE event's data), per answer
    answers = {}
    for e in server_ex:
        for data in sse_data(e.response_body) if e.status == 200 else []:
            msg = json.loads(data)
            if "id" in msg:
                answers[str(msg["id"])] = len(data)
    assert shake["footprint_bytes"] == answers[shake["jsonrpc_id"]]
    assert per_tool(ev) == {
        k: v["tokens"]
        for k, v in tool_footprints(
            [tool_text_of(t) for t in seen["tools"]], get_tokenizer("o200k_base")
        ).items()
    }
    s3, s4 = ev[ev["stage"] == "S3"], ev[ev["stage"] == "S4"]
    assert list(s3["tool"]) == [t for t, _ in calls] == list(s4["tool"])
    assert (s3["timing_quality"] == "exact").all() and (s4["timing_quality"] == "exact").all()
    assert (s4["status"] == "ok").all() and (s4["latency_ms"] > 0).all()
    for (_, q), (_, a) in zip(s3.iterrows(), s4.iterrows(), strict=True):
        assert q["t_end_ns"] <= a["t_start_ns"] and a["footprint_bytes"] == answers[a["jsonrpc_id"]]
    transport = ev[(ev["stage"] == "MCP") & ev["mcp_method"].isna()]
    assert {attrs(r)["http_method"] for _, r in transport.iterrows()} == {"GET", "DELETE"}

    # nothing secret was written: header values, the session id
    blobs = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    for value in SECRETS.values():
        assert value.encode() not in blobs
    for e in server_ex:
        sid = dict(e.response_headers).get("mcp-session-id")
        if sid:
            assert sid.encode() not in blobs

    # the same server over stdio: the same tools, the same footprints
    stdio_out = tmp_path / "stdio"
    cmd = [
        *PROMCP,
        "proxy",
        "mcp",
        "--out",
        str(stdio_out),
        "--run-id",
        "stdio",
        "--",
        "node",
        str(EVERYTHING),
    ]

    async def over_stdio() -> None:
        async with (
            stdio_client(StdioServerParameters(command=cmd[0], args=cmd[1:])) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            await s.list_tools()

    asyncio.run(over_stdio())
    (stdio_ev,) = runs(stdio_out)
    assert per_tool(stdio_ev) == per_tool(ev) and len(per_tool(ev)) >= 10


@pytest.mark.parametrize("which", ["dates", "everything"])
def test_legacy_sse_through_the_cli(which: str, tmp_path: Path) -> None:
    """A legacy SSE server (GET /sse + POST to the endpoint it names) through `promcp proxy mcp --upstream`."""
    out, port, listen = tmp_path / "ds", free_port(), free_port()
    if which == "dates":
        srv = server(
            [sys.executable, "-m", "promcp.servers.dates", "--transport", "sse", "--port", str(port)],
            port,
            tmp_path / "dates.log",
        )
        calls = [("days_between", {"start": "2024-01-01", "end": "2024-03-01"})]
        expected = "60"
    else:
        srv = everything("sse", port, tmp_path)
        calls = [("echo", {"message": "over sse"})]
        expected = "Echo: over sse"
    with srv:
        proxy = subprocess.Popen(
            [
                *(*PROMCP, "proxy", "mcp", "--upstream", f"http://127.0.0.1:{port}/sse"),
                *("--listen", f"127.0.0.1:{listen}", "--out", str(out), "--name", which),
            ],
            stderr=subprocess.PIPE,
        )
        try:
            wait_port(listen, proxy)
            seen = session(f"http://127.0.0.1:{listen}/sse", calls, sse=True)
            (ev,) = runs(out)  # the session ended with its event stream: its run is finalized
        finally:
            proxy.send_signal(signal.SIGTERM)
            _, err = proxy.communicate(timeout=30)
    assert proxy.returncode == 0, err
    assert b"1 session(s) recorded" in err
    assert seen["results"][0].content[0].text == expected
    assert set(ev["transport"]) == {"sse"}
    assert {"ready", "initialize", "tools_discovery"} <= set(ev.loc[ev["stage"] == "INIT", "phase"])
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert (s4["status"], s4["tool"], s4["timing_quality"]) == ("ok", calls[0][0], "exact")
    stream = ev[(ev["stage"] == "MCP") & ev["mcp_method"].isna()].iloc[0]
    assert attrs(stream)["legacy_sse"] is True and attrs(stream)["stream_messages"] >= 3


def test_server_down_gives_a_clear_502_and_events(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with McpHttpProxy(f"http://127.0.0.1:{free_port()}/mcp", out=out, name="down") as proxy:
        answer = httpx.post(proxy.url, json=DISCOVER, headers=ACCEPT)
        assert answer.status_code == 502
        error = answer.json()["error"]
        assert error["type"] == "proxy_error" and "cannot reach upstream" in error["message"]
        assert outcome(proxy.url, []).startswith(("mcp:", "exc:"))
    (ev,) = runs(out)
    ready = ev[ev["phase"] == "ready"].iloc[0]
    assert (ready["status"], ready["error_type"]) == ("error", "upstream_unreachable")
    failed = ev[ev["mcp_method"].isin(["server/discover", "initialize"])]
    assert set(failed["error_type"]) == {"upstream_unreachable"} and set(failed["phase"]) == {"initialize"}
    assert (failed["status"] == "error").all()


@pytest.mark.parametrize(
    ("mode", "error_type"),
    [("crash", "upstream_cut"), ("noise", "invalid_response")],
    ids=["dies-mid-call", "non-json-body"],
)
def test_faults_client_sees_what_it_would_without_the_proxy(
    mode: str, error_type: str, tmp_path: Path
) -> None:
    out = tmp_path / "ds"
    calls = [("lookup", {"key": "k"})]
    port = free_port()
    with faulty(mode, port, tmp_path):
        direct = outcome(f"http://127.0.0.1:{port}/mcp", calls)
    port = free_port()
    with (
        faulty(mode, port, tmp_path),
        McpHttpProxy(f"http://127.0.0.1:{port}/mcp", out=out, name=mode) as proxy,
    ):
        proxied = outcome(proxy.url, calls)
    assert proxied == direct and proxied.startswith("mcp:")
    (ev,) = runs(out)
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert (s4["status"], s4["error_type"]) == ("error", error_type)
    if mode == "noise":
        bad = ev[ev["error_type"] == "invalid_json"]
        assert len(bad) == 1 and bad.iloc[0]["direction"] == "server->client"


def test_fifty_megabyte_result_over_http(tmp_path: Path) -> None:
    out, port = tmp_path / "ds", free_port()
    with (
        faulty("big", port, tmp_path, PROMCP_BIG_MB="50"),
        McpHttpProxy(f"http://127.0.0.1:{port}/mcp", out=out, name="big") as proxy,
    ):
        res = session(proxy.url, [("lookup", {"key": "k"})])
    assert len(res["results"][0].content[0].text) == 50 * 1024 * 1024
    (ev,) = runs(out, timeout=120)
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert s4["status"] == "ok" and s4["footprint_bytes"] > 50 * 1024 * 1024 and s4["footprint_tokens"] > 1000


def test_hung_server_times_out_and_the_proxy_stops(tmp_path: Path) -> None:
    out, port = tmp_path / "ds", free_port()
    with faulty("hang", port, tmp_path):
        started = time.monotonic()
        with McpHttpProxy(f"http://127.0.0.1:{port}/mcp", out=out, name="hang", timeout_s=1.0) as proxy:
            seen = outcome(proxy.url, [("lookup", {"key": "k"})], read_timeout_s=1.5)
        assert time.monotonic() - started < 30
    assert seen.startswith("mcp:-32001")  # the SDK's own timeout, as without the proxy
    # the SDK's notifications/cancelled can reach the proxy after the client's DELETE ended the session: that late
    # message is written into the session's own run (a part merged into its run file), never a run of its own
    time.sleep(1.0)
    deadline = time.monotonic() + 30
    while list(out.glob("_journal/*.parts/*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    (ev,) = runs(out, n=None)
    assert set(ev["mcp_method"].dropna()) <= {"initialize", "notifications/initialized", "tools/list", "tools/call",
                                               "notifications/cancelled"}  # fmt: skip
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert (s4["status"], s4["error_type"]) == ("timeout", "timeout") and 900 <= s4["latency_ms"] < 5000


def test_listens_on_loopback_unless_allowed() -> None:
    done = subprocess.run(
        [*PROMCP, "proxy", "mcp", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--allow-remote" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


CLAUDE = BIN / "claude"


def test_promcp_record_with_an_http_server(tmp_path: Path) -> None:
    """`promcp record -- claude` with an HTTP MCP server (type "http", an Authorization header) in Claude Code's
    config: an HTTP MCP proxy is started for it, and its INIT and the exact tools/call join the model's call."""
    if not CLAUDE.exists():
        pytest.skip("the Claude Code CLI is not installed (npm ci)")
    from tests.stubs.llm_http import StubServer
    from tests.stubs.scripted_llm import Scripted

    home, work, out, port = tmp_path / "home", tmp_path / "work", tmp_path / "traces", free_port()
    home.mkdir()
    work.mkdir()
    tool = "mcp__everything__echo"
    entry = {
        "type": "http",
        "url": f"http://127.0.0.1:{port}/mcp",
        "headers": {"Authorization": SECRETS["authorization"]},
    }
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"everything": entry}}))
    env = {
        "PATH": f"{CLAUDE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-api03-promcp-test-secret-0123456789abcdef",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",
    }
    script = Scripted(tool, {"message": "through http"}, answer="Echoed: ")
    with everything("streamableHttp", port, tmp_path), StubServer(script.anthropic) as stub:
        proc = subprocess.run(
            [
                *(*PROMCP, "record", "--out", str(out), "--upstream", stub.url, "--"),
                *("claude", "-p", "Echo something.", "--allowedTools", tool, "--output-format", "json"),
            ],
            env={**os.environ, **env},
            cwd=work,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert proc.returncode == 0, proc.stderr
    assert "MCP servers recorded: everything" in proc.stderr and "not recorded" not in proc.stderr
    assert json.loads(proc.stdout)["result"].startswith("Echoed: ")
    (ev,) = runs(out)
    mcp = ev[ev["source"] == "proxy:mcp"]
    assert set(mcp["transport"]) == {"streamable_http"} and set(mcp["server"]) == {"everything"}
    assert {"ready", "initialize", "tools_discovery"} <= set(mcp.loc[mcp["stage"] == "INIT", "phase"])
    assert session_init(mcp)["failures"].sum() == 0  # a refused server/discover is a probe, not a failure
    call = mcp[mcp["stage"].isin(["S3", "S4"])]
    assert call["stage"].tolist() == ["S3", "S4"] and set(call["tool"]) == {"echo"}
    assert set(call["timing_quality"]) == {"exact"} and set(call["tool_call_id"]) == {"toolu_0001"}
    assert all(json.loads(a)["join"]["quality"] == "arguments" for a in call["attrs"])
    blobs = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert SECRETS["authorization"].encode() not in blobs and b"sk-ant-api03" not in blobs
