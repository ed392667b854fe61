"""The stdio MCP proxy as two processes (promcp/proxy/mcp/stdio.py, stdio_recorder.py, frame_journal.py): a relay
killed the way clients kill their servers loses no event, and a frame journal nobody recorded is recorded later.
Real server: the npm ``everything`` server; real relay, recorder and ``promcp finalize`` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import REPO
from tests.datasets import wait_run
from tests.stubs.mcp_messages import INIT

pytestmark = pytest.mark.servers

PROMCP = [sys.executable, "-m", "promcp.cli"]
EVERYTHING = REPO / "node_modules" / ".bin" / "mcp-server-everything"
#: a key-shaped string the echo tool sends back: with --content none it must not stay on disk anywhere
SECRET = "sk-ant-api03-" + "Q7vX2mZ9pL4kR8tW1yB6nC3dF5gH0jK" * 2
#: the relay of `promcp proxy mcp` with its recorder never started: what a relay killed before it started its
#: recorder leaves (the journal, with nobody on it)
NO_RECORDER = (
    "import sys\n"
    "from promcp.proxy.mcp import stdio\n"
    "stdio._Recording.start_recorder = lambda self: None\n"
    "stdio.fast_main(sys.argv[1:])\n"
    "sys.exit('not a plain stdio invocation')\n"
)


def _need() -> None:
    if not EVERYTHING.exists():
        pytest.skip("mcp-server-everything is not installed (run `make install`)")


class Client:
    """A line-level MCP client on a proxy's stdin / stdout."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, jsonrpc_id: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the proxy closed stdout"
            message = json.loads(line)
            if message.get("id") == jsonrpc_id:
                return dict(message)

    def handshake_and_echo(self, text: str) -> None:
        self.send(INIT)
        self.answer(1)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        assert self.answer(2)["result"]["tools"]
        params = {"name": "echo", "arguments": {"message": text}}
        self.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
        assert text in json.dumps(self.answer(3))


