"""The embedded model on any CPU (issue 28): the load options that avoid llama.cpp's AMX crash are pinned, and a
model process that dies of a signal fails the call (``model_crashed``, the signal), never the run.

The AMX crash itself cannot be reproduced on a CPU without AMX, so the first test pins the option that avoids it on
the struct the model is really loaded with; the others kill the real model's process with a real SIGSEGV.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from promcp import analysis
from promcp.host import config
from promcp.host.llm._model_process import ModelCrashed, ModelProcess, load_llama
from promcp.host.llm.llama_cpp import DEFAULT_MODEL_SHA256, default_model_path, verify_sha256
from promcp.host.runner import prepare_workspace, run_benchmark
from promcp.recorder import Recorder

pytestmark = [pytest.mark.llm, pytest.mark.slow]


@pytest.fixture(scope="module")
def model_path() -> Path:
    path = default_model_path()
    verify_sha256(path, DEFAULT_MODEL_SHA256)
    return path


def test_the_model_is_loaded_without_extra_buffer_types(model_path: Path) -> None:
    import llama_cpp

    llm = load_llama(model_path, 512, 1, 0)
    try:
        assert llm.model_params.use_extra_bufts is False
    finally:
        llm.close()
    # the option is ours: llama.cpp's default turns extra buffer types (AMX, repacking) on
    assert llama_cpp.llama_model_default_params().use_extra_bufts is True


def _request(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "grammar": None,
        "stop": [],
    }


def test_a_model_process_killed_mid_call_raises_model_crashed_and_the_next_call_restarts_it(
    model_path: Path,
) -> None:
    model = ModelProcess(model_path, 2048, 2, 0)
    try:
        model.ensure_started()
        pid = model.pid
        assert pid is not None
        caught: list[BaseException] = []

        def call() -> None:
            try:
                model.complete(_request("Hello " * 600, 256))
            except BaseException as exc:
                caught.append(exc)

        worker = threading.Thread(target=call)
        worker.start()
        time.sleep(0.5)  # the 600-token prompt alone takes longer than this on any machine of this kind
        os.kill(pid, signal.SIGSEGV)
        worker.join(60)
        assert not worker.is_alive()
        assert len(caught) == 1 and isinstance(caught[0], ModelCrashed), caught
        crash = caught[0]
        assert crash.error_type == "model_crashed" and crash.signal_name == "SIGSEGV"
        assert "killed by SIGSEGV while evaluating a prompt" in str(crash) and "promcp doctor" in str(crash)
        assert (
            "Fatal Python error: Segmentation fault" in crash.crash_log
        )  # faulthandler's record of the death
        # the next call starts a new process and answers
        done = model.complete(_request("Hello", 2))
        assert model.starts == 2 and model.pid != pid
        assert done["out"]["usage"]["prompt_tokens"] > 0
    finally:
        model.close()
    assert model.pid is None


BENCH = """
name: model-crash
llm:
  backend: llama-cpp
sampling: {temperature: 0.0, max_tokens: 48, seed: 0, tool_choice: first}
policy: {retries: 0, max_rounds: 2}
servers:
  echo:
    command: python
    args: [-m, promcp.servers.echo]
tasks:
  - id: first
    prompt: "Echo the word hello."
    servers: [echo]
  - id: second
    prompt: "Echo the word world."
    servers: [echo]
"""


@pytest.mark.servers
def test_a_crashed_model_fails_its_task_with_the_signal_and_the_run_goes_on(tmp_path: Path) -> None:
    from promcp.host.llm.base import get_backend

    (tmp_path / "bench.yaml").write_text(BENCH)
    ws = tmp_path / "ws"
    bench = config.load(tmp_path / "bench.yaml", workspace=ws)
    prepare_workspace(bench, ws)
    backend = get_backend("llama-cpp")
    pid = backend._model.pid
    os.kill(pid, signal.SIGSEGV)  # dies before the first task's first call: that call finds it dead
    while backend._model._proc.poll() is None:
        time.sleep(0.05)
    out = tmp_path / "data"
    with Recorder(out, topology="l-cust", benchmark=bench.name, fsync="never") as rec:
        result = asyncio.run(
            run_benchmark(
                bench,
                bench.select(None),
                recorder=rec,
                backend=backend,
                workspace=ws,
                log_dir=tmp_path / "logs",
                tool_choice=bench.tool_choice,
            )
        )
    by_id = {t.task_id: t for t in result.tasks}
    assert by_id["first"].status == "error" and "SIGSEGV" in (by_id["first"].error or "")
    assert by_id["second"].status == "ok"  # a new model process answered the next task
    # the run was finalized: one Parquet file, no journal left
    assert rec.result_path is not None and rec.result_path.is_file()
    assert not list(out.glob("_journal/*.jsonl"))
    df = analysis.load(out)
    crashed = df[df["error_type"] == "model_crashed"]
    assert len(crashed) == 1 and crashed.iloc[0]["task_id"] == "first" and crashed.iloc[0]["stage"] == "S1"
    assert crashed.iloc[0]["status"] == "error"
    # nothing else lost: the server's start-up and the second task's rounds are all there
    init = df[(df["stage"] == "INIT") & (df["server"] == "echo")]
    assert {"spawn", "initialize", "tools_discovery"} <= set(init["phase"])
    second = df[df["task_id"] == "second"]
    assert {"S1", "S2"} <= set(second["stage"]) or {"S1", "S6"} <= set(second["stage"])
    # the report says why the task is not counted
    errors = analysis.errors(df)
    assert "model_crashed" in set(errors["error_type"])
    from promcp.analysis.report import report

    notes = report(out).notes
    assert any("the embedded model's process crashed in 1 task(s)" in n for n in notes), notes


def test_doctor_evaluates_a_long_prompt_in_a_model_process(model_path: Path) -> None:
    from promcp.host.doctor import check_inference

    check = check_inference(model_path)
    assert check.outcome == "ok", check.detail
    assert "600-token prompt evaluated in" in check.detail or "601-token prompt evaluated in" in check.detail


def test_doctor_names_the_signal_and_the_fix_when_the_model_crashes(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promcp.host import doctor

    def dies(self: ModelProcess, request: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        raise ModelCrashed(
            "the model process was killed by SIGILL while evaluating a prompt", signal_name="SIGILL"
        )

    monkeypatch.setattr(ModelProcess, "complete", dies)
    check = doctor.check_inference(model_path)
    assert check.outcome == "fail"
    assert "SIGILL" in check.detail and "-DGGML_NATIVE=OFF" in check.detail and "docs/run.md" in check.detail
