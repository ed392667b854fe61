"""CI-sized paper workload: one MCP-Bench single-server task converted by ``promcp bench convert`` and run by
``promcp run`` (the real embedded SmolLM2 model) through a replay server; the dataset's INIT footprint equals the
catalog's, and every stage S1-S6 is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from promcp import analysis
from promcp.catalogs import load_catalog
from promcp.tokenizers import get as get_tokenizer

pytestmark = [pytest.mark.llm, pytest.mark.servers, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
SERVER = "FruityVice"


def _promcp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=900
    )


def test_converted_mcp_bench_task_runs_through_replay(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    tasks = DATA / "tasks" / "mcp-bench" / "mcpbench_tasks_single_runner_format.json"
    catalog_file = DATA / "catalogs" / "mcp-bench-servers.json"
    if not tasks.exists() or not catalog_file.exists():
        pytest.skip(f"shared reference data not present under {DATA}")
    bench = tmp_path / "bench.yaml"
    conv = _promcp(
        "bench", "convert", "mcp-bench", str(tasks), "--catalog", str(catalog_file), "--servers", SERVER,
        "--per-server", "1", "--no-distraction", "--max-rounds", "2", "-o", str(bench), cwd=tmp_path,
    )  # fmt: skip
    assert conv.returncode == 0, conv.stderr
    data = yaml.safe_load(bench.read_text())
    assert [t["servers"] for t in data["tasks"]] == [["fruityvice"]]
    assert data["servers"]["fruityvice"]["mode"] == "replay"
    # a CI-sized run: short answers, a tool call forced in round 1 so the MCP stages happen
    data["sampling"] = {"max_tokens": 48, "tool_choice": "first"}
    bench.write_text(yaml.safe_dump(data, sort_keys=False))

    run = _promcp("run", str(bench), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    df = analysis.load(tmp_path / "out")

    init = df[df["stage"] == "INIT"]
    assert set(init["phase"]) >= {"spawn", "initialize", "tools_discovery"}
    discovery = init[init["phase"] == "tools_discovery"].iloc[0]
    model_tok = get_tokenizer(discovery["tokenizer"])
    expected = load_catalog(catalog_file).server(SERVER).footprint(model_tok)
    assert discovery["footprint_tokens"] == expected["tokens"]
    assert discovery["footprint_bytes"] == expected["bytes"]
    assert json.loads(init[init["phase"] == "spawn"]["attrs"].iloc[0])["mode"] == "replay"

    stages = set(df["stage"])
    assert {"S1", "S2", "S3", "S4", "S5", "S6"} <= stages, sorted(stages)
    s1 = df[df["stage"] == "S1"].iloc[0]
    # the whole replayed list is in the first prompt (the chat template adds at most a separator per tool)
    assert 0 <= s1["in_schemas"] - expected["tokens"] <= expected["n_tools"]
    s4 = df[df["stage"] == "S4"].iloc[0]
    assert json.loads(s4["attrs"])["synthetic"] is True
    assert s4["footprint_tokens"] > 0
