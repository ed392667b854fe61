"""The CI recipe of docs/footprint.md, run as written: its GitHub Actions job's ``promcp footprint`` lines go through
bash with the job's environment (``SERVER`` pointing at the npm memory server instead of the reader's own build,
``GITHUB_STEP_SUMMARY`` a file), first the baseline step, then the gate — which passes, and fails once the
committed baseline is smaller than the server."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MEMORY = ROOT / "node_modules" / ".bin" / "mcp-server-memory"

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not MEMORY.exists(), reason="npm packages not installed (npm ci)"),
]


def _job() -> dict[str, object]:
    text = (ROOT / "docs" / "footprint.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(# \.github/workflows/.*?)```", text, re.S)
    assert block is not None, "docs/footprint.md lost its workflow"
    workflow = yaml.safe_load(block.group(1))
    job: dict[str, object] = workflow["jobs"]["footprint"]
    return job


def test_the_documented_workflow_runs(tmp_path: Path) -> None:
    job = _job()
    steps = [s for s in job["steps"] if "promcp footprint" in str(s.get("run", ""))]  # type: ignore[union-attr]
    baseline_step, gate_step = steps  # the recipe has exactly these two promcp steps
    assert "footprint.json" in baseline_step["run"] and "--baseline footprint.json" in gate_step["run"]
    summary = tmp_path / "summary.md"
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "SERVER": f"{shlex.quote(str(MEMORY))}",
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    assert "SERVER" in job["env"]  # type: ignore[operator]

    def run(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-e", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    made = run(baseline_step["run"])
    assert made.returncode == 0, made.stderr
    saved = json.loads((tmp_path / "footprint.json").read_text())
    assert saved["tools"] == 9 and saved["totals"]["o200k_base"] > 0

    gate = run(gate_step["run"])
    assert gate.returncode == 0, gate.stderr
    text = summary.read_text()
    assert "| create_entities |" in text and "gate: pass" in text

    # a pull request that grows the schemas by more than 5 %: the same line fails the job
    saved["totals"] = {k: int(v * 0.9) for k, v in saved["totals"].items()}
    (tmp_path / "footprint.json").write_text(json.dumps(saved))
    gate = run(gate_step["run"])
    assert gate.returncode == 1 and "regression" in gate.stderr, gate.stderr