def test_a_relay_killed_before_its_recorder_started_is_recorded_by_finalize(tmp_path: Path) -> None:
    """SIGKILL of a relay whose recorder never ran: its frame journal is left with nobody on it; a reader skips
    nothing it could read, and ``promcp finalize`` records the whole session — spawn to the tools/call — from the
    journal, removes it, and (``--content none``) leaves no byte of the traffic's secret on disk."""
    _need()
    out = tmp_path / "ds"
    args = ["--out", str(out), "--name", "everything", "--run-id", "orphan", "--content", "none"]
    client = Client([sys.executable, "-c", NO_RECORDER, *args, "--", "node", str(EVERYTHING)])
    try:
        client.handshake_and_echo(SECRET)
    finally:
        client.proc.send_signal(signal.SIGKILL)
        client.proc.wait(30)
    (journal,) = out.glob("_journal/orphan.parts/.frames-*")
    assert journal.stat().st_mode & 0o777 == 0o600 and journal.parent.stat().st_mode & 0o777 == 0o700
    assert SECRET.encode() in journal.read_bytes()  # the raw traffic, while nobody has recorded it

    done = subprocess.run([*PROMCP, "finalize", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(out.glob("_journal/*.parts/.frames-*")) and "finalized" in done.stdout
    ev = pd.read_parquet(out / "topology=c-ots" / "run_id=orphan" / "events.parquet")
    init = ev[ev["stage"] == "INIT"]
    assert {"spawn", "ready", "initialize", "tools_discovery"} <= set(init["phase"])
    disc = init[init["phase"] == "tools_discovery"].iloc[0]
    assert disc["footprint_tokens"] > 100 and disc["status"] == "ok"
    calls = ev[ev["tool"] == "echo"]
    assert sorted(calls["stage"]) == ["S3", "S4"] and (calls["status"] == "ok").all()
    leaked = [p for p in out.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []


def test_sigterm_then_sigkill_a_tenth_of_a_second_later_loses_no_event(tmp_path: Path) -> None:
    """Codex ends a session with SIGTERM and SIGKILL 0.1 s later (SIGKILL to the proxy, right after the last
    answer): the relay's frames are in its journal, its recorder is in another session, and the run has every
    event — tools/list's INIT ``tools_discovery`` (lost one run in two when the tokenizer loaded in the proxy) and
    the call's S3 and S4. Three sessions in a row."""
    _need()
    for k in range(3):
        out = tmp_path / f"ds{k}"
        command = [*PROMCP, "proxy", "mcp", "--out", str(out), "--name", "everything", "--run-id", "codex"]
        client = Client([*command, "--", "node", str(EVERYTHING)])
        try:
            client.handshake_and_echo(f"hello {k}")
        finally:
            client.proc.send_signal(signal.SIGTERM)
            time.sleep(0.1)
            if client.proc.poll() is None:
                client.proc.send_signal(signal.SIGKILL)
            client.proc.wait(30)
        ev = wait_run(out, "codex", 60.0)
        phases = ev.loc[ev["stage"] == "INIT", "phase"].tolist()
        assert {"spawn", "ready", "initialize", "tools_discovery"} <= set(phases), (k, phases)
        disc = ev[ev["phase"] == "tools_discovery"].iloc[0]
        assert disc["footprint_tokens"] > 100 and json.loads(disc["attrs"])["n_tools"] > 5
        calls = ev[ev["tool"] == "echo"]
        assert sorted(calls["stage"]) == ["S3", "S4"] and (calls["status"] == "ok").all(), k
        assert not list(out.rglob(".frames-*"))
        assert os.listdir(out / "_journal") == []


def _recorder_pid(journal: Path) -> int:
    """The pid of the recorder process on ``journal`` (its command line names the journal)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"promcp.proxy.mcp.stdio_recorder" in cmdline and str(journal).encode() in cmdline:
                return int(entry.name)
    raise AssertionError(f"no recorder process on {journal}")


def test_a_recorder_killed_mid_session_is_recorded_once_by_finalize(tmp_path: Path) -> None:
    """The recorder dies (SIGKILL, the OOM killer) after it journaled part of the session: its frame journal is an
    orphan, recorded whole by ``promcp finalize`` — and the part the dead recorder wrote is dropped, so every event
    is in the run exactly once (it used to be twice)."""
    _need()
    out = tmp_path / "ds"
    command = [*PROMCP, "proxy", "mcp", "--out", str(out), "--name", "everything", "--run-id", "dead"]
    client = Client([*command, "--", "node", str(EVERYTHING)])
    try:
        client.handshake_and_echo("first")
        (journal,) = out.glob("_journal/dead.parts/.frames-*")
        deadline = time.monotonic() + 60
        while not any("tools_discovery" in p.read_text() for p in out.glob("_journal/dead.parts/*.jsonl")):
            assert time.monotonic() < deadline, "the recorder journaled nothing"
            time.sleep(0.05)
        os.kill(_recorder_pid(journal), signal.SIGKILL)
        params = {
            "name": "echo",
            "arguments": {"message": "second"},
        }  # the relay goes on without its recorder
        client.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params})
        assert "second" in json.dumps(client.answer(4))
    finally:
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        client.proc.wait(30)
    assert journal.exists() and list(out.glob("_journal/dead.parts/*.jsonl")), "what the dead recorder left"

    done = subprocess.run([*PROMCP, "finalize", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "recorded again whole" in done.stderr
    ev = wait_run(out, "dead", 60.0)
    assert (ev["phase"] == "spawn").sum() == 1 and (ev["phase"] == "tools_discovery").sum() == 1
    calls = ev[ev["tool"] == "echo"]
    assert sorted(calls["stage"]) == ["S3", "S3", "S4", "S4"] and (calls["status"] == "ok").all()
    assert len(ev) == len(ev.drop_duplicates(subset=["stage", "phase", "tool", "t_start_ns"]))
