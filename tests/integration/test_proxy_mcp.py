"""``promcp proxy mcp`` end to end: real MCP servers (npm and PyPI) driven by the mcp SDK client through the proxy,
byte captures on both sides, faults, many sessions into one dataset, and the real Claude Code CLI."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from promcp.analysis.tables import session_init
from promcp.stages import tool_footprints
from promcp.tokenizers import get as get_tokenizer
from promcp.wire.mcp import tool_text_of
from tests.conftest import REPO
from tests.datasets import wait_run

pytestmark = pytest.mark.servers

PROMCP = [sys.executable, "-m", "promcp.cli"]
BIN = REPO / "node_modules" / ".bin"
FAULTY = REPO / "tests" / "fault_servers" / "faulty.py"
TEE = REPO / "tests" / "stubs" / "tee_relay.py"


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is not installed (run `make install`)")


def proxied(out: Path, name: str, command: Sequence[str], *extra: str) -> list[str]:
    return [
        *PROMCP,
        "proxy",
        "mcp",
        "--out",
        str(out),
        "--name",
        name,
        "--run-id",
        f"run-{name}",
        *extra,
        "--",
        *command,
    ]


async def _session(
    command: Sequence[str], calls: Sequence[tuple[str, dict[str, Any]]], **kw: Any
) -> dict[str, Any]:
    async with (
        stdio_client(StdioServerParameters(command=command[0], args=list(command[1:]), **kw)) as (r, w),
        ClientSession(r, w) as s,
    ):
        init = await s.initialize()
        listed = await s.list_tools()
        results = []
        for tool, args in calls:
            res = await s.call_tool(tool, args)
            results.append(res)
        return {"init": init, "tools": listed.tools, "results": results}


def run_session(
    command: Sequence[str], calls: Sequence[tuple[str, dict[str, Any]]], **kw: Any
) -> dict[str, Any]:
    return asyncio.run(_session(command, calls, **kw))


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line]


SERVERS: dict[str, tuple[list[str], list[tuple[str, dict[str, Any]]]]] = {
    "filesystem": (
        ["node", str(BIN / "mcp-server-filesystem"), "{tmp}"],
        [("list_directory", {"path": "{tmp}"})],
    ),
    "memory": (
        ["node", str(BIN / "mcp-server-memory")],
        [
            ("create_entities", {"entities": [{"name": "a", "entityType": "t", "observations": ["x"]}]}),
            ("read_graph", {}),
        ],
    ),
    "everything": (
        ["node", str(BIN / "mcp-server-everything")],
        [("echo", {"message": "héllo"}), ("get-sum", {"a": 2, "b": 3})],
    ),
    "time": (
        [str(Path(sys.executable).parent / "mcp-server-time"), "--local-timezone", "UTC"],
        [("get_current_time", {"timezone": "UTC"})],
    ),
}


@pytest.mark.parametrize("name", list(SERVERS))
def test_bytes_relayed_unchanged_and_stages_recorded(name: str, tmp_path: Path) -> None:
    command, calls = SERVERS[name]
    command = [c.replace("{tmp}", str(tmp_path)) for c in command]
    calls = [(t, json.loads(json.dumps(a).replace("{tmp}", str(tmp_path)))) for t, a in calls]
    _need(Path(command[1] if command[0] == "node" else command[0]))
    out = tmp_path / "ds"
    client_side, server_side = tmp_path / "client", tmp_path / "server"
    inner = [sys.executable, str(TEE), str(server_side), "--", *command]
    chain = [sys.executable, str(TEE), str(client_side), "--", *proxied(out, name, inner)]
    env = {**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    seen = run_session(chain, calls, env=env)

    # every byte the client received is what the server sent, and the other way round
    assert (client_side.with_suffix(".out")).read_bytes() == (server_side.with_suffix(".out")).read_bytes()
    assert (client_side.with_suffix(".in")).read_bytes() == (server_side.with_suffix(".in")).read_bytes()
    sent = _lines(server_side.with_suffix(".out"))

    ev = wait_run(out, f"run-{name}")
    assert set(ev["source"]) == {"proxy:mcp"} and set(ev["topology"]) == {"c-ots"}
    phases = list(ev.loc[ev["stage"] == "INIT", "phase"])
    assert phases[:2] == ["spawn", "ready"] and "initialize" in phases and "tools_discovery" in phases
    init = ev[(ev["phase"] == "initialize") & (ev["mcp_method"] == "initialize")].iloc[0]
    assert init["protocol_version"] == seen["init"].protocol_version
    assert json.loads(init["attrs"])["server_name"] == seen["init"].server_info.name
    # the initialize response's wire size is the line the server wrote (plus its newline)
    answer = next(line for line in sent if b'"protocolVersion"' in line and b'"serverInfo"' in line)
    assert init["footprint_bytes"] == len(answer) + 1

    # tools/list: same per-tool footprint as the host's rendering of the SDK's typed tools
    disc = ev[ev["phase"] == "tools_discovery"]
    per_tool: dict[str, Any] = {}
    for attrs in disc["attrs"]:
        per_tool.update(json.loads(attrs)["tools"])
    expected = tool_footprints([tool_text_of(t) for t in seen["tools"]], get_tokenizer("o200k_base"))
    assert {k: v["tokens"] for k, v in per_tool.items()} == {k: v["tokens"] for k, v in expected.items()}
    assert disc["tokenizer"].iloc[0] == "o200k_base"

    # one S3 + one S4 per call, exact timing, response bytes = the line on the wire
    s3, s4 = ev[ev["stage"] == "S3"], ev[ev["stage"] == "S4"]
    assert list(s3["tool"]) == [t for t, _ in calls] == list(s4["tool"])
    assert (s3["timing_quality"] == "exact").all() and (s4["latency_ms"] > 0).all()
    for _, row in s4.iterrows():
        line = next(
            x
            for x in sent
            if f'"id":{row["jsonrpc_id"]},'.encode() in x or f'"id":{row["jsonrpc_id"]}}}'.encode() in x
        )
        assert row["footprint_bytes"] == len(line) + 1
    assert (s4["status"] == "ok").all()
    assert ev["seq"].tolist() == list(range(len(ev)))


def test_faults_client_sees_what_it_would_without_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    direct = [sys.executable, str(FAULTY)]

    def outcome(cmd: list[str]) -> str:
        try:
            res = asyncio.run(_session(cmd, [("lookup", {"key": "k"})]))
            return "ok:" + res["results"][0].content[0].text
        except MCPError as exc:
            return f"mcp:{exc.error.code}"
        except Exception as exc:
            return f"exc:{type(exc).__name__}"

    for mode in ("crash", "noise"):
        assert outcome([*direct, mode]) == outcome(proxied(out, mode, [*direct, mode]))
    crash = wait_run(out, "run-crash")
    s4 = crash[crash["stage"] == "S4"].iloc[0]
    assert (s4["status"], s4["error_type"]) == ("error", "server_crashed")
    garbage = wait_run(out, "run-noise")
    bad = garbage[garbage["error_type"] == "invalid_json"]
    assert len(bad) == 2 and (bad["stage"] == "MCP").all()
    assert garbage.loc[garbage["stage"] == "S4", "status"].tolist() == ["ok"]


def test_server_that_does_not_start(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    done = subprocess.run(
        proxied(out, "nostart", [sys.executable, str(FAULTY), "nostart"]),
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 3  # the server's own exit code
    assert b"refusing to start" in done.stderr  # its stderr passed through
    ev = wait_run(out, "run-nostart")
    ready = ev[ev["phase"] == "ready"].iloc[0]
    assert (ready["status"], ready["error_type"]) == ("error", "server_exited")

    missing = subprocess.run(
        proxied(out, "missing", ["/nonexistent/server"]), input=b"", capture_output=True, timeout=60
    )
    assert missing.returncode == 127
    ev = wait_run(out, "run-missing")
    assert ev[["phase", "status", "error_type"]].values.tolist() == [["spawn", "error", "spawn_failed"]]


def test_hung_server_times_out_and_proxy_does_not_hang(tmp_path: Path) -> None:
    out = tmp_path / "ds"

    async def go() -> str:
        cmd = proxied(out, "hang", [sys.executable, str(FAULTY), "hang"])
        async with (
            stdio_client(StdioServerParameters(command=cmd[0], args=cmd[1:])) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            try:
                await s.call_tool("lookup", {"key": "k"}, read_timeout_seconds=1.5)
            except MCPError as exc:
                return str(exc.error.code)
            return "answered"

    started = time.monotonic()
    assert asyncio.run(go()) == "-32001"  # the SDK's own timeout, as without the proxy
    assert time.monotonic() - started < 20  # the client's shutdown ended the proxy and the hung server
    ev = wait_run(out, "run-hang")
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert (s4["status"], s4["error_type"]) == ("timeout", "timeout")
    assert 1400 <= s4["latency_ms"] < 5000


def test_fifty_megabyte_result(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    env = {**os.environ, "PROMCP_BIG_MB": "50"}
    res = run_session(
        proxied(out, "big", [sys.executable, str(FAULTY), "big"]), [("lookup", {"key": "k"})], env=env
    )
    text = res["results"][0].content[0].text
    assert len(text) == 50 * 1024 * 1024
    ev = wait_run(out, "run-big", timeout=120)
    s4 = ev[ev["stage"] == "S4"].iloc[0]
    assert s4["status"] == "ok" and s4["footprint_bytes"] > 50 * 1024 * 1024
    assert s4["footprint_tokens"] > 1000


def test_exit_code_and_signal_pass_through(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    done = subprocess.run(
        proxied(out, "seven", [sys.executable, "-c", "import sys; sys.exit(7)"]), input=b"", timeout=60
    )
    assert done.returncode == 7
    proc = subprocess.Popen(
        proxied(out, "sleeper", [sys.executable, "-c", "import time; time.sleep(60)"]), stdin=subprocess.PIPE
    )
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # the server died of SIGTERM: so does the proxy
    wait_run(out, "run-sleeper")


def test_many_sessions_one_run(tmp_path: Path) -> None:
    """Six proxies (three servers, two clients each) at once into one run: nothing lost, nothing mixed."""
    out = tmp_path / "ds"
    _need(BIN / "mcp-server-everything")
    names = ["everything", "memory", "time"]
    commands = {
        "everything": ["node", str(BIN / "mcp-server-everything")],
        "memory": ["node", str(BIN / "mcp-server-memory")],
        "time": [str(Path(sys.executable).parent / "mcp-server-time")],
    }
    calls = {
        "everything": [("echo", {"message": str(i)}) for i in range(5)],
        "memory": [("read_graph", {}) for _ in range(5)],
        "time": [("get_current_time", {"timezone": "UTC"}) for _ in range(5)],
    }

    async def one(name: str, k: int) -> None:
        cmd = [*PROMCP, "proxy", "mcp", "--out", str(out), "--name", f"{name}{k}", "--", *commands[name]]
        env = {**os.environ, "PROMCP_RUN_ID": "shared", "MEMORY_FILE_PATH": str(tmp_path / f"m{k}.jsonl")}
        await _session(cmd, calls[name], env=env)

    async def all_at_once() -> None:
        await asyncio.gather(*(one(n, k) for n in names for k in range(2)))

    asyncio.run(all_at_once())
    ev = wait_run(out, "shared", timeout=60)
    assert ev["seq"].tolist() == list(range(len(ev)))
    for name in names:
        for k in range(2):
            mine = ev[ev["server"] == f"{name}{k}"]
            assert len(mine[mine["stage"] == "S3"]) == 5 == len(mine[mine["stage"] == "S4"])
            assert set(mine["tool"].dropna()) == {calls[name][0][0]}
            assert mine["jsonrpc_id"].dropna().isin(mine["jsonrpc_id"]).all()
    run = json.loads(
        pq.read_schema(out / "topology=c-ots/run_id=shared/events.parquet").metadata[b"promcp.run"]
    )
    servers = {part.get("server") for part in run["meta"]["parts"]} - {None}  # hand-off parts name none
    assert servers == {f"{n}{k}" for n in names for k in range(2)} and run["events"] == len(ev)


CLAUDE = BIN / "claude"


def test_real_claude_code_starts_the_wrapped_server(tmp_path: Path) -> None:
    """Claude Code (npm @anthropic-ai/claude-code) health-checks a user-scope server wrapped by `promcp proxy
    config --client claude-code --write`; no LLM call is made."""
    _need(CLAUDE)
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "ds"
    home.mkdir()
    work.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl"),
    }
    node = shutil.which("node") or "node"
    subprocess.run(
        [str(CLAUDE), "mcp", "add", "-s", "user", "memory", "--", node, str(BIN / "mcp-server-memory")],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    subprocess.run(
        [
            *PROMCP,
            "proxy",
            "config",
            "--client",
            "claude-code",
            str(home / ".claude.json"),
            "--out",
            str(out),
            "--write",
        ],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert (home / ".claude.json.promcp-backup").exists()
    listed = subprocess.run(
        [str(CLAUDE), "mcp", "list"], cwd=work, env=env, capture_output=True, text=True, timeout=180
    )
    assert "Connected" in listed.stdout, listed.stdout + listed.stderr
    runs = []
    deadline = time.monotonic() + 60
    while not runs and time.monotonic() < deadline:
        runs = list(out.glob("topology=c-ots/run_id=*/events.parquet"))
        time.sleep(0.2)
    assert len(runs) == 1, sorted(map(str, out.rglob("*")))
    ev = pd.read_parquet(runs[0])
    assert runs[0].parent.name.split("-")[1] == "claude"  # one run named after the client session
    init = ev[ev["stage"] == "INIT"]
    assert {"spawn", "ready", "initialize", "tools_discovery"} <= set(init["phase"])
    # Claude Code asks for the 2026-07-28 protocol first (server/discover); the server refuses, Claude Code falls
    # back to initialize: a probe, not a failed start-up
    probe = init[init["mcp_method"] == "server/discover"]
    assert (
        len(probe) == 1 and probe.iloc[0]["phase"] == "probe" and probe.iloc[0]["error_type"] == "mcp_error"
    )
    table = session_init(ev)
    assert table["failures"].sum() == 0 and table["probes"].sum() == 1 and table["sessions"].sum() == 1
    shake = init[(init["phase"] == "initialize") & (init["status"] == "ok")].iloc[0]
    attrs = json.loads(shake["attrs"])
    assert attrs["client_name"] == "claude-code" and attrs["server_name"] == "memory-server"
    disc = init[init["phase"] == "tools_discovery"].iloc[0]
    assert json.loads(disc["attrs"])["n_tools"] == 9 and disc["footprint_tokens"] > 500
    undo = subprocess.run(
        [*PROMCP, "proxy", "config", "--client", "claude-code", str(home / ".claude.json"), "--undo"],
        cwd=work,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert undo.returncode == 0
    assert json.loads((home / ".claude.json").read_text())["mcpServers"]["memory"]["command"] == node
