"""Reports that tell the truth (issue 18): incomplete tasks left out and named, shares that add up, whatif's
baseline, unobservable origins, implicit tasks, run/task selection and diff."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import promcp.analysis as pa
from promcp.analysis.views import get_renderer
from promcp.analysis.views.report import report_document
from promcp.errors import ConfigError
from promcp.events import Event, Origin, Part, Stage, Status, TimingQuality
from promcp.store.parquet import events_to_table
from tests import synth
from tests.conftest import REPO, write_dataset

EXAMPLE = REPO / "examples" / "default-run"


def _promcp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={"COLUMNS": "100", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
    )


def _call(task: str, rnd: int, **kw: object) -> list[Event]:
    """One LLM call of ``task``: an input event and, unless ``out`` is None, an output event."""
    out = kw.pop("out", Stage.S6)
    stage_in = Stage.S1 if rnd == 1 else Stage.S5
    events = [
        Event(
            stage=stage_in,
            run_id="r1",
            task_id=task,
            round=rnd,
            parts=[Part(Origin.USER, "prompt", int(kw.get("tokens", 1032)))],  # type: ignore[call-overload]
            latency_ms=10.0,
        )
    ]
    if out is not None:
        events.append(
            Event(stage=out, run_id="r1", task_id=task, round=rnd, tokens_out=20, latency_ms=100.0)  # type: ignore[arg-type]
        )
    return events


def _failed(task: str) -> Event:
    return Event(
        stage=Stage.S1,
        run_id="r1",
        task_id=task,
        round=1,
        status=Status.ERROR,
        error_type="connection",
        latency_ms=5010.0,
        resp_preview="anthropic: cannot reach https://api.anthropic.com: connection refused",
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete task and four that are not: two failed calls, an interrupted call, a max-rounds stop."""
    events = [
        *_call("ok-task", 1),
        _failed("fail-1"),
        _failed("fail-2"),
        *_call("killed", 1, out=None),
        *_call("max-rounds", 1, out=Stage.S2),
    ]
    return write_dataset(tmp_path_factory.mktemp("mixed"), events)


def test_incomplete_tasks_are_left_out_of_the_tables_and_named(mixed: Path) -> None:
    table = pa.phase_attribution(pa.load(mixed), by=[])
    context = table[table["phase"] == "context"].iloc[0]
    assert context["tasks"] == 1
    assert context["tokens_mean"] == 1032  # not (1032 + 0 + 0) / 3
    assert context["latency_ms_mean"] == 10.0  # not the failed calls' 5,010 ms
    outcomes = pa.task_table(mixed).set_index("task_id")["outcome"].to_dict()
    assert outcomes == {
        "ok-task": "ok",
        "fail-1": "error",
        "fail-2": "error",
        "killed": "interrupted",
        "max-rounds": "no_answer",
    }
    rep = pa.report(mixed, by=[])
    assert rep.complete == 1 and rep.tasks == 5
    note = rep.notes[0]
    assert "4 of 5 task(s)" in note and "fail-1 (error: connection: anthropic: cannot reach" in note
    assert "--include-incomplete" in note
    with_all = pa.report(mixed, by=[], include_incomplete=True).tables["phases"]
    assert with_all[with_all["phase"] == "context"].iloc[0]["tasks"] == 5


def test_errors_and_task_table_carry_the_reason(mixed: Path) -> None:
    out = _promcp("report", str(mixed), "--errors", "--section", "tasks")
    assert out.returncode == 0, out.stderr
    # two task rows and two error rows (their last column: a cell wraps after its separators, so read the table
    # without its rules and blanks)
    squeezed = re.sub(
        r"[\s│]", "", out.stdout.split("note:")[0] + out.stdout.split("Errors:")[1].split("note:")[0]
    )
    assert squeezed.count("cannotreachhttps://api.anthropic.com") == 4
    assert "interrupted" in out.stdout and "no_answer" in out.stdout
    errors = pa.errors(mixed)
    assert list(errors["task_id"]) == ["fail-1", "fail-2"]
    assert set(errors["error_type"]) == {"connection"}


# -- shares add up ------------------------------------------------------------------------------------------------


