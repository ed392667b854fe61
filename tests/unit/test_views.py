"""The one renderer interface: every command's document, every format, every width — no cell ever cut."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pandas as pd
import pytest
from rich.cells import cell_len
from rich.console import Console

import promcp.analysis as pa
from promcp.analysis.views import (
    RENDERERS,
    Column,
    Document,
    Missing,
    Stat,
    Table,
    TaskProgress,
    format_cell,
    get_renderer,
)
from promcp.analysis.views.diff import diff_document
from promcp.analysis.views.report import report_document
from promcp.analysis.views.terminal import WORD_MAX_WIDTH
from promcp.analysis.views.whatif import whatif_document
from promcp.analysis.whatif import WhatifResult
from tests import synth
from tests.conftest import REPO, write_dataset

EXAMPLE = REPO / "examples" / "default-run"
#: The pieces a terminal line may break between: words, split after the separators of names (``convert_``).
NAME_PIECES = re.compile(r"[^\s\-_/:.,]*[\-_/:.,]+|[^\s\-_/:.,]+")


def _console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), highlight=False, color_system=None, force_terminal=False)


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> list[Document]:
    from promcp.collectors import import_path

    imported = tmp_path_factory.mktemp("imp")
    for path in sorted((REPO / "tests" / "fixtures" / "exports").iterdir()):
        import_path(path, imported)
    runs = write_dataset(tmp_path_factory.mktemp("runs"), synth.events(8, seed=3, fail_every=3))
    everything = [*pa.SECTIONS]
    everything.remove("tokenizers")
    summary = pd.DataFrame(
        [
            {"strategy": "full", "turns": 10, "tokens_per_turn": 200_345.5, "reduction_pct": 0.0},
            {"strategy": "two-phase", "turns": 10, "tokens_per_turn": 3_102.0, "reduction_pct": 93.8},
        ]
    )
    meta = {
        "mode": "catalog",
        "source": "tool-attention",
        "tokenizer": "cl100k_base",
        "k": 3,
        "scorer": "hybrid",
    }
    return [
        report_document(pa.report(EXAMPLE, sections=everything)),
        report_document(pa.report(imported, sections=everything)),
        report_document(pa.report(runs, by=["topology", "model"], sections=everything)),
        whatif_document(WhatifResult(summary, meta)),
        diff_document(pa.diff(runs, runs, runs_a=["synth-l-cust"], runs_b=["synth-c-cust"]), "A", "B"),
    ]


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_no_cell_is_ever_cut(documents: list[Document], width: int) -> None:
    for doc in documents:
        con = _console(width)
        get_renderer("table", console=con).write(doc, sys.stdout)
        text = con.file.getvalue()  # type: ignore[attr-defined]
        assert "…" not in text
        assert all(cell_len(line) <= width for line in text.splitlines()), doc.title
        for table in doc.tables:
            for row in table.cells():
                for col, cell in zip(table.columns, row, strict=True):
                    if col.numeric:
                        assert cell in text, (doc.title, table.title, col.key, cell, width)
                    else:  # text wraps at spaces and after name separators; only a longer piece may fold
                        for word in NAME_PIECES.findall(cell):
                            assert word in text or cell_len(word) > WORD_MAX_WIDTH, (table.title, word, width)
        for table in doc.tables:  # titles: broken at their separators, spaces or name separators only
            if table.rows:
                assert table.title in text or width < cell_len(table.title)
                for word in NAME_PIECES.findall(table.title):
                    assert word in text, (table.title, word, width)


def test_narrow_report_keeps_the_numbers_the_issue_saw_cut() -> None:
    """At COLUMNS=80 the start-up table printed '887…' and the re-send table '200,3…'."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "report",
            str(EXAMPLE),
            "--section",
            "init",
            "--section",
            "resend",
        ],
        capture_output=True,
        text=True,
        env={"COLUMNS": "80", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
        check=True,
    )
    init = pa.session_init(pa.load(EXAMPLE))
    for value in init["ready_ms_mean"]:
        assert f"{value:,.1f}" in out.stdout
    assert "…" not in out.stdout


