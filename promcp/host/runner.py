"""One ``promcp run``: workspace, LLM backend, server pool and the tasks, recorded into one Recorder.

:func:`run_benchmark` is the library entry (the CLI adds progress and the summary). Tasks run one after another;
a task that fails (a server that will not start, an LLM error after retries, the per-task timeout) is recorded and
the run goes on with the next task. Servers are started when a task first needs them and kept for the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.types import Tool

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ServerError
from promcp.events import Stage, Status
from promcp.host.agent import Agent, Progress, TaskResult
from promcp.host.config import Benchmark, TaskConfig
from promcp.host.llm.base import LLMBackend, ToolSpec
from promcp.host.servers.pool import ServerPool
from promcp.host.workspace import prepare_workspace
from promcp.recorder import Recorder, scope
from promcp.stages import SYSTEM_CLOCK, Failure, Instant, failed_step_event
from promcp.strategies.live import StrategySpec

__all__ = ["RunResult", "make_pool", "prepare_workspace", "run_benchmark", "strategy_meta"]


def strategy_meta(tasks: Sequence[TaskConfig], override: StrategySpec | None) -> dict[str, Any]:
    """What a run records about its strategies (run meta): the strategy of each task that has one, and each
    router's scorer, K and model. Empty for a run without strategies."""
    per_task = {t.id: override or t.strategy for t in tasks}
    used = {s.label: s for s in per_task.values() if s is not None}
    if not used:
        return {}
    out: dict[str, Any] = {"strategies": {tid: s.label for tid, s in per_task.items() if s is not None}}
    if len(used) == 1 and len([s for s in per_task.values() if s is not None]) == len(tasks):
        out["strategy"] = next(iter(used))
    routers = {label: s.router_info() for label, s in used.items() if s.routed}
    if routers:
        out["routers"] = routers
    return out


@dataclass
class RunResult:
    tasks: list[TaskResult] = field(default_factory=list)
    servers_started: list[str] = field(default_factory=list)
    server_errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    interrupted: bool = False


class DryBackend:
    """Tokenizer-only stand-in for dry runs and ``promcp doctor``: renders and counts tool schemas like the
    default backend would, loads no model."""

    name = "dry-run"
    model = None

    def __init__(self, bench: Benchmark) -> None:
        from promcp import tokenizers
        from promcp.wire.mcp import tool_text

        self.tokenizer = tokenizers.get(bench.llm.tokenizer or DEFAULT_TOKENIZER)
        self.render_tool = lambda spec: tool_text(spec.name, spec.description, spec.input_schema)

    async def aclose(self) -> None:
        return None


def make_pool(
    bench: Benchmark,
    *,
    recorder: Recorder,
    backend: LLMBackend,
    log_dir: Path,
    home: Path,
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
    strategy: StrategySpec | None = None,
) -> RunResult:
    """Run ``tasks`` (or, with ``dry_run``, only start and stop the servers they use); ``strategy`` (``--strategy``)
    applies to every task, over the tasks' own."""
    notify = progress or (lambda _k, _d: None)
    out = RunResult()
    t0 = time.perf_counter()
    pool = make_pool(
        bench,
        recorder=recorder,
        backend=backend,
        log_dir=log_dir,
        home=workspace / ".home",
    )  # its progress (servers starting) is logged on promcp.host.servers.pool
    agent = Agent(
        backend=backend,
        pool=pool,
        recorder=recorder,
        policy=bench.policy,
        sampling=bench.sampling,
        tool_choice=tool_choice,
        system_prompt=bench.system_prompt,
        progress=notify,
        strategy=strategy,
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
            result = await agent.run(task)
    except asyncio.CancelledError:  # Ctrl-C / SIGTERM: the task did not finish; say so in the data
        note = "the run was interrupted before this task finished"
        _task_failure(recorder, task, start, Stage.S6, Status.CANCELLED, "interrupted", attrs={"note": note})
        raise
    except TimeoutError:
        _task_failure(
            recorder, task, start, Stage.S6, Status.TIMEOUT, "task_timeout", attrs={"timeout_s": timeout_s}
        )
        return TaskResult(
            task.id,
            status="timeout",
            error=f"task exceeded {timeout_s:g} s",
            wall_ms=start.ms_to(SYSTEM_CLOCK.now()),
        )
    if result.status == "error" and result.rounds == 0:
        # it failed before its first LLM call (a server it needs did not start): one S1 event with the reason, so
        # the dataset lists the task and why it has no numbers (docs/events.md)
        _task_failure(
            recorder,
            task,
            start,
            Stage.S1,
            Status.ERROR,
            "task_not_started",
            attrs={"servers": list(task.servers)},
            resp_preview=result.error,
        )
    return result


def _task_failure(
    recorder: Recorder,
    task: TaskConfig,
    start: Instant,
    stage: Stage,
    status: Status,
    error_type: str,
    *,
    attrs: dict[str, Any],
    resp_preview: str | None = None,
) -> None:
    """A failure of the task as a whole (not of one call): one event of ``stage`` without tokens or timing."""
    end = SYSTEM_CLOCK.now()
    failure = Failure(status, error_type, resp_preview)
    with scope(task_id=task.id, round=1 if stage is Stage.S1 else None):
        recorder.emit(
            failed_step_event(stage=stage, start=start, end=end, failure=failure, timed=False, attrs=attrs)
        )