def _assert_shares_add_up(rep: pa.Report) -> None:
    phases = rep.tables["phases"]
    for _, group in phases.groupby(rep.by or (lambda _: 0)):
        rows = group.set_index("phase")
        for value in ("tokens", "latency_ms"):
            shares = rows.loc[list(pa.PHASES), f"{value}_share"]
            if shares.notna().any():
                assert shares.sum() == pytest.approx(100.0, abs=1e-6), (value, shares)
                assert ((shares >= -1e-9) & (shares <= 100 + 1e-9)).all()
                billed = rows.loc[["context", "llm_plan", "final_answer"], f"{value}_share"].sum()
                assert rows.loc["llm_billed", f"{value}_share"] == pytest.approx(billed, abs=1e-6)
    segments = rep.tables["segments"]
    for _, group in segments.groupby(rep.by or (lambda _: 0)):
        shares = group[group["segment"].isin(pa.SEGMENTS)]["latency_ms_share"]
        if shares.notna().any():
            assert shares.sum() == pytest.approx(100.0, abs=1e-6)
    origins = rep.tables["origins"]
    for _, group in origins.groupby(rep.by or (lambda _: 0)):
        if group["share"].notna().any():
            assert group["share"].sum() == pytest.approx(100.0, abs=1e-6)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_tasks=st.integers(1, 12),
    untimed=st.sampled_from([0.0, 0.3, 0.9]),
    fail_every=st.sampled_from([0, 2, 3]),
)
def test_shares_add_to_100_over_generated_datasets(
    seed: int, n_tasks: int, untimed: float, fail_every: int
) -> None:
    events = synth.events(n_tasks, seed=seed, untimed=untimed, fail_every=fail_every, overflow_every=5)
    root = events_to_table([msgspec.structs.replace(e, seq=i) for i, e in enumerate(events)])
    _assert_shares_add_up(pa.report(root, sections=["phases", "segments", "origins"]))
    _assert_shares_add_up(
        pa.report(root, by=["topology", "model"], sections=["phases", "segments", "origins"])
    )


def _imported(tmp: Path, shared: Path | None) -> Path:
    from promcp.collectors import import_path

    exports = sorted((REPO / "tests" / "fixtures" / "exports").iterdir())
    if shared is not None:
        exports += [p for p in sorted((shared / "exports").iterdir()) if p.suffix in (".json", ".jsonl")]
    for path in exports:
        import_path(path, tmp)
    return tmp


PLAIN_HOST = """
import json, sys, time
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from promcp.shims import record_chat

TOOLS = [{"type": "function", "function": {"name": "word_count", "description": "Count words",
          "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}]

def completion(message, finish):
    return {"id": "c1", "model": "gpt-4o", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 60, "completion_tokens": 12}}

async def main():
    server = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        messages = [{"role": "user", "content": "How many words in 'count these four words'?"}]
        call = {"id": "call_1", "type": "function",
                "function": {"name": "word_count", "arguments": json.dumps({"text": "count these four words"})}}
        t0 = time.perf_counter_ns()
        await anyio.sleep(0.01)
        record_chat(provider="openai", request={"model": "gpt-4o", "messages": messages, "tools": TOOLS},
                    response=completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"),
                    started_ns=t0, ended_ns=time.perf_counter_ns())
        result = await session.call_tool("word_count", {"text": "count these four words"})
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": "call_1", "content": result.content[0].text}]
        t0 = time.perf_counter_ns()
        await anyio.sleep(0.01)
        record_chat(provider="openai", request={"model": "gpt-4o", "messages": messages, "tools": TOOLS},
                    response=completion({"role": "assistant", "content": "Four words."}, "stop"),
                    started_ns=t0, ended_ns=time.perf_counter_ns())

anyio.run(main)
"""