def test_one_formatting_rule() -> None:
    assert format_cell(None, Column("x", kind="number")) == "—"
    assert format_cell(float("nan"), Column("x", kind="percent")) == "—"
    assert format_cell(Missing("not observable"), Column("x", kind="number")) == "not observable"
    assert format_cell(Stat(1482.2, 778.0, 93.84), Column("x", kind="stat")) == "1,482 ± 778 (93.8%)"
    assert format_cell(Stat(3.0, float("nan"), None), Column("x", kind="stat", digits=1)) == "3.0"
    assert format_cell(-0.04, Column("x", kind="change", digits=1)) == "0.0"
    assert format_cell(12, Column("x", kind="change")) == "+12"


def test_every_format_renders_every_document(documents: list[Document]) -> None:
    assert set(RENDERERS) >= {"table", "markdown", "csv", "json", "html"}
    for doc in documents:
        page = get_renderer("html").render(doc)
        tables = _HtmlCells()
        tables.feed(page)
        shown = [t for t in doc.tables if t.rows]
        assert tables.tables == [[[c.title for c in t.columns], *t.cells()] for t in shown], doc.title
        assert "<script" not in page and "connect-src 'none'" in page
        md = get_renderer("markdown").render(doc)
        assert md.startswith(f"**{doc.title}**")
        body = json.loads(get_renderer("json").render(doc))
        assert set(body["tables"]) == set(doc.datasets())
        first = next(iter(doc.datasets()))
        assert get_renderer("csv", table=first).render(doc).splitlines()[0].split(",")[0]


class _HtmlCells(HTMLParser):
    """Every ``table.data`` of a page as rows of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data


def test_html_tables_use_the_one_formatting_rule() -> None:
    """The HTML table formatter: format_cell's text, escaped; numbers right-aligned; a missing value marked."""
    doc = Document("d <&>", header="h")
    doc.add(
        Table(
            "t",
            "T <1>",
            [Column("k"), Column("v", kind="number", help="what v is"), Column("s", kind="stat")],
            [
                {"k": "<b>", "v": Missing("not observable"), "s": Stat(1482.2, 778.0, 93.84)},
                {"k": "x", "v": None},
            ],
            notes=["a note"],
        )
    )
    doc.add(Table("e", "Empty", [Column("k")], empty="none"))
    page = get_renderer("html").render(doc)
    assert "<td>&lt;b&gt;</td>" in page and "<h3>T &lt;1&gt;</h3>" in page
    assert '<td class="num missing">not observable</td>' in page and '<td class="num missing">—</td>' in page
    assert (
        '<td class="num">1,482 ± 778 (93.8%)</td>' in page
        and '<th class="num" title="what v is">v</th>' in page
    )
    assert '<div class="note empty">none</div>' in page and "<li>a note</li>" in page


def test_diff_prints_an_html_page() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "diff", str(EXAMPLE), str(EXAMPLE), "--format", "html"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("<!doctype html>") and "<table" in out and "<script" not in out


def test_machine_formats_write_the_data_behind_the_views() -> None:
    doc = Document("t", meta={"n": 1}, data={"raw": pd.DataFrame({"a": [1.5, None]})})
    doc.add(Table("view", "View", [Column("a", kind="stat")], [{"a": Stat(1.5, 0.1)}], source="raw"))
    doc.add(
        Table("extra", "Extra", [Column("k"), Column("v", kind="number")], [{"k": "x", "v": Missing("n/a")}])
    )
    body = json.loads(get_renderer("json").render(doc))
    assert body["n"] == 1 and body["tables"]["raw"] == [{"a": 1.5}, {"a": None}]
    assert body["tables"]["extra"] == [{"k": "x", "v": None}]
    assert "view" not in body["tables"]


