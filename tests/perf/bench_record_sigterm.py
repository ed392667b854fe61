"""``promcp record`` stopped with SIGTERM mid-session (issue 23, item 7): does every tool call the client got an
answer to keep both its events? One run prints one table.

Each run: a scripted Anthropic-compatible upstream on loopback (tests/stubs/llm_http.py), the real ``promcp record
--api anthropic --upstream …`` around a scripted agent (tests/stubs/scripted_agent.py) that makes one LLM call and
then calls the npm ``everything`` server's ``echo`` tool through ``promcp proxy mcp`` as fast as it can. Once the
agent logged ``n`` answered calls (n = 1, 2, 3, 5, 8, 13, 21, 34, …, cycling) and a jitter of 0–40 ms (so the
signal lands anywhere in a call), ``record`` gets SIGTERM: it passes it to the agent, which SIGTERMs its server's
proxy (as Claude Code does when it quits), and ``record`` merges the run. Then per run: calls answered, their S3
(request) and S4 (result) events in the dataset, and the answered calls missing either.

    .venv/bin/python tests/perf/bench_record_sigterm.py [--runs 16]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"
COUNTS = (1, 2, 3, 5, 8, 13, 21, 34)


def one_run(n: int, calls: int, jitter_s: float, tmp: Path) -> dict[str, Any]:
    import promcp.analysis as pa
    from tests.stubs.llm_http import Reply, StubServer, anthropic_reply

    out, log = tmp / f"ds{n}", tmp / f"answered{n}.txt"
    log.touch()
    text = anthropic_reply([{"type": "text", "text": "ok"}], stop="end_turn")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with StubServer(lambda _req: Reply(200, text)) as upstream:
        cmd = [sys.executable, "-m", "promcp.cli", "record", "--out", str(out), "--run-id", f"sigterm-{n}",
               "--api", "anthropic", "--upstream", upstream.url, "--no-summary", "--",
               sys.executable, str(ROOT / "tests" / "stubs" / "scripted_agent.py"), str(log), str(EVERYTHING)]  # fmt: skip
        record = subprocess.Popen(cmd, env=env, cwd=tmp, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(log.read_text().split()) < calls and time.monotonic() < deadline and record.poll() is None:
            time.sleep(0.005)
        time.sleep(jitter_s)
        record.send_signal(signal.SIGTERM)
        _, err = record.communicate(timeout=180)
    answered = {str(i) for i in log.read_text().split()}
    ev = pa.load(out)
    echo = ev[ev["tool"] == "echo"]
    s3 = set(echo[echo["stage"] == "S3"]["jsonrpc_id"].astype(str))
    s4 = set(echo[echo["stage"] == "S4"]["jsonrpc_id"].astype(str))
    return {"run": n, "rc": record.returncode, "answered": len(answered), "S3": len(s3), "S4": len(s4),
            "answered without S3": len(answered - s3), "answered without S4": len(answered - s4),
            "stderr": err.strip().splitlines()[-1:] if record.returncode not in (0, 143, -15) else []}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="promcp-bench-sigterm-"))
    rows = [one_run(n, COUNTS[n % len(COUNTS)], rng.uniform(0, 0.04), tmp) for n in range(args.runs)]
    print(f"{'run':>4} {'rc':>4} {'answered':>9} {'S3':>5} {'S4':>5} {'no S3':>6} {'no S4':>6}")
    for r in rows:
        print(f"{r['run']:>4} {r['rc']:>4} {r['answered']:>9} {r['S3']:>5} {r['S4']:>5} "
              f"{r['answered without S3']:>6} {r['answered without S4']:>6} {' '.join(r['stderr'])}")  # fmt: skip
    lossy = sum(1 for r in rows if r["answered without S3"] or r["answered without S4"])
    print(f"runs with an answered call missing an event: {lossy} of {len(rows)}")


if __name__ == "__main__":
    main()
