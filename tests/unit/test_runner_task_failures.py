"""A failure of a whole task leaves one event with its reason: a timeout (S6) or a task that never started (S1)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import promcp.analysis as pa
from promcp.host.agent import TaskResult
from promcp.host.config import TaskConfig
from promcp.host.runner import _run_task
from promcp.recorder import Recorder


class _Agent:
    def __init__(self, result: TaskResult | None) -> None:
        self.result = result

    async def run(self, task: TaskConfig) -> TaskResult:
        if self.result is None:
            await asyncio.sleep(10)
        assert self.result is not None
        return self.result


def _record(tmp: Path, agent: Any, timeout_s: float) -> TaskResult:
    task = TaskConfig(id="t1", prompt="p", servers=("git",))
    with Recorder(tmp, topology="l-cust", fsync="never") as rec:
        return asyncio.run(_run_task(agent, task, timeout_s, rec))


def test_a_task_past_its_timeout_is_an_s6_timeout(tmp_path: Path) -> None:
    result = _record(tmp_path, _Agent(None), 0.05)
    assert result.status == "timeout"
    tasks = pa.task_table(tmp_path).set_index("task_id")
    assert tasks.loc["t1", "outcome"] == "timeout" and tasks.loc["t1", "error"] == "task_timeout"


def test_a_task_that_never_started_says_why(tmp_path: Path) -> None:
    failed = TaskResult("t1", status="error", error="server 'git': did not start")
    assert _record(tmp_path, _Agent(failed), 5).status == "error"
    errors = pa.errors(tmp_path)
    assert list(errors["stage"]) == ["S1"] and list(errors["error_type"]) == ["task_not_started"]
    assert pa.task_table(tmp_path).loc[0, "error"] == "task_not_started: server 'git': did not start"
