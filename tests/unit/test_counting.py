"""Reports never count what is not there (issue 29): events without a task never form one, a dry run is not a run,
an unknown latency is not 0, approximations and overflows are stated exactly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import promcp.analysis as pa
from promcp.analysis.engine import runs_of
from promcp.analysis.views import get_renderer
from promcp.analysis.views.diff import diff_document
from promcp.analysis.views.html import page_data
from promcp.analysis.views.report import report_document
from promcp.errors import ConfigError
from promcp.events import Event, Origin, Part, Stage, Status, TimingQuality, Topology
from promcp.recorder import Recorder
from tests.conftest import write_dataset


def _llm(run: str, task: str | None, *, tokens: int, source: str = "proxy:llm", **kw: object) -> list[Event]:
    common = {"run_id": run, "task_id": task, "round": 1, "source": source, "topology": Topology.C_OTS, **kw}
    return [
        Event(stage=Stage.S1, parts=[Part(Origin.USER, "prompt", tokens)], latency_ms=10.0, **common),  # type: ignore[arg-type]
        Event(stage=Stage.S6, tokens_out=7, latency_ms=20.0, **common),  # type: ignore[arg-type]
    ]


def _proxy_mcp(run: str) -> list[Event]:
    """What an MCP proxy records outside any task: start-up, protocol traffic, a health check's tools/call."""
    common = {"run_id": run, "source": "proxy:mcp", "topology": Topology.C_OTS, "server": "memory"}
    return [
        Event(stage=Stage.INIT, phase="initialize", latency_ms=3.0, **common),  # type: ignore[arg-type]
        Event(stage=Stage.MCP, mcp_method="notifications/initialized", **common),  # type: ignore[arg-type]
        Event(stage=Stage.MCP, mcp_method="resources/list", latency_ms=1.0, **common),  # type: ignore[arg-type]
        Event(stage=Stage.S3, tool="read_graph", footprint_tokens=3, latency_ms=0.5, **common),  # type: ignore[arg-type]
        Event(stage=Stage.S4, tool="read_graph", footprint_tokens=9, latency_ms=4.0, **common),  # type: ignore[arg-type]
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `promcp record`-like run: the MCP proxy's untasked events, then one real task of 38,706 input tokens."""
    return write_dataset(
        tmp_path_factory.mktemp("rec"), [*_proxy_mcp("rec"), *_llm("rec", "t1", tokens=38_706)]
    )


def test_events_without_a_task_never_form_one(recorded: Path) -> None:
    rep = pa.report(recorded, by=[], sections=["phases", "tasks"])
    assert rep.tasks == 1 and rep.complete == 1
    assert rep.tables["tasks"]["task_id"].tolist() == ["t1"]
    phases = rep.tables["phases"].set_index("phase")
    assert phases.loc["context", "tokens_mean"] == 38_706  # not halved by a phantom task
    assert math.isnan(phases.loc["context", "tokens_std"])  # one task: no spread
    assert phases.loc["tool_call", "tokens_mean"] == 0  # the health check's tools/call belongs to no task
    assert not any(pa.IMPLICIT_TASK in n for n in rep.notes)
    assert len(pa.task_table(recorded)) == 1 and len(pa.outcomes(recorded)) == 1
    # the DataFrame and Arrow inputs agree with the run files
    df = pa.load(recorded)
    assert pa.task_table(df)["task_id"].tolist() == ["t1"]
    assert pa.phase_attribution(df, by=[]).set_index("phase").loc["context", "tokens_mean"] == 38_706
    # and a task selection keeps the session events, as it keeps start-up
    one = pa.report(recorded, tasks=["t1"], sections=["init", "phases"])
    assert one.tasks == 1 and not one.tables["init"].empty
    # the diff compares the one real task
    d = pa.diff(recorded, recorded)
    assert d.tables["phases"].set_index("phase").loc["context", "tokens_a"] == 38_706


def test_the_html_page_opens_on_the_first_real_task(recorded: Path) -> None:
    page = page_data(recorded)
    assert page.tasks["task"].tolist() == ["t1"]
    assert page.tasks["events"].iloc[0] == 2 + len(_proxy_mcp("rec"))  # session events drawn with it
    assert page.runs["tasks"].tolist() == [1]


def test_an_instrumented_host_without_task_ids_still_gets_one_implicit_task(tmp_path: Path) -> None:
    events = [
        *_llm("inst", None, tokens=100, source="instrument"),
        *_llm("inst", None, tokens=50, source="instrument"),
    ]
    events.append(Event(stage=Stage.MCP, run_id="inst", source="instrument", mcp_method="ping"))
    rep = pa.report(write_dataset(tmp_path, events), by=[], sections=["phases", "tasks"])
    assert rep.tables["tasks"]["task_id"].tolist() == [pa.IMPLICIT_TASK]
    assert rep.tables["phases"].set_index("phase").loc["context", "tokens_mean"] == 150
    assert any(pa.IMPLICIT_TASK in n for n in rep.notes)


def _dry_run(root: Path, run_id: str) -> None:
    with Recorder(root, topology="l-cust", run_id=run_id, meta={"dry_run": True}, fsync="never") as rec:
        rec.emit(Event(stage=Stage.INIT, phase="spawn", server="calc", latency_ms=2.0))


def test_a_dry_run_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_dataset(tmp_path / "ds", [*_llm("20260101T000000Z-aaaaaa", "a", tokens=10)])
    write_dataset(root, [*_llm("20260101T000100Z-bbbbbb", "b", tokens=30)])
    _dry_run(root, "20260101T000200Z-cccccc")
    refs = runs_of(pa.scan(root))
    assert [r.dry_run for r in refs] == [False, False, True]
    latest = pa.report(root, latest=1, by=[], sections=["tasks"])
    assert latest.tables["tasks"]["task_id"].tolist() == ["b"]  # not the dry run's zero tasks
    assert [r.run_id for r in runs_of(pa.scan(root), dry=False)][-2:] == [
        "20260101T000000Z-aaaaaa",
        "20260101T000100Z-bbbbbb",
    ]
    from promcp.cli import main

    assert main(["diff", "--dataset", str(root), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"]["label"] == "20260101T000000Z-aaaaaa" and doc["b"]["label"] == "20260101T000100Z-bbbbbb"
    # a side with no task says "no data", not "not observable"
    d = pa.diff(root, root, runs_a=["aaaaaa"], runs_b=["cccccc"])
    doc_text = _text(diff_document(d, "A", "B"))
    assert "no data" in doc_text and "not observable" not in doc_text


def _text(doc: object) -> str:
    import io

    buf = io.StringIO()
    get_renderer("markdown").write(doc, buf)  # type: ignore[arg-type]
    return buf.getvalue()


def test_unknown_latency_is_not_zero(tmp_path: Path) -> None:
    untimed = {"timing_quality": TimingQuality.NONE, "run_id": "imp", "task_id": "c1", "round": 1}
    events = [
        Event(stage=Stage.S1, parts=[Part(Origin.USER, "prompt", 12)], **untimed),  # type: ignore[arg-type]
        Event(stage=Stage.S6, tokens_out=4, **untimed),  # type: ignore[arg-type]
    ]
    rep = pa.report(write_dataset(tmp_path, events), by=[], sections=["phases", "segments"])
    for table, key in (("phases", "phase"), ("segments", "segment")):
        lat = rep.tables[table].set_index(key)["latency_ms_mean"].astype("float64")
        assert lat.isna().all(), lat  # not 0.0 ± 0.0
    assert "no latency was recorded" in " ".join(rep.table_notes["phases"])


def test_approximate_tokenizers_are_named(tmp_path: Path) -> None:
    events = _llm("cc", "t", tokens=10, tokenizer="approx:claude")
    rep = pa.report(write_dataset(tmp_path, events))
    assert rep.approximations == {"approx:claude": "cl100k_base × 1.0"}
    assert "approx:claude = cl100k_base × 1.0, a labelled approximation" in _text(report_document(rep))


def test_overflow_is_the_exact_difference(tmp_path: Path) -> None:
    over = Event(
        stage=Stage.S1,
        run_id="o",
        task_id="t",
        round=1,
        parts=[Part(Origin.USER, "prompt", 14_478)],
        context_window=8_192,
        status=Status.CONTEXT_OVERFLOW,
        attrs={"overflow_by": 6_287},  # what older files stored (plus one)
    )
    frame = pa.overflows(write_dataset(tmp_path, [over]))
    assert frame["overflow_by"].tolist() == [14_478 - 8_192]


def test_an_unknown_task_lists_the_tasks_there() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "default-run"
    with pytest.raises(ConfigError, match=r"no task calc-mu .*tasks: calc-mul, dates-sse-between"):
        pa.report(example, tasks=["calc-mu"])
    assert np.isfinite(pa.report(example, tasks=["calc-mul"]).tables["phases"]["tokens_mean"]).all()


def test_a_clients_built_in_tools_are_grouped_under_the_client(tmp_path: Path) -> None:
    parts = [
        Part(Origin.SCHEMAS, "Bash", 1000),
        Part(Origin.SCHEMAS, "memory/create_entities", 150),
        Part(Origin.USER, "prompt", 9),
    ]
    common = {"run_id": "cc", "task_id": "t", "source": "proxy:llm", "topology": Topology.C_OTS}
    events = [
        Event(stage=Stage.S1, round=1, parts=parts, **common),  # type: ignore[arg-type]
        Event(stage=Stage.S2, round=1, tokens_out=5, **common),  # type: ignore[arg-type]
        Event(stage=Stage.S5, round=2, parts=parts, **common),  # type: ignore[arg-type]
        Event(stage=Stage.S6, round=2, tokens_out=5, **common),  # type: ignore[arg-type]
    ]
    resend = pa.resend_cost(write_dataset(tmp_path, events), by=[])
    schemas = resend[resend["origin"] == "schemas"].set_index("tool")
    assert schemas.loc["Bash", "server"] == "client (built-in)"
    assert schemas.loc["create_entities", "server"] == "memory"
    assert schemas.loc["Bash", "tokens_resent"] == 1000
