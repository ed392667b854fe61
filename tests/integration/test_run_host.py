"""The promcp host end to end: the REAL embedded model (SmolLM2-135M, llama.cpp) against real MCP servers.

Asserts the dataset a run leaves: INIT events per server, S1-S6 rows per round with non-zero tokens from the
model's own tokenizer, input-by-origin columns summing to tokens_in; faults recorded as events while the other
tasks finish; Ctrl-C/SIGTERM leaving a finalized dataset.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from promcp import analysis
from promcp.host import config
from promcp.host.runner import RunResult, prepare_workspace, run_benchmark
from promcp.recorder import Recorder

pytestmark = [pytest.mark.llm, pytest.mark.servers, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
FAULTY = REPO / "tests" / "fault_servers" / "faulty.py"


@pytest.fixture(scope="module")
def backend() -> Any:
    pytest.importorskip("llama_cpp")
    from promcp.host.llm.base import get_backend

    try:
        return get_backend("llama-cpp")
    except Exception as exc:  # the model package is not installed
        pytest.skip(f"embedded model unavailable: {exc}")


def _run(bench_path: Path, tmp: Path, backend: Any, tasks: list[str] | None = None) -> tuple[RunResult, Path]:
    out, ws = tmp / "data", tmp / "ws"  # the workspace and the logs beside the dataset: it holds only Parquet
    bench = config.load(bench_path, workspace=ws)
    prepare_workspace(bench, ws)
    with Recorder(out, topology="l-cust", benchmark=bench.name, fsync="never") as rec:
        result = asyncio.run(
            run_benchmark(
                bench,
                bench.select(tasks),
                recorder=rec,
                backend=backend,
                workspace=ws,
                log_dir=tmp / "logs",
                tool_choice=bench.tool_choice,
            )
        )
    assert rec.result_path is not None
    return result, rec.result_path


def test_default_benchmark_subset_records_every_stage(tmp_path: Path, backend: Any) -> None:
    tasks = ["calc-mul", "dates-weekday", "time-tokyo", "dates-sse-between"]
    result, path = _run(REPO / "benchmark.yaml", tmp_path, backend, tasks)
    assert sorted(r.task_id for r in result.tasks) == sorted(tasks)  # run in file order
    df = analysis.load(path)
    # INIT: spawn/ready/initialize/tools_discovery for every server the tasks used, with the tool footprint
    init = df[df.stage == "INIT"]
    for server in ("scicalc", "dates", "echo", "time", "dates-sse"):
        phases = set(init[init.server == server].phase)
        assert {"spawn", "ready", "initialize", "tools_discovery"} <= phases, (server, phases)
    disc = init[init.phase == "tools_discovery"]
    assert (disc.footprint_tokens > 0).all() and disc.task_id.isna().all()
    assert set(disc.tokenizer) == {backend.tokenizer.name}
    assert set(init[init.server == "dates-sse"].transport) == {"sse"}
    # per round: one input event (S1 first, S5 later) and one output event (S2 or S6), tokens from the GGUF vocab
    llm = df[df.stage.isin(["S1", "S2", "S5", "S6"])]
    assert set(llm.tokenizer) == {backend.tokenizer.name} and backend.tokenizer.name.startswith("gguf:")
    for task_id, rows in llm.groupby("task_id"):
        for rnd, r in rows.groupby("round"):
            stages = sorted(r.stage)
            assert len(stages) == 2, (task_id, rnd, stages)
            assert stages[0] == ("S1" if rnd == 1 else "S5")
            assert stages[1] in ("S2", "S6")
    inputs = df[df.stage.isin(["S1", "S5"])]
    assert (inputs.tokens_in > 0).all()
    origins = inputs[["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]].sum(axis=1)
    assert (origins == inputs.tokens_in).all()
    assert (inputs.in_schemas > 0).all() and (inputs.context_window == backend.context_window).all()
    outputs = df[df.stage.isin(["S2", "S6"])]
    assert (outputs.tokens_out > 0).all()
    # with tool_choice "first", round 1 always calls a tool: S2 -> S3 -> S4 joined by the tool-call id
    for task_id in tasks:
        t = df[df.task_id == task_id]
        s2 = t[(t.stage == "S2") & (t["round"] == 1)]
        assert len(s2) == 1
        call_id = s2.tool_call_id.iloc[0]
        s3, s4 = t[t.stage == "S3"], t[t.stage == "S4"]
        assert call_id in set(s3.tool_call_id)
        if s3[s3.tool_call_id == call_id].status.iloc[0] == "ok":  # sent (schema-valid arguments)
            assert call_id in set(s4.tool_call_id)
            row = s4[s4.tool_call_id == call_id].iloc[0]
            assert row.footprint_bytes > 0 and row.latency_ms > 0 and row.mcp_method == "tools/call"
    # the first call of a later round reuses the cached prompt prefix
    s5 = inputs[inputs.stage == "S5"]
    attrs = [a if isinstance(a, dict) else json.loads(a) for a in s5["attrs"]]
    assert any(a.get("reused_prefix_tokens", 0) > 0 for a in attrs)


def _fault_bench(tmp_path: Path) -> Path:
    servers = {
        mode: {"command": "python", "args": [str(FAULTY), mode]}
        for mode in ("crash", "hang", "garbage", "nostart")
    }
    servers["echo"] = {"command": "python", "args": ["-m", "promcp.servers.echo"]}
    tasks = [
        {"id": f"fault-{mode}", "prompt": "Look up the key 'alpha'.", "servers": [mode], "max_rounds": 2}
        for mode in ("nostart", "crash", "hang", "garbage")
    ]
    tasks.append({"id": "healthy", "prompt": "Reverse the text 'abc'.", "servers": ["echo"], "max_rounds": 2})
    doc = {
        "name": "faults",
        "sampling": {"max_tokens": 48, "tool_choice": "first"},
        "policy": {"retries": 1, "backoff_s": [0.1], "tool_timeout_s": 3, "startup_timeout_s": 15},
        "servers": servers,
        "tasks": tasks,
    }
    path = tmp_path / "faults.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")  # JSON is YAML
    return path


def test_faults_are_events_and_other_tasks_finish(tmp_path: Path, backend: Any) -> None:
    result, path = _run(_fault_bench(tmp_path), tmp_path, backend)
    by_id = {r.task_id: r for r in result.tasks}
    assert len(by_id) == 5
    assert by_id["healthy"].status == "ok" and by_id["healthy"].tools_called
    assert by_id["fault-nostart"].status == "error"
    df = analysis.load(path)
    # a server that fails to start: one failed INIT event per attempt (retries: 1 → 2 attempts), status error
    nostart = df[(df.server == "nostart") & (df.stage == "INIT")]
    failed = nostart[nostart.status != "ok"]
    assert len(failed) == 2 and set(failed.error_type) <= {"server_exited", "protocol_error"}
    assert sorted(
        json.loads(a)["attempt"] if isinstance(a, str) else a["attempt"] for a in failed["attrs"]
    ) == [1, 2]
    # crash mid-call: the S4 of the call is an error event, typed server_crashed
    s4 = df[df.stage == "S4"].set_index("server")
    assert s4.loc["crash", "status"] == "error" and s4.loc["crash", "error_type"] == "server_crashed"
    # hang past the tool timeout: status timeout
    assert s4.loc["hang", "status"] == "timeout" and s4.loc["hang", "error_type"] == "tool_timeout"
    # non-JSON output: the call still completes (the SDK skips bad lines) and the run goes on
    assert s4.loc["garbage", "status"] in ("ok", "error")
    assert "garbage" in set(df[(df.stage == "INIT") & (df.phase == "tools_discovery")].server)


def test_sigint_leaves_a_finalized_dataset(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "run",
            str(REPO / "benchmark.yaml"),
            "--out",
            str(out),
            "--task",
            "echo-reverse",
            "--task",
            "calc-mul",
            "--task",
            "med-map",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    journal_dir = out / "_journal"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:  # wait until the first task's answer is journaled
            texts = (
                [p.read_text(errors="replace") for p in journal_dir.glob("*")] if journal_dir.is_dir() else []
            )
            if any('"stage":"S6"' in t for t in texts):
                break
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (130, 0), err.decode()[-2000:]
    files = list(out.glob("topology=l-cust/run_id=*/events.parquet"))
    assert len(files) == 1
    df = analysis.load(files[0])
    assert "S6" in set(df.stage) and (df.stage == "INIT").any()
