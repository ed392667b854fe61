"""Why a run failed reaches the user: the summary's error column, ``report --errors``, ``promcp doctor``,
plain progress lines without a terminal, and one-line errors for wrong arguments (issue 18 items 6, 7, 9)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import promcp.analysis as pa
from tests.conftest import REPO

BENCH = """
name: errors
llm:
  backend: openai
  model: gpt-4o
policy: {retries: 0, startup_timeout_s: 10}
servers:
  echo:
    command: python
    args: [-m, promcp.servers.echo]
  broken:
    command: python
    args: [-c, "raise SystemExit(3)"]
tasks:
  - id: llm-down
    prompt: "Echo hello."
    servers: [echo]
  - id: server-down
    prompt: "Use the broken server."
    servers: [broken]
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def _promcp(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"COLUMNS": "150", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.fixture(scope="module")
def failed_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    tmp = tmp_path_factory.mktemp("errors")
    bench = tmp / "bench.yaml"
    bench.write_text(BENCH)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    proc = _promcp("run", str(bench), "--base-url", url, "--out", str(tmp / "out"))
    return proc, tmp, url


@pytest.mark.servers
def test_the_summary_and_the_report_say_why_tasks_failed(
    failed_run: tuple[subprocess.CompletedProcess[str], Path, str],
) -> None:
    proc, tmp, url = failed_run
    assert proc.returncode == 2, proc.stderr  # every task failed
    assert f"cannot reach {url}" in proc.stdout  # the LLM task's reason, in the tasks table
    assert "server 'broken'" in proc.stdout  # the server task's reason
    # stderr is a pipe: plain progress lines instead of a live display that prints nothing
    assert "task 1/2 llm-down: started" in proc.stderr and "task 2/2 server-down: error" in proc.stderr
    df = pa.load(tmp / "out")
    assert set(df["topology"].astype(str)) == {"c-cust"}  # openai's default topology
    tasks = pa.task_table(tmp / "out").set_index("task_id")
    assert tasks.loc["server-down", "outcome"] == "error"
    assert "task_not_started" in tasks.loc["server-down", "error"]
    report = _promcp("report", str(tmp / "out"), "--errors")
    assert report.returncode == 0, report.stderr
    assert "2 of 2 task(s) are not complete" in report.stdout
    assert f"cannot reach {url}" in report.stdout and "task_not_started" in report.stdout
    assert "broken" in report.stdout  # the server's own start-up failure events


@pytest.mark.servers
def test_doctor_finds_the_same_problems_in_seconds(
    failed_run: tuple[subprocess.CompletedProcess[str], Path, str],
) -> None:
    _, tmp, url = failed_run
    out = _promcp("doctor", str(tmp / "bench.yaml"), "--base-url", url)
    assert out.returncode == 1
    lines = {line.split("│")[1].strip(): line for line in out.stdout.splitlines() if line.count("│") >= 3}
    assert "ok" in lines["loopback"]
    assert "FAIL" in lines["endpoint"] and f"cannot reach {url}" in out.stdout
    assert "ok" in lines["server echo"] and "FAIL" in lines["server broken"]
    assert "n/a" in lines["api key"]  # a local endpoint needs no key
    run = _promcp("run", str(tmp / "bench.yaml"), "--base-url", url, "--out", str(tmp / "checked"), "--check")
    assert run.returncode == 1 and "nothing was run" in run.stderr
    assert not (tmp / "checked").exists()


def test_doctor_names_a_missing_model_file(tmp_path: Path) -> None:
    out = _promcp("doctor", "--model", str(tmp_path / "missing.gguf"), "--no-servers")
    assert out.returncode == 1
    assert "GGUF model file not found" in out.stdout and "missing.gguf" in out.stdout


def test_wrong_arguments_get_a_clear_line() -> None:
    bench = str(REPO / "benchmark.yaml")
    ollama = _promcp("run", bench, "--model", "qwen2.5:7b", "--task", "calc-mul")
    assert ollama.returncode == 2 and "--backend ollama" in ollama.stderr
    missing = _promcp("run", bench, "--model", "/nonexistent/x.gguf", "--task", "calc-mul")
    assert missing.returncode == 2
    assert "error: [llm.model]: GGUF model file not found: /nonexistent/x.gguf" in missing.stderr
    cloud = _promcp("run", bench, "--topology", "c-cust", "--task", "calc-mul")
    assert cloud.returncode == 2 and "--topology l-cust" in cloud.stderr
    by = _promcp("report", str(REPO / "examples" / "default-run"), "--by", "nope")
    assert by.returncode == 2 and by.stderr.count("--by") == 1 and "cannot group by nope" in by.stderr
    for out in (ollama, missing, cloud, by):
        assert "Traceback" not in out.stderr and "error: :" not in out.stderr