@pytest.fixture(scope="module")
def instrumented(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain instrumented host (no promcp.scope anywhere) run under ``python -m promcp.shims.auto``."""
    tmp = tmp_path_factory.mktemp("instr")
    host = tmp / "plain_host.py"
    host.write_text(PLAIN_HOST, encoding="utf-8")
    out = tmp / "traces"
    proc = subprocess.run(
        [sys.executable, "-m", "promcp.shims.auto", str(host)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PROMCP_OUT": str(out), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_host_without_task_ids_gets_an_implicit_task(instrumented: Path) -> None:
    df = pa.load(instrumented)
    stages = set(df["stage"].astype(str))
    assert {"INIT", "S1", "S2", "S3", "S4", "S5", "S6"} <= stages
    assert df["task_id"].isna().all()
    rep = pa.report(instrumented)
    assert rep.tasks == 1 and rep.complete == 1
    assert any("promcp.scope(task_id=" in n for n in rep.notes)
    phases = rep.tables["phases"].set_index("phase")
    assert phases.loc["tool_call", "tokens_mean"] > 0 and phases.loc["context", "tokens_mean"] > 0


@pytest.mark.parametrize("source", ["run", "instrument", "import"])
def test_every_source_adds_up_and_names_incomplete_tasks(
    source: str, instrumented: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if source == "run":
        # the shipped run, with one task's answer removed: what a run killed mid-task leaves
        df = pa.load(EXAMPLE)
        last_s6 = df[df["stage"].astype(str) == "S6"].index[-1]
        data: object = df.drop(index=last_s6)
    elif source == "instrument":
        df = pa.load(instrumented)
        data = df[df["stage"].astype(str) != "S6"]  # the host stopped before its answer
    else:
        from tests.conftest import SHARED_DATA

        data = _imported(tmp_path, SHARED_DATA if SHARED_DATA.is_dir() else None)
    rep = pa.report(data, sections=["phases", "segments", "origins"])  # type: ignore[arg-type]
    _assert_shares_add_up(rep)
    assert rep.complete < rep.tasks
    assert "not complete and are left out of the tables" in rep.notes[0]


def test_import_latency_shares_say_why_they_add_up(shared_data: Path, tmp_path: Path) -> None:
    """The seven shared exports summed to 119 % with llm_billed below its own parts; now 100 % and a note."""
    rep = pa.report(_imported(tmp_path, shared_data))
    _assert_shares_add_up(rep)
    notes = " ".join(rep.table_notes["phases"])
    assert "latency unknown (no timing recorded)" in notes


# -- c-ots origins ------------------------------------------------------------------------------------------------


def test_unobservable_origins_say_so(tmp_path: Path) -> None:
    from promcp.collectors import import_path

    import_path(REPO / "tests" / "fixtures" / "exports" / "claude-code-project", tmp_path)
    origins = pa.input_origins(pa.load(tmp_path)).set_index("origin")
    assert not origins.loc["schemas", "observable"] and np.isnan(origins.loc["schemas", "share"])
    assert origins.loc["unobserved", "share"] > 0  # the part of the usage the session log does not show
    assert origins["share"].sum() == pytest.approx(100.0)
    text = get_renderer("markdown").render(report_document(pa.report(tmp_path, sections=["origins"])))
    assert "| schemas | not observable | not observable | not observable |" in text
    assert "| unobserved |" in text


# -- whatif baseline ----------------------------------------------------------------------------------------------


def test_whatif_baseline_ignores_zero_token_turns() -> None:
    from promcp.analysis.whatif import summarize

    turns = pd.DataFrame(
        {
            "strategy": ["full"] * 31,
            "tokens": [0] + [500] * 30,
            "full_tokens": [0] + [500] * 30,
            "expected": [0] * 31,
            "hits": [0] * 31,
            "routing_ms": [0.0] * 31,
        }
    )
    assert summarize(turns).iloc[0]["reduction_pct"] == 0.0  # was 3.2: 0/0 counted as a 100 % cut


def test_whatif_on_a_dataset_without_llm_calls_says_why(tmp_path: Path) -> None:
    write_dataset(tmp_path, [Event(stage=Stage.INIT, phase="spawn", run_id="r1", server="x", latency_ms=3.0)])
    out = _promcp("whatif", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "None" not in out.stdout
    assert "no LLM calls to recompute" in out.stdout


# -- selection and diff -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("two"), synth.events(12, seed=5))


def test_run_and_task_selection(two_runs: Path) -> None:
    assert pa.report(two_runs).runs == 2
    one = pa.report(two_runs, runs=["synth-l-cust"])
    assert one.runs == 1 and set(one.tables["phases"]["topology"]) == {"l-cust"}
    assert pa.report(two_runs, latest=1).runs == 1
    tasks = pa.report(two_runs, tasks=["t000000", "t000001"], sections=["tasks"])
    assert sorted(tasks.tables["tasks"]["task_id"]) == ["t000000", "t000001"]
    with pytest.raises(ConfigError, match="no run 'nope'"):
        pa.report(two_runs, runs=["nope"])
    with pytest.raises(ConfigError, match="no task t9"):
        pa.report(two_runs, tasks=["t9"])


def test_diff_prints_the_change_per_phase(two_runs: Path) -> None:
    d = pa.diff(two_runs, two_runs, runs_a=["synth-l-cust"], runs_b=["synth-c-cust"])
    phases = d.tables["phases"].set_index("phase")
    by_run = {
        r: pa.report(two_runs, runs=[r], by=[]).tables["phases"].set_index("phase")
        for r in ("synth-l-cust", "synth-c-cust")
    }
    for phase in pa.PHASES:
        a, b = (
            by_run["synth-l-cust"].loc[phase, "tokens_mean"],
            by_run["synth-c-cust"].loc[phase, "tokens_mean"],
        )
        assert phases.loc[phase, "tokens_change"] == pytest.approx(b - a)
    out = _promcp("diff", "--dataset", str(two_runs), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {r["phase"] for r in doc["tables"]["phases"]} >= set(pa.PHASES)
    table = _promcp("diff", "synth-l-cust", "synth-c-cust", "--dataset", str(two_runs))
    assert "Tokens per task by phase — mean (A, B, change)" in table.stdout
    assert "context" in table.stdout and "+" in table.stdout


def test_timing_none_is_unknown_not_zero(tmp_path: Path) -> None:
    events = [
        *_call("a", 1),
        Event(
            stage=Stage.S1,
            run_id="r1",
            task_id="b",
            round=1,
            parts=[Part(Origin.USER, "prompt", 5)],
            timing_quality=TimingQuality.NONE,
        ),
        Event(stage=Stage.S6, run_id="r1", task_id="b", round=1, tokens_out=3, latency_ms=50.0),
    ]
    rep = pa.report(write_dataset(tmp_path, events), by=[])
    context = rep.tables["phases"].set_index("phase").loc["context"]
    assert context["latency_ms_mean"] == 10.0 and context["latency_ms_tasks"] == 1
    assert "context in 1 of 2" in rep.table_notes["phases"][0]
