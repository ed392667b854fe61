"""No server outlives ``promcp run``: Ctrl-C, SIGTERM or SIGKILL of the host takes every server process down.

The server is an HTTP MCP server started by the benchmark's ``start`` command that ignores SIGTERM and SIGINT and
has a child of its own doing the same (tests/fault_servers/faulty.py ``stubborn``); the LLM is the OpenAI wire
stub on loopback, which makes the agent call a tool that never answers, so the run is mid-call when it is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promcp import analysis
from tests.stubs.llm_http import Reply, StubServer, openai_text, openai_tool_call

REPO = Path(__file__).resolve().parents[2]
FAULTY = REPO / "tests" / "fault_servers" / "faulty.py"

BENCH = """
name: orphans
llm: {{backend: openai, model: gpt-4o}}
policy: {{tool_timeout_s: 600}}
servers:
  stubborn:
    transport: streamable_http
    port: auto
    url: "http://127.0.0.1:${{PORT}}/mcp"
    start:
      command: python
      args: ["{faulty}", stubborn, "${{PORT}}", "{pidfile}"]
tasks:
  - id: hang
    prompt: "Look up x."
    servers: [stubborn]
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone: it holds no port and runs no code)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.servers
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_servers_die_with_the_run(tmp_path: Path, sig: signal.Signals) -> None:
    pidfile = tmp_path / "pids"
    bench = tmp_path / "bench.yaml"
    bench.write_text(BENCH.format(faulty=FAULTY, pidfile=pidfile))
    replies = [Reply(200, openai_tool_call("lookup", '{"key": "x"}')), Reply(200, openai_text("ok"))]
    with StubServer(replies) as stub:
        argv = ["run", "--topology", "c-cust", "--base-url", f"{stub.url}/v1", "--out", str(tmp_path / "out")]
        proc = subprocess.Popen(
            [sys.executable, "-m", "promcp.cli", *argv, str(bench)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OPENAI_API_KEY": "sk-test-not-a-key"},
        )
        try:
            deadline = time.monotonic() + 120
            while not (stub.requests and pidfile.exists() and pidfile.read_text().endswith("\n")):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the run never reached the tool call"
                time.sleep(0.1)
            time.sleep(1.0)  # the tools/call is now hanging in the server
            pids = [int(p) for p in pidfile.read_text().split()]
            assert all(_alive(p) for p in pids)
            proc.send_signal(sig)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    survivors = _wait_gone(pids, timeout=15)
    for pid in survivors:  # never leave them behind, whatever the assertion says
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], f"server processes outlived promcp run after {sig.name}"
    if sig is not signal.SIGKILL:
        assert proc.returncode == 130
        # the task the interrupt cut short is marked so (it must not pass for a finished task)
        df = analysis.load(tmp_path / "out")
        last = df[df["stage"].astype(str) == "S6"]
        assert list(last["status"].astype(str)) == ["cancelled"] and list(last["error_type"]) == [
            "interrupted"
        ]
