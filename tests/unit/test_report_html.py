"""The HTML report's data and page, without a browser: its numbers are the CLI's, every task's timeline holds
exactly its events and the start-up it waited for, limits are announced, and empty or untimed datasets still give a
page. (tests/integration/test_report_html_browser.py opens the pages in Chromium.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pandas as pd
import pytest

import promcp.analysis as pa
from promcp.analysis.views.html import SUMMARY_SECTIONS, TASK_SECTIONS, Limits, page_data, write_html
from promcp.analysis.views.html._tasks import attribute_init
from promcp.analysis.whatif import WhatifResult, read_result
from promcp.cli import main
from promcp.events import TimingQuality
from promcp.recorder import Recorder
from tests import synth
from tests.browser import embedded
from tests.conftest import write_dataset

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/default-run"
#: promcp report flags giving the sections the page shows by default (summary, then the task section).
PAGE_SECTIONS = [a for s in (*SUMMARY_SECTIONS, *TASK_SECTIONS) for a in ("--section", s)]


def _promcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


class _Tables(HTMLParser):
    """Titled tables of a page: {h3 title: [[cell, …], …]}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._title = ""
        self._in: str | None = None
        self._row: list[str] | None = None
        self._cell = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h3":
            self._in, self._title = "h3", ""
        elif tag == "table":
            self.tables[self._title] = []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._in, self._cell = "cell", ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "h3" or tag in ("td", "th"):
            if tag in ("td", "th") and self._row is not None:
                self._row.append(self._cell.strip())
            self._in = None
        elif tag == "tr" and self._row is not None and self.tables:
            self.tables[list(self.tables)[-1]].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in == "h3":
            self._title += data
        elif self._in == "cell":
            self._cell += data


@pytest.fixture(scope="module")
def example_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("html") / "example.html"
    return out, _promcp("report", EXAMPLE, "--html", str(out))


