"""``promcp proxy mcp`` (stdio) relays the ``initialize`` answer before it loads its tokenizer (issue 24).

A client such as ``codex exec`` starts its first turn without a server that has not answered yet, so the proxy
must not hold the server's ``initialize`` answer while it loads its recording half. Loading tiktoken's encoding
holds the GIL for ~0.3 s, during which no relay thread can run. Here the tokenizer's load is made to hold the GIL
for longer (one C call, ``sum(range(N))``), and the server answers ``initialize`` 2.5 s after it read it, well
after the tokenizer of a proxy that loads it beside the server's boot would have started: the recorder must have
loaded during the boot (a session ended at once is still recorded), the tokenizer only after the answer passed,
the answer must reach the client before that load ended, and the handshake must be recorded whole, with the
instants its bytes passed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.test_proxy_mcp import wait_run

#: a server answering initialize 2.5 s after reading it, and tools/list at once; it logs the instant
#: just before it wrote each answer
SERVER = """
import json, sys, time
log = open(sys.argv[1], "a")
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        time.sleep(2.5)
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "late", "version": "1"}}
    else:
        result = {"tools": [{"name": "lookup", "description": "Look a key up.",
                             "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}}]}
    stamp = {"answered": msg["method"], "wall_ns": time.time_ns(), "ns": time.perf_counter_ns()}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
    sys.stdout.flush()
    log.write(json.dumps(stamp) + "\\n")
    log.flush()
"""

#: the proxy's command line, with the tokenizer's load made to hold the GIL first (as tiktoken's constructor does)
PROXY = """
import json, sys, time
from promcp import tokenizers
log = open(sys.argv[1], "a")
real = tokenizers.get_or_default
def held(name, on_fallback=None):
    start = time.perf_counter_ns()
    sum(range(15_000_000))  # one C call: the GIL is not released until it returns
    log.write(json.dumps({"hold_start": start, "hold_end": time.perf_counter_ns()}) + "\\n")
    log.flush()
    return real(name, on_fallback)
tokenizers.get_or_default = held
from promcp.proxy.mcp import stdio
load = stdio._Recording.prepare.__func__
def prepare(cls, *args, **kwargs):
    log.write(json.dumps({"recorder_start": time.perf_counter_ns()}) + "\\n")
    log.flush()
    return load(cls, *args, **kwargs)
stdio._Recording.prepare = classmethod(prepare)
from promcp.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _send(proc: subprocess.Popen[bytes], obj: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(obj) + "\n").encode())
    proc.stdin.flush()


def test_initialize_is_relayed_before_the_recording_half_loads(tmp_path: Path) -> None:
    server, proxy_log, server_log, out = (
        tmp_path / "server.py",
        tmp_path / "proxy.log",
        tmp_path / "server.log",
        tmp_path / "ds",
    )
    server.write_text(SERVER)
    command = [sys.executable, "-c", PROXY, str(proxy_log), "proxy", "mcp", "--out", str(out)]
    command += ["--run-id", "startup", "--name", "late", "--", sys.executable, str(server), str(server_log)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    answer = json.loads(proc.stdout.readline())
    received_ns = time.perf_counter_ns()
    assert answer["result"]["serverInfo"]["name"] == "late"
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    assert json.loads(proc.stdout.readline())["result"]["tools"][0]["name"] == "lookup"
    time.sleep(0.3)  # past the tokenizer's load, as a session with a turn is
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(60) == 0

    logged: dict[str, int] = {}
    for line in proxy_log.read_text().splitlines():
        for key, value in json.loads(line).items():
            logged.setdefault(key, value)  # the first load of the tokenizer (another thread may wait for it)
    written = {e["answered"]: e for e in map(json.loads, server_log.read_text().splitlines())}
    # the recorder loaded while the server booted (a session ended at once is still recorded) ...
    assert logged["recorder_start"] < written["initialize"]["ns"]
    # ... the tokenizer only once the server's answer had been relayed (main loaded it beside the boot)
    assert logged["hold_start"] > written["initialize"]["ns"]
    hold = logged
    # the answer reached the client before the tokenizer's GIL-holding load ended: it was not held behind it
    assert received_ns < hold["hold_end"], (
        f"initialize answered {(received_ns - hold['hold_end']) / 1e6:.0f} ms after the tokenizer's load ended"
    )

    # and the handshake relayed before the recorder existed is recorded whole, at the instants its bytes passed
    ev = wait_run(out, "startup")
    phases = list(ev.loc[ev["stage"] == "INIT", "phase"])
    assert phases[:2] == ["spawn", "ready"] and "initialize" in phases and "tools_discovery" in phases
    init_row = ev[(ev["phase"] == "initialize") & (ev["mcp_method"] == "initialize")].iloc[0]
    answered_at = int(init_row["t_end_ns"])
    # the answer's instant is when it passed the proxy: after the server wrote it, long before the recorder had
    # loaded (the hold alone lasts longer than this bound)
    assert (
        written["initialize"]["wall_ns"] - 50_000_000
        <= answered_at
        <= written["initialize"]["wall_ns"] + 200_000_000
    )
    disc = ev[ev["phase"] == "tools_discovery"].iloc[0]
    assert json.loads(disc["attrs"])["tools"]["lookup"]["tokens"] > 0 and disc["tokenizer"] == "o200k_base"
