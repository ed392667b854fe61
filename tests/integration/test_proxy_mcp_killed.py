"""A recording MCP proxy killed with SIGKILL in the middle of a ``tools/call`` (issue 23, item 7): the call's request
event is journaled when the request is forwarded, so the call stays in the dataset as in flight (an S3 without its
S4) — read in place by ``promcp report`` / ``promcp.analysis.load`` before anything merged it, and in the run file
after ``promcp finalize``, beside what an earlier process of the same run had already merged. Real servers: the npm
``everything`` server over stdio and over streamable HTTP, its ``trigger-long-running-operation`` tool mid-call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pandas as pd
import pytest

from promcp.analysis import load
from tests.conftest import REPO
from tests.integration.test_proxy_mcp_http import ACCEPT, everything, free_port, wait_port
from tests.stubs.mcp_messages import INIT

pytestmark = pytest.mark.servers

PROMCP = [sys.executable, "-m", "promcp.cli"]
EVERYTHING = REPO / "node_modules" / ".bin" / "mcp-server-everything"
LONG = "trigger-long-running-operation"
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(jsonrpc_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": jsonrpc_id, "method": "tools/call", "params": params}


def journaled(out: Path, needle: str, timeout: float = 20.0) -> None:
    """Wait until a journal part of ``out`` holds a line with ``needle`` (the proxy wrote it while still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for part in out.glob("_journal/*.parts/*.jsonl"):
            if any(needle in line for line in part.read_text(errors="replace").splitlines()):
                return
        time.sleep(0.05)
    raise AssertionError(
        f"no journal line with {needle!r} after {timeout} s: {sorted(map(str, out.rglob('*')))}"
    )


def in_flight_s3(out: Path, run_id: str) -> str:
    needle = f'"tool":"{LONG}"'
    for part in out.glob(f"_journal/{run_id}.parts/*.jsonl"):
        for line in part.read_text().splitlines():
            if needle in line and '"stage":"S3"' in line:
                return line
    raise AssertionError("no S3 line for the call in flight")


def finalize(out: Path) -> pd.DataFrame:
    done = subprocess.run([*PROMCP, "finalize", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(out.glob("_journal/*.parts/*.jsonl"))  # every part merged
    return load(out)


def calls_of(ev: pd.DataFrame) -> dict[str, list[str]]:
    """Per tool, the tools/call stages recorded (in order)."""
    tools = ev[ev["stage"].isin(["S3", "S4"])].sort_values("seq")
    out: dict[str, list[str]] = {}
    for tool, stage in zip(tools["tool"], tools["stage"], strict=True):
        out.setdefault(str(tool), []).append(str(stage))
    return out


def test_stdio_proxy_killed_mid_call_leaves_the_call_in_flight(tmp_path: Path) -> None:
    if not EVERYTHING.exists():
        pytest.skip("mcp-server-everything is not installed (run `make install`)")
    out = tmp_path / "ds"
    command = [*PROMCP, "proxy", "mcp", "--out", str(out), "--name", "everything", "--run-id", "run-k"]
    proxy = subprocess.Popen(
        [*command, "--", "node", str(EVERYTHING)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proxy.stdin is not None and proxy.stdout is not None
    try:

        def send(message: dict[str, Any]) -> None:
            assert proxy.stdin is not None
            proxy.stdin.write(json.dumps(message).encode() + b"\n")
            proxy.stdin.flush()

        def answer(jsonrpc_id: int) -> dict[str, Any]:  # notifications the server sends meanwhile are skipped
            assert proxy.stdout is not None
            while (message := json.loads(proxy.stdout.readline())).get("id") != jsonrpc_id:
                pass
            return message

        send(INIT)
        answer(1)
        send(INITIALIZED)
        send(call(2, "echo", {"message": "before"}))
        assert "result" in answer(2)  # a finished call
        send(call(3, LONG, {"duration": 120, "steps": 2}))
        journaled(out, f'"tool":"{LONG}"')  # its request event, while the server works on it
        s3 = json.loads(in_flight_s3(out, "run-k"))
    finally:
        proxy.send_signal(signal.SIGKILL)
        proxy.wait(30)
    assert proxy.returncode == -signal.SIGKILL
    # the relay's recorder (its own process, not killed) reads the frame journal to its end, closes its part and
    # removes the journal: the call's request event is kept, nothing ends the call for it
    deadline = time.monotonic() + 60
    while list(out.glob("_journal/*.parts/.frames-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(out.glob("_journal/*.parts/.frames-*")), "the recorder did not finish"
    assert s3["footprint_tokens"] > 0 and s3.get("error_type") is None  # counted, and nothing failed

    # a reader finds the killed proxy's session (its part read in place, or merged by its recorder) as one run
    read = load(out)
    assert set(read["run_id"]) == {"run-k"}
    assert calls_of(read) == {"echo": ["S3", "S4"], LONG: ["S3"]}
    ev = finalize(out)
    assert calls_of(ev) == {"echo": ["S3", "S4"], LONG: ["S3"]}  # the call in flight, with no result
    long = ev[(ev["tool"] == LONG) & (ev["stage"] == "S3")].iloc[0]
    assert long["timing_quality"] == "exact" and long["status"] == "ok" and long["jsonrpc_id"] == "3"


def test_http_proxy_killed_mid_call_leaves_the_call_in_flight_beside_an_earlier_merge(tmp_path: Path) -> None:
    """The HTTP proxy journals a call once its request was handed to the server (not when the answer's head comes,
    which for a long tool is when it ends). The run already had a merged run file from an earlier proxy process: the
    killed one's part is read beside it (report) and merged into it (finalize), nothing lost on either side."""
    out, up, port = tmp_path / "ds", free_port(), free_port()
    with everything("streamableHttp", up, tmp_path):
        upstream = f"http://127.0.0.1:{up}/mcp"

        def proxy() -> subprocess.Popen[bytes]:
            cmd = [*PROMCP, "proxy", "mcp", "--upstream", upstream, "--listen", f"127.0.0.1:{port}"]
            proc = subprocess.Popen([*cmd, "--out", str(out), "--name", "everything", "--run-id", "run-h"])
            wait_port(port, proc)
            return proc

        def open_session(client: httpx.Client) -> dict[str, str]:
            got = client.post(f"http://127.0.0.1:{port}/mcp", json=INIT, headers=ACCEPT)
            assert got.status_code == 200, got.text
            headers = {**ACCEPT, "mcp-session-id": got.headers["mcp-session-id"]}
            client.post(f"http://127.0.0.1:{port}/mcp", json=INITIALIZED, headers=headers)
            return headers

        first = proxy()  # an earlier process of the run: one finished call, merged when it stops
        with httpx.Client(timeout=30) as client:
            headers = open_session(client)
            done = client.post(
                f"http://127.0.0.1:{port}/mcp", json=call(2, "echo", {"message": "a"}), headers=headers
            )
            assert done.status_code == 200
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        deadline = time.monotonic() + 30
        while list(out.glob("_journal/*.parts/*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(out.glob("topology=c-ots/run_id=run-h/events.parquet"))

        second = proxy()
        try:
            client = httpx.Client(timeout=httpx.Timeout(30, read=300))
            headers = open_session(client)
            with client.stream(
                "POST",
                f"http://127.0.0.1:{port}/mcp",
                json=call(3, LONG, {"duration": 120, "steps": 2}),
                headers=headers,
            ):
                journaled(out, f'"tool":"{LONG}"')
                second.send_signal(signal.SIGKILL)
                second.wait(30)
            client.close()
        except httpx.HTTPError:
            pass  # the stream broke off with the proxy
        finally:
            if second.poll() is None:
                os.kill(second.pid, signal.SIGKILL)
                second.wait(30)
    assert second.returncode == -signal.SIGKILL
    read = load(out)
    assert set(read["run_id"]) == {"run-h"}
    assert calls_of(read) == {
        "echo": ["S3", "S4"],
        LONG: ["S3"],
    }  # the merged file and the leftover part, one run
    run_dir = out / "topology=c-ots" / "run_id=run-h"
    for narrower in (
        run_dir,
        run_dir / "events.parquet",
    ):  # a reader pointed at the run alone merges them too
        assert calls_of(load(narrower)) == {"echo": ["S3", "S4"], LONG: ["S3"]}
    report = subprocess.run([*PROMCP, "report", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and f"{len(read)} events" in report.stdout, report.stdout + report.stderr
    ev = finalize(out)
    assert calls_of(ev) == {"echo": ["S3", "S4"], LONG: ["S3"]}
    assert len(ev[ev["phase"] == "initialize"]) == 2  # both processes' sessions
