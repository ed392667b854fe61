"""``promcp diff`` on two real runs of the default benchmark (one task each): the per-phase change is printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

ENV = {"COLUMNS": "120", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


def _promcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=ENV,
        cwd=REPO,
    )


@pytest.mark.llm
@pytest.mark.servers
@pytest.mark.slow
def test_diff_of_two_runs_of_the_default_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    for _ in range(2):
        run = _promcp("run", "benchmark.yaml", "--task", "calc-mul", "--out", str(out))
        assert run.returncode == 0, run.stderr[-3000:]
    table = _promcp("diff", "--dataset", str(out))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("promcp diff — A = ") and "(1 task(s))" in lines[0]
    for phase in ("context", "llm_plan", "tool_call", "tool_result", "final_answer", "total", "llm_billed"):
        assert sum(line.startswith(f"│ {phase} ") for line in lines) == 2  # tokens and latency tables
    doc = json.loads(_promcp("diff", "--dataset", str(out), "--format", "json").stdout)
    phases = {r["phase"]: r for r in doc["tables"]["phases"]}
    assert phases["context"]["tokens_a"] > 0
    # same prompt, model, greedy decoding and tool results: the same token flow; the change is latency only
    assert phases["total"]["tokens_change"] == pytest.approx(0.0)
    assert phases["total"]["latency_ms_change"] == pytest.approx(
        phases["total"]["latency_ms_b"] - phases["total"]["latency_ms_a"]
    )
