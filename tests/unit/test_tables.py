"""Attribution tables recomputed by hand (plain pandas groupby) on a generated dataset must match the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import promcp.analysis as pa
from tests import synth
from tests.conftest import write_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("ds"), synth.events(60, seed=11, overflow_every=9))


@pytest.fixture(scope="module")
def frame(dataset: Path) -> pd.DataFrame:
    return pa.load(dataset)


def _complete(df: pd.DataFrame) -> pd.DataFrame:
    """The events of complete tasks, by hand: a task whose last LLM event (by seq) is an S6 that ended ok."""
    tasks = df[df["task_id"].notna()]
    llm = tasks[tasks["stage"].astype(str).isin(["S1", "S2", "S5", "S6"])].sort_values("seq")
    last = llm.groupby(["run_id", "task_id"], observed=True).tail(1)
    done = last[(last["stage"].astype(str) == "S6") & (last["status"].astype(str) == "ok")]
    keys = set(zip(done["run_id"].astype(str), done["task_id"].astype(str), strict=True))
    mask = [
        (r, t) in keys for r, t in zip(tasks["run_id"].astype(str), tasks["task_id"].astype(str), strict=True)
    ]
    return tasks[mask]


def _hand_tokens(df: pd.DataFrame) -> pd.DataFrame:
    """Per task and phase, by hand: the rule of docs/accounting.md written as plainly as possible."""
    rows = _complete(df).copy()
    stage = rows["stage"].astype(str)
    rows["phase_"] = stage.map(
        {
            "S1": "context",
            "S5": "context",
            "S2": "llm_plan",
            "S3": "tool_call",
            "S4": "tool_result",
            "S6": "final_answer",
        }
    )
    rows["tok"] = np.where(
        stage.isin(["S1", "S5"]),
        rows["tokens_in"],
        np.where(stage.isin(["S2", "S6"]), rows["tokens_out"], rows["footprint_tokens"]),
    )
    rows["topology"] = rows["topology"].astype(str)
    per_task = (
        rows.groupby(["topology", "task_id", "phase_"], observed=True)["tok"].sum().unstack(fill_value=0)
    )
    per_task = per_task.reindex(columns=list(pa.PHASES), fill_value=0)
    per_task["total"] = per_task.sum(axis=1)
    return per_task


def test_phase_tokens_match_hand_groupby(frame: pd.DataFrame) -> None:
    hand = _hand_tokens(frame)
    table = pa.phase_attribution(frame)
    for topology, part in hand.groupby(level="topology"):
        for phase in [*pa.PHASES, "total"]:
            row = table[(table["topology"] == topology) & (table["phase"] == phase)].iloc[0]
            assert row["tokens_mean"] == pytest.approx(part[phase].mean())
            assert row["tokens_std"] == pytest.approx(part[phase].std(ddof=1))
            assert row["tokens_share"] == pytest.approx(100 * part[phase].mean() / part["total"].mean())
            assert row["tasks"] == len(part)


def test_no_token_is_counted_twice(frame: pd.DataFrame) -> None:
    """The total of the table equals the sum of each event's one counted column."""
    hand = _hand_tokens(frame)
    table = pa.phase_attribution(frame)
    for topology, part in hand.groupby(level="topology"):
        total = table[(table["topology"] == topology) & (table["phase"] == "total")].iloc[0]
        assert total["tokens_mean"] * total["tasks"] == pytest.approx(part["total"].sum())


def test_latency_segments_match_hand_groupby(frame: pd.DataFrame) -> None:
    rows = _complete(frame).copy()
    rows["stage"] = rows["stage"].astype(str)
    rows["topology"] = rows["topology"].astype(str)
    answer = rows[rows["stage"] == "S6"].set_index(["task_id", "round"]).index
    key = pd.MultiIndex.from_frame(rows[["task_id", "round"]])
    rows["segment"] = np.where(
        rows["stage"].isin(["S3", "S4"]),
        "tool_execution",
        np.where(key.isin(answer), "answer_synthesis", "tool_plan"),
    )
    hand = rows.groupby(["topology", "task_id", "segment"])["latency_ms"].sum().unstack(fill_value=0)
    table = pa.latency_segments(frame)
    for topology, part in hand.groupby(level="topology"):
        for seg in pa.SEGMENTS:
            row = table[(table["topology"] == topology) & (table["segment"] == seg)].iloc[0]
            assert row["latency_ms_mean"] == pytest.approx(part.get(seg, 0).mean())


def test_input_origins_sum_to_input_tokens(frame: pd.DataFrame) -> None:
    calls = frame[frame["stage"].astype(str).isin(["S1", "S5"])]
    origin_sum = calls[[f"in_{o}" for o in pa.ORIGINS]].sum(axis=1)
    assert (origin_sum == calls["tokens_in"]).all()
    table = pa.input_origins(frame)
    ok = _complete(calls)
    for topology, part in ok.groupby(ok["topology"].astype(str)):
        shares = table.loc[table["topology"] == topology, "share"]
        assert shares.sum() == pytest.approx(100.0)
        schemas = table[(table["topology"] == topology) & (table["origin"] == "schemas")].iloc[0]
        assert schemas["per_call_mean"] == pytest.approx(part["in_schemas"].mean())


