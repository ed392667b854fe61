"""One ``promcp run``: workspace, LLM backend, server pool and the tasks, recorded into one Recorder.

:func:`run_benchmark` is the library entry (the CLI adds progress and the summary). Tasks run one after another;
a task that fails (a server that will not start, an LLM error after retries, the per-task timeout) is recorded and
the run goes on with the next task. Servers are started when a task first needs them and kept for the run.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.types import Tool

from promcp.errors import ServerError
from promcp.events import Event, Stage, Status, TimingQuality
from promcp.host.agent import Agent, Progress, TaskResult
from promcp.host.config import Benchmark, TaskConfig
from promcp.host.llm.base import LLMBackend, ToolSpec
from promcp.host.sessions import ServerPool
from promcp.recorder import Recorder, scope
from promcp.stages import SYSTEM_CLOCK


@dataclass
class RunResult:
    tasks: list[TaskResult] = field(default_factory=list)
    servers_started: list[str] = field(default_factory=list)
    server_errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    interrupted: bool = False


def prepare_workspace(bench: Benchmark, workspace: Path) -> None:
    """Create the run's scratch directory: the files and git repositories the benchmark file lists."""
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / ".home").mkdir(exist_ok=True)
    for rel, text in bench.workspace_files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for rel, files in bench.workspace_git_repos.items():
        repo = workspace / rel
        repo.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text, encoding="utf-8")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workspace / ".home"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "promcp",
            "GIT_AUTHOR_EMAIL": "promcp@localhost",
            "GIT_COMMITTER_NAME": "promcp",
            "GIT_COMMITTER_EMAIL": "promcp@localhost",
            "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
        }
        for argv in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "add", "-A"],
            ["git", "commit", "-q", "-m", "Initial commit"],
        ):
            subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)


def make_pool(
    bench: Benchmark,
    *,
    recorder: Recorder,
    backend: LLMBackend,
    log_dir: Path,
    home: Path,
    on_status: Any = None,
) -> ServerPool:
    def render(server: str, tool: Tool) -> tuple[str, str]:
        spec = ToolSpec(tool.name, tool.description or "", dict(tool.input_schema or {}), server, tool.name)
        return tool.name, backend.render_tool(spec)

    return ServerPool(
        bench.servers,
        recorder=recorder,
        policy=bench.policy,
        log_dir=log_dir,
        home=home,
        render_tool=render,
        tokenizer=backend.tokenizer,
        on_status=on_status,
    )


async def run_benchmark(
    bench: Benchmark,
    tasks: Sequence[TaskConfig],
    *,
    recorder: Recorder,
    backend: LLMBackend,
    workspace: Path,
    log_dir: Path,
    tool_choice: str = "auto",
    progress: Progress | None = None,
    dry_run: bool = False,
) -> RunResult:
    """Run ``tasks`` (or, with ``dry_run``, only start and stop the servers they use)."""
    notify = progress or (lambda _k, _d: None)
    out = RunResult()
    t0 = time.perf_counter()
    pool = make_pool(
        bench,
        recorder=recorder,
        backend=backend,
        log_dir=log_dir,
        home=workspace / ".home",
        on_status=lambda s: notify("status", {"message": s}),
    )
    agent = Agent(
        backend=backend,
        pool=pool,
        recorder=recorder,
        policy=bench.policy,
        sampling=bench.sampling,
        tool_choice=tool_choice,
        system_prompt=bench.system_prompt,
        progress=notify,
    )
    try:
        with recorder.activate(), scope(benchmark=bench.name):
            if dry_run:
                for name in dict.fromkeys(s for t in tasks for s in t.all_servers):
                    notify("stage", {"task": "-", "stage": f"INIT {name}"})
                    try:
                        conn = await pool.get(name)
                        out.servers_started.append(f"{name} ({len(conn.tools)} tools)")
                    except ServerError as exc:
                        out.server_errors[name] = str(exc)
                return out
            for task in tasks:
                notify("task_start", {"task": task.id})
                result = await _run_task(agent, task, bench.policy.timeout_s, recorder)
                out.tasks.append(result)
                notify("task_end", {"task": task.id, "result": result})
            out.server_errors = {}
    except asyncio.CancelledError:
        out.interrupted = True
        abort = getattr(backend, "abort", None)
        if callable(abort):
            abort()
        raise
    finally:
        out.servers_started = out.servers_started or list(pool.live)
        await pool.close()
        out.wall_s = time.perf_counter() - t0
    return out


async def _run_task(agent: Agent, task: TaskConfig, timeout_s: float, recorder: Recorder) -> TaskResult:
    start = SYSTEM_CLOCK.now()
    try:
        async with asyncio.timeout(timeout_s):
            return await agent.run(task)
    except TimeoutError:
        end = SYSTEM_CLOCK.now()
        with scope(task_id=task.id):
            recorder.emit(
                Event(
                    stage=Stage.S6,
                    status=Status.TIMEOUT,
                    error_type="task_timeout",
                    t_start_ns=start.wall_ns,
                    t_end_ns=end.wall_ns,
                    timing_quality=TimingQuality.NONE,
                    attrs={"timeout_s": timeout_s},
                )
            )
        return TaskResult(
            task.id, status="timeout", error=f"task exceeded {timeout_s:g} s", wall_ms=start.ms_to(end)
        )