def test_progress_prints_plain_lines_without_a_terminal() -> None:
    con = _console(80)
    with TaskProgress(con, 2) as view:
        view.update("task_start", {"task": "calc-mul"})
        view.update(
            "task_end",
            {
                "task": "calc-mul",
                "result": SimpleNamespace(status="ok", rounds=2, wall_ms=4300.0, error=None),
            },
        )
        view.update("task_start", {"task": "time-tokyo"})
        result = SimpleNamespace(
            status="error", rounds=1, wall_ms=10.0, error="cannot reach http://x: refused"
        )
        view.update("task_end", {"task": "time-tokyo", "result": result})
    lines = con.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines == [
        "task 1/2 calc-mul: started",
        "task 1/2 calc-mul: ok, 2 round(s), 4.3 s",
        "task 2/2 time-tokyo: started",
        "task 2/2 time-tokyo: error, 1 round(s), 0.0 s — cannot reach http://x: refused",
    ]


def test_bench_help_is_plain_and_wrapped() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "bench", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "60", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert "``" not in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 60


def test_eighty_columns_one_resend_table_whole_names_and_clear_headers(tmp_path: Path) -> None:
    """At 80 columns: the re-send table stays one table (it was split into three, each repeating origin/server/
    tool), names break only after their separators, titles fit their lines, and headers are whole words."""
    long_id = "session-4c2ddfdc-1b2a-4e8f-9c3d-5a6b7c8d9e0f/prompt-0123456789abcdef-0123456789abcd"
    events = [
        msgspec.structs.replace(e, task_id=long_id) if e.task_id == "t000000" else e
        for e in synth.events(4, seed=5, topologies=(synth.Topology.L_CUST,))
    ]
    ds = write_dataset(tmp_path / "ds", events)
    docs = [
        report_document(pa.report(EXAMPLE, sections=["init", "resend", "tasks"])),
        report_document(pa.report(ds, sections=["tasks", "errors"])),
    ]
    for doc in docs:
        con = _console(80)
        get_renderer("table", console=con).write(doc, sys.stdout)
        text = con.file.getvalue()  # type: ignore[attr-defined]
        lines = text.splitlines()
        assert all(cell_len(line) <= 80 for line in lines)
        for cryptic in ("lat ms", "tool err", "schema tok", "schema B", "init ms"):
            assert not re.search(rf"┃ *{cryptic} *┃", text), cryptic
        for table in doc.tables:  # every header is its whole words (wrapped), never an abbreviation
            for col in table.columns if table.rows else ():
                assert all(piece in text for piece in NAME_PIECES.findall(col.title)), col.title
        for table in doc.tables:
            if table.name == "resend":
                start = lines.index(table.title) + 1
                end = next(i for i in range(start, len(lines)) if lines[i][:1] not in "┏┃┡│└")
                block = lines[start:end]
                assert sum(line.startswith("┏") for line in block) == 1, "\n".join(block)  # not split
                assert sum("origin" in line for line in block) == 1
            for row in table.cells():
                for col, cell in zip(table.columns, row, strict=True):
                    if not col.numeric:  # every piece whole on one line (none of these is over 20 cells)
                        for piece in NAME_PIECES.findall(cell):
                            assert piece in text, (table.title, piece)
            if table.rows:  # the title: whole, or broken at its own " — " / " [" separators
                head = re.split(r" — | \[", table.title)[0]
                assert table.title in lines or head in lines, table.title
    assert long_id not in text and "session-" in text and "prompt-" in text  # wrapped after its hyphens


def test_wrap_breaks_names_only_after_separators() -> None:
    from promcp.analysis.views.terminal import title_lines, wrap

    assert wrap("medcalc:creatinine_clearance", 12) == ["medcalc:", "creatinine_", "clearance"]
    assert wrap("trigger-long-running-operation", 16) == ["trigger-long-", "running-", "operation"]
    assert wrap("two words here", 9) == ["two words", "here"]
    assert wrap("a" * 30, 25) == ["a" * 25, "a" * 5]  # only a piece over WORD_MAX_WIDTH is folded
    title = (
        "Session initialization per server and transport — schema tokens under "
        "gguf:SmolLM2-135M-Instruct.Q4_1.gguf [topology: l-cust]"
    )
    assert title_lines(title, 80) == [
        "Session initialization per server and transport",
        "— schema tokens under gguf:SmolLM2-135M-Instruct.Q4_1.gguf [topology: l-cust]",
    ]
    assert title_lines("short", 80) == ["short"]