def test_resend_cost_counts_every_send_after_the_first(frame: pd.DataFrame) -> None:
    table = pa.resend_cost(frame)
    ok = _complete(frame)
    ok = ok[ok["stage"].astype(str).isin(["S1", "S5"])]
    total_schema = int(ok["in_schemas"].sum())
    schemas = table[table["origin"] == "schemas"]
    assert schemas["tokens_total"].sum() == total_schema
    # a schema sent n times in a task costs n × its size, of which (n-1) × size is re-send
    assert (schemas["tokens_resent"] <= schemas["tokens_total"]).all()
    assert schemas["tokens_resent"].sum() > 0
    results = table[table["origin"] == "tool_results"]
    assert set(results["server"]) <= set(synth.SERVERS), "result keys join to the tool that produced them"


def test_session_init_per_server(frame: pd.DataFrame) -> None:
    table = pa.session_init(frame)
    assert set(table["server"]) == set(synth.SERVERS)
    init = frame[(frame["stage"].astype(str) == "INIT") & (frame["phase"].astype(str) == "tools_discovery")]
    for _, row in table.iterrows():
        mine = init[
            (init["server"].astype(str) == row["server"]) & (init["topology"].astype(str) == row["topology"])
        ]
        assert row["schema_tokens"] == mine["footprint_tokens"].mean()
        assert row["tools"] == len(synth.SERVERS[row["server"]])


def test_report_cli_json_matches_library(dataset: Path, frame: pd.DataFrame) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "report", str(dataset), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["events"] == len(frame)
    lib = pa.phase_attribution(frame)
    cli = pd.DataFrame(doc["tables"]["phases"])
    assert np.allclose(cli["tokens_mean"], lib["tokens_mean"])
    assert doc["notes"] and "context_overflow" in doc["notes"][0]


def test_report_cli_csv_and_markdown(dataset: Path) -> None:
    csv = subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "report",
            str(dataset),
            "--format",
            "csv",
            "--table",
            "segments",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert csv.splitlines()[0].startswith("topology,segment,latency_ms_mean")
    md = subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "report",
            str(dataset),
            "--format",
            "markdown",
            "--by",
            "topology,model",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| phase |" in md and "l-cust / model-1" in md


def test_tokenizer_comparison_over_texts() -> None:
    texts = ['{"name": "read_file", "description": "Read a file"}', "The answer is 42.", "请考试我的软件"]
    table = pa.compare_tokenizers(texts, ["o200k_base", "cl100k_base", "approx:claude"])
    assert list(table["tokenizer"]) == ["o200k_base", "cl100k_base", "approx:claude"]
    assert table.loc[0, "ratio_to_ref"] == 1.0 and table.loc[0, "pearson_r"] == pytest.approx(1.0)
    assert table.loc[2, "token_source"] == "approx"
    assert (table["tokens"] > 0).all()


def test_grouping_by_a_task_attribute_never_splits_a_task(frame: pd.DataFrame) -> None:
    """``model`` is set on LLM events only; tool events of the same task must follow their task's model."""
    table = pa.phase_attribution(frame, by=["model"])
    assert set(table["model"]) == {"model-1", "model-2"}
    sent = _complete(frame)
    assert table[table["phase"] == "total"]["tasks"].sum() == sent["task_id"].nunique()
    tool_call = table[table["phase"] == "tool_call"]
    assert (tool_call["tokens_mean"] > 0).all()


def test_llm_billed_is_context_plus_plan_plus_answer(frame: pd.DataFrame) -> None:
    hand = _hand_tokens(frame)
    table = pa.phase_attribution(frame)
    for topology, part in hand.groupby(level="topology"):
        billed = table[(table["topology"] == topology) & (table["phase"] == "llm_billed")].iloc[0]
        expected = part["context"] + part["llm_plan"] + part["final_answer"]
        assert billed["tokens_mean"] == pytest.approx(expected.mean())
        assert billed["tokens_share"] == pytest.approx(100 * expected.mean() / part["total"].mean())
    assert list(table[table["topology"] == "l-cust"]["phase"]) == [*pa.PHASES, "total", "llm_billed"]


def test_notebook_dtypes_keep_integers_and_attrs_is_json(frame: pd.DataFrame) -> None:
    """Counts load as nullable integers (a missing count is <NA>, not float NaN); attrs is the stored JSON text."""
    for col in ("round", "seq", "tokens_in", "tokens_out", "footprint_tokens", "in_schemas"):
        assert pd.api.types.is_integer_dtype(frame[col]), (col, frame[col].dtype)
    assert frame["tokens_in"].isna().any() and frame["tokens_in"].dropna().map(type).eq(int).all()
    init = frame[frame["phase"].astype(str) == "tools_discovery"]
    assert all(isinstance(json.loads(a), dict) for a in init["attrs"])
    assert frame.attrs == {}  # pandas' own metadata: not the attrs column