def test_cli_writes_the_page_and_prints_its_path(
    example_page: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, run = example_page
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"wrote {out} (") and out.is_file()
    text = out.read_text(encoding="utf-8")
    assert 0 < len(text.encode()) < 5 * 2**20  # the 5-task example stays far under the 5 MB
    # self-contained: no external script, style, font or image reference, and a policy that forbids fetching
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?(https?:|//)""", text, re.I)
    assert "connect-src 'none'" in text and "default-src 'none'" in text


def test_page_numbers_equal_report_json(example_page: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = example_page
    cli = _promcp("report", EXAMPLE, "--format", "json", *PAGE_SECTIONS)
    assert cli.returncode == 0, cli.stderr
    data = embedded(out)
    assert data["report"] == json.loads(cli.stdout)  # the same document, sections and all
    default = _promcp("report", EXAMPLE, "--format", "json")
    assert default.returncode == 0, default.stderr
    for name, rows in json.loads(default.stdout)[
        "tables"
    ].items():  # and the default tables, number for number
        assert data["report"]["tables"][name] == rows, name
    # the visible tables show those numbers (rounded as the terminal does)
    parser = _Tables()
    parser.feed(out.read_text(encoding="utf-8"))
    phases = {r["phase"]: r for r in data["report"]["tables"]["phases"]}
    tokens = {row[0]: row[1] for row in parser.tables["Tokens per task by phase — mean ± std (share %)"][1:]}
    for phase, cell in tokens.items():
        assert cell.startswith(f"{phases[phase]['tokens_mean']:,.0f} ± "), (phase, cell)
    # the task section: every task with its outcome, and the (empty) error list
    tasks = next(rows for title, rows in parser.tables.items() if title.startswith("Tasks: outcome"))
    assert [r[tasks[0].index("outcome")] for r in tasks[1:]] == ["ok"] * 5
    assert data["header"]["events"] == data["report"]["events"] == 50
    assert data["header"]["tasks"] == data["header"]["complete_tasks"] == 5
    assert data["header"]["tokenizers"] == ["gguf:SmolLM2-135M-Instruct.Q4_1.gguf"]
    assert data["header"]["dataset"] == EXAMPLE and data["whatif"] is None


def test_runs_table_wall_time_is_the_run_summary_line_s(
    example_page: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """One rule for a run's wall time (first event start to last event end): the page's Runs table and the line
    `promcp run` prints agree, and both equal the events' own span counted by hand."""
    from types import SimpleNamespace

    from promcp.cli.run import _wall_s

    out, _ = example_page
    runs = _frame(embedded(out)["runs"])
    df = pa.load(EXAMPLE)
    by_hand = (df["t_end_ns"].max() - df["t_start_ns"].min()) / 1e9
    assert len(runs) == 1 and runs["wall_s"].iloc[0] == pytest.approx(by_hand)
    (events,) = (REPO / EXAMPLE).glob("topology=*/run_id=*/events.parquet")
    process = SimpleNamespace(wall_s=32.3)  # what the process measured, stopping the servers included
    assert _wall_s(process, events) == pytest.approx(by_hand) and f"{by_hand:.1f}" == "27.3"
    assert _wall_s(process, None) == 32.3  # no events: the process's own figure
    parser = _Tables()
    parser.feed(out.read_text(encoding="utf-8"))
    table = next(rows for title, rows in parser.tables.items() if title.lower().startswith("runs"))
    assert table[1][table[0].index("wall s")] == "27.3"


def _frame(table: dict[str, list]) -> pd.DataFrame:
    return pd.DataFrame(table["data"], columns=table["columns"])


def test_timeline_holds_each_task_and_its_startup(
    example_page: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """By hand: a task's bars are its events plus the INIT events recorded after the previous task's last event."""
    out, _ = example_page
    data = embedded(out)
    tasks, bars = _frame(data["tasks"]), _frame(data["timeline"])
    df = pa.load(REPO / EXAMPLE).sort_values("seq")
    order = (
        df[df["task_id"].notna()]
        .groupby("task_id", observed=True)["seq"]
        .agg(["min", "max"])
        .sort_values("min")
    )
    prev_end = -1
    for task_id, (first, last) in order.iterrows():
        mine = df[
            (df["task_id"] == task_id) | ((df["stage"] == "INIT") & df["seq"].between(prev_end + 1, first))
        ]
        key = int(tasks.loc[tasks["task"] == task_id, "key"].iloc[0])
        got = bars[bars["key"] == key]
        assert got["seq"].tolist() == mine["seq"].tolist(), task_id
        assert int(tasks.loc[tasks["key"] == key, "events"].iloc[0]) == len(mine)
        prev_end = last
    # the bars carry the tokens the accounting counts: per task, non-INIT bars sum to the task's token flow
    totals = pa.task_phase_totals(pa.scan(REPO / EXAMPLE)).set_index("task_id")
    for _, t in tasks.iterrows():
        flow = totals.loc[t["task"], [f"tokens_{p}" for p in pa.PHASES]].sum()
        task_bars = bars[(bars["key"] == t["key"]) & (bars["stage"] != "INIT")]
        assert task_bars["tokens"].sum() == flow
    # context fill: the origin parts of every call add up to its input tokens
    calls, wins = _frame(data["calls"]), _frame(data["windows"])
    by_origin = calls[calls["kind"] == "by origin"].groupby(["key", "i"])["tokens"].sum()
    assert (
        by_origin.to_numpy() == wins.set_index(["key", "i"])["tokens_in"].loc[by_origin.index].to_numpy()
    ).all()
    assert set(wins["context_window"]) == {8192}


def test_attribute_init_forward_backward_and_startup_only() -> None:
    tasks = pd.DataFrame({"run_id": ["a", "a", "b"], "first_seq": [3, 10, 5], "task": ["t1", "t2", "u1"]})
    init = pd.DataFrame({"run_id": ["a", "a", "a", "b", "c"], "seq": [0, 5, 12, 9, 0]})
    got = attribute_init(init, tasks)
    assert dict(zip(zip(got["run_id"], got["seq"], strict=True), got["task"], strict=True)) == {
        ("a", 0): "t1",  # before the first task: the task that waited for it
        ("a", 5): "t2",
        ("a", 12): "t2",  # after the run's last task: that task
        ("b", 9): "u1",
        ("c", 0): "(start-up)",  # a run with nothing but start-up
    }


def test_limits_are_applied_and_said(tmp_path: Path) -> None:
    ds = write_dataset(tmp_path / "ds", synth.events(60, seed=5, overflow_every=7))
    page = page_data(ds, limits=Limits(tasks=10, events=10_000, tools=3, rows=12))
    assert len(page.tasks) == 10 and set(page.timeline["key"]) == set(page.tasks["key"])
    assert set(page.tasks["run_id"]) == set(pa.load(ds)["run_id"].astype(str))  # both runs get tasks
    assert any("10 of 60 tasks" in n for n in page.notes), page.notes
    assert any("3 heaviest of 8 tools" in n for n in page.notes), page.notes
    assert page.schemas[["server", "tool"]].drop_duplicates().shape[0] == 3
    # overflowing calls are flagged for the context-fill chart, and counted in the report's notes
    assert page.windows["overflow"].any()
    assert any("context_overflow" in n for n in page.report.notes)
    # the task section is bounded too: every incomplete task first, then complete ones, and said so
    table = next(t for t in page.report.tables if t.name == "tasks")
    outcomes = [r["outcome"] for r in table.rows]
    incomplete = int((pa.task_table(ds)["outcome"] != "ok").sum())
    assert len(outcomes) == 12 and 0 < incomplete < 12
    assert outcomes.count("ok") == 12 - incomplete and len(page.report.data["tasks"]) == 12
    assert table.notes[-1].startswith("the page lists 12 of 60 rows (every incomplete task first)")


def test_empty_dataset_gives_a_page(tmp_path: Path) -> None:
    with Recorder(tmp_path / "empty", topology="l-cust", run_id="empty-1", fsync="never"):
        pass
    out = write_html(tmp_path / "empty", tmp_path / "empty.html")
    data = embedded(out)
    assert data["header"]["events"] == 0 and data["tasks"]["data"] == [] and data["timeline"]["data"] == []
    assert '<div class="note empty">no data</div>' in out.read_text(encoding="utf-8")


def untimed_events(n_tasks: int) -> list:
    """Synthetic events with no timing at all (as an export without timestamps would give)."""
    return [
        msgspec.structs.replace(
            e, latency_ms=None, t_start_ns=None, t_end_ns=None, timing_quality=TimingQuality.NONE
        )
        for e in synth.events(n_tasks, seed=3)
    ]


def test_dataset_without_timing(tmp_path: Path) -> None:
    ds = write_dataset(tmp_path / "untimed", untimed_events(4))
    page = page_data(ds)
    assert len(page.tasks) == 4 and not page.tasks["timed"].any()
    assert set(page.timeline["timing_quality"]) == {"none"} and page.timeline["dur"].isna().all()


def test_saved_whatif_result_is_drawn(tmp_path: Path) -> None:
    ds = write_dataset(tmp_path / "ds", synth.events(6, seed=2))
    (ds / "_whatif.json").write_text(
        json.dumps(
            {
                "mode": "catalog",
                "source": "cat.json",
                "k": 3,
                "scorer": "bm25",
                "tokenizer": "cl100k_base",
                "notes": [],
                "tables": {
                    "summary": [
                        {
                            "strategy": "full",
                            "tokens_per_turn": 900.0,
                            "reduction_pct": 0.0,
                            "recall_pct": 100.0,
                        },
                        {
                            "strategy": "topk",
                            "tokens_per_turn": 120.0,
                            "reduction_pct": 86.7,
                            "recall_pct": 90.0,
                        },
                    ],
                    "scaling": [
                        {"n_tools": 10, "strategy": "full", "tokens_per_turn": 900.0},
                        {"n_tools": 50, "strategy": "full", "tokens_per_turn": 4500.0},
                    ],
                },
            }
        )
    )
    assert isinstance(read_result(ds / "_whatif.json"), WhatifResult)
    assert main(["report", str(ds), "--html", str(tmp_path / "w.html")]) == 0
    w = embedded(tmp_path / "w.html")["whatif"]
    assert [r["strategy"] for r in w["tables"]["summary"]] == ["full", "topk"]
    assert len(w["tables"]["scaling"]) == 2 and w["mode"] == "catalog"
    # the page shows the what-if document's table, formatted by the one table formatter
    parser = _Tables()
    parser.feed((tmp_path / "w.html").read_text(encoding="utf-8"))
    table = parser.tables["Tokens per turn under each strategy (full = as recorded)"]
    assert table[1][:3] == ["full", "—", "900.0"] and table[2][3] == "86.7"


def test_whatif_json_reads_back_into_the_same_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`promcp whatif --format json` saved beside the data is what `report --html` reads: one shape, one path."""
    ds = write_dataset(tmp_path / "ds", synth.events(6, seed=2))
    # the CLI prints the warning that synth records no schema texts ("left out")
    assert main(["whatif", str(ds), "--scorer", "bm25", "--format", "json"]) == 0
    out = capsys.readouterr()
    saved = json.loads(out.out)
    assert (
        saved["mode"] == "dataset" and "left out" in out.err
    )  # a dataset, not a catalog, despite whatif.json
    assert saved["tables"]["summary"] and saved["llm_calls"] > 0
    (ds / "_whatif.json").write_text(out.out)
    from promcp.analysis.views import get_renderer
    from promcp.analysis.views.whatif import whatif_document

    again = get_renderer("json").render(whatif_document(read_result(ds / "_whatif.json")))
    assert json.loads(again) == saved
    page = write_html(ds, tmp_path / "p.html")
    assert embedded(page)["whatif"] == saved


def test_a_broken_saved_whatif_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ds = write_dataset(tmp_path / "ds", synth.events(2, seed=4))
    (ds / "_whatif.json").write_text("{not json")
    out = write_html(ds, tmp_path / "p.html")
    said = [r.getMessage() for r in caplog.records if r.name == "promcp.analysis.views.html._data"]
    assert any(re.search(r"_whatif\.json.*not a JSON what-if result", m) for m in said), said
    assert embedded(out)["whatif"] is None and embedded(out)["header"]["tasks"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--whatif"], "--whatif: draws into the HTML page"),
        (["--html", "{tmp}/x.html", "--whatif", "{tmp}/missing.json"], "cannot read what-if result"),
        (["--html", "{tmp}/x.html", "--whatif", "{tmp}/bad.json"], "not a what-if result"),
        (["--html", "{tmp}/x.html", "--by", "nope"], "--by: cannot group by nope"),
        (["--html", "{tmp}/bad.json/x.html"], "cannot write the HTML report"),
        (["--html", "{tmp}/x.html", "--format", "csv"], "--format: --html writes the page, not csv"),
        (["--html", "{tmp}/x.html", "--run", "nope"], "--run: no run 'nope' here"),
        (["--html", "{tmp}/x.html", "--task", "nope"], "--task: no task nope in this selection"),
    ],
)
def test_bad_arguments_are_one_line(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.json").write_text('{"no": "summary"}')
    rc = main(["report", str(REPO / EXAMPLE), *(a.format(tmp=tmp_path) for a in args)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A claude.ai export: schemas not observable, one interrupted task."""
    out = tmp_path_factory.mktemp("imported") / "traces"
    run = _promcp("import", str(REPO / "tests/fixtures/exports/claude-ai-cases.json"), "--out", str(out))
    assert run.returncode == 0, run.stderr
    return out


def test_page_counts_complete_tasks_and_names_the_others(imported: Path, tmp_path: Path) -> None:
    out = write_html(imported, tmp_path / "imp.html")
    data, text = embedded(out), out.read_text(encoding="utf-8")
    assert data["header"]["tasks"] == 3 and data["header"]["complete_tasks"] == 2
    notes = data["report"]["notes"]
    assert any("1 of 3 task(s) are not complete" in n and "conv-cases#2 (interrupted" in n for n in notes)
    assert "conv-cases#2 (interrupted" in text.split('<ul class="notes" id="notes">', 1)[1].split("</ul>")[0]
    # the task section lists it with its outcome, the timeline still offers it (marked)
    parser = _Tables()
    parser.feed(text)
    tasks = next(rows for title, rows in parser.tables.items() if title.startswith("Tasks: outcome"))
    assert {r[tasks[0].index("task")]: r[tasks[0].index("outcome")] for r in tasks[1:]}["conv-cases#2"] == (
        "interrupted"
    )
    index = _frame(data["tasks"]).set_index("task")
    assert (
        index.loc["conv-cases#2", "outcome"] == "interrupted" and index.loc["conv-cases#1", "outcome"] == "ok"
    )
    # "not observable" is the one missing-value rule: in the origins table, and for the context-fill chart
    origins = next(
        rows for title, rows in parser.tables.items() if title.startswith("LLM input tokens by origin")
    )
    schemas = next(r for r in origins if r[0] == "schemas")
    assert schemas[1:4] == ["not observable"] * 3
    assert '<td class="num missing">not observable</td>' in text
    assert set(_frame(data["windows"])["not_observable"]) == {"schemas"}
    # --include-incomplete counts it, in the page as in the CLI
    every = write_html(imported, tmp_path / "all.html", include_incomplete=True)
    cli = _promcp("report", str(imported), "--format", "json", "--include-incomplete", *PAGE_SECTIONS)
    assert embedded(every)["report"] == json.loads(cli.stdout)
    assert embedded(every)["report"]["tables"]["phases"] != data["report"]["tables"]["phases"]


def test_selection_flags_apply_to_the_page(tmp_path: Path) -> None:
    ds = write_dataset(tmp_path / "ds", synth.events(4, seed=9))
    runs = sorted(pa.load(ds)["run_id"].astype(str).unique())
    assert len(runs) == 2
    out = tmp_path / "one.html"
    assert main(["report", str(ds), "--html", str(out), "--run", runs[1], "--task", "t000002"]) == 0
    data = embedded(out)
    cli = _promcp(
        "report", str(ds), "--format", "json", "--run", runs[1], "--task", "t000002", *PAGE_SECTIONS
    )
    assert data["report"] == json.loads(cli.stdout)
    assert data["header"]["runs"] == 1 and data["header"]["tasks"] == 1
    assert data["header"]["selection"] == {"runs": [runs[1]], "tasks": ["t000002"]}
    assert set(_frame(data["runs"])["run_id"]) == {runs[1]}
    assert set(_frame(data["tasks"])["task"]) == {"t000002"}
    assert set(_frame(data["schemas"])["run_id"]) <= {runs[1]}


def test_format_html_writes_the_page_to_stdout(tmp_path: Path) -> None:
    run = _promcp("report", EXAMPLE, "--format", "html", "--latest")
    assert run.returncode == 0, run.stderr
    page = tmp_path / "stdout.html"
    page.write_text(run.stdout, encoding="utf-8")
    data = embedded(page)
    assert data["header"]["selection"] == {"latest": 1} and data["report"]["tasks"] == 5
    assert run.stdout.startswith("<!doctype html>") and 'id="chart-waterfall"' in run.stdout


def test_a_tool_name_that_opens_a_script_cannot_break_the_page(tmp_path: Path) -> None:
    """A tool named ``<!--<script>`` used to switch the page's data element into the HTML parser's double-escaped
    script state: the data no longer parsed (empty selects, no charts). Embedded JSON holds no ``<`` at all now."""
    hostile = "<!--<script></script>"
    events = [e.replace(tool=hostile) if e.tool else e for e in synth.events(2, seed=5)]
    out = write_html(write_dataset(tmp_path / "ds", events), tmp_path / "page.html")
    text = out.read_text(encoding="utf-8")
    for element in ("promcp-data", "promcp-specs"):
        body = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', text, re.S)
        assert body is not None and "<" not in body.group(1) and ">" not in body.group(1)
    data = embedded(out)
    assert hostile in json.dumps(data, ensure_ascii=False) and isinstance(embedded(out, "promcp-specs"), dict)
