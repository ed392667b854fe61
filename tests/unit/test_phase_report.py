"""``promcp report --section phases`` computed in DuckDB without pandas (promcp/analysis/phase_report.py) gives the
same table, header, notes and printed text as the report over pandas, on real datasets: the example run of the
default benchmark, every fixture export imported (Claude Code sessions with overlapping intervals and phases
without timing, failed tasks), the public Claude Code sessions of ../shared/data when present, and synthetic runs
with failing tasks."""

from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import promcp.analysis as pa
from promcp.analysis.phase_report import PhaseReport, phase_report
from promcp.analysis.views import get_renderer
from promcp.analysis.views.base import Document
from promcp.analysis.views.report import phase_report_document, report_document
from tests import synth
from tests.conftest import REPO, SHARED_DATA, write_dataset

EXAMPLE = REPO / "examples" / "default-run"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from promcp.collectors import import_path

    imported = tmp_path_factory.mktemp("imported")
    for path in sorted((REPO / "tests" / "fixtures" / "exports").iterdir()):
        import_path(path, imported)
    out = {
        "example": EXAMPLE,
        "imported": imported,
        "synthetic": write_dataset(tmp_path_factory.mktemp("synth"), synth.events(40, seed=7, fail_every=4)),
    }
    sessions = sorted((SHARED_DATA / "exports").glob("claude-code-*.jsonl")) if SHARED_DATA.is_dir() else []
    if sessions:
        shared = tmp_path_factory.mktemp("shared")
        for path in sessions:
            import_path(path, shared)
        out["shared"] = shared
    return out


def _text(doc: Document, renderer: str) -> str:
    if renderer == "table":
        buf = io.StringIO()
        console = Console(width=160, file=buf, highlight=False, color_system=None, force_terminal=False)
        get_renderer("table", console=console).write(doc, buf)
        return buf.getvalue()
    return get_renderer(renderer).render(doc)


def _same(a: object, b: object) -> bool:
    missing_a = a is None or (isinstance(a, float) and math.isnan(a))
    missing_b = b is None or (isinstance(b, float) and math.isnan(b))
    if missing_a or missing_b:
        return missing_a and missing_b
    assert isinstance(a, int | float) and isinstance(b, int | float)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _check(path: Path, by: list[str], include_incomplete: bool, runs: list[str] | None = None) -> PhaseReport:
    full = pa.report(path, by=by, sections=["phases"], include_incomplete=include_incomplete, runs=runs)
    fast = phase_report(path, by=by, include_incomplete=include_incomplete, runs=runs)
    # the table, value by value
    frame = full.tables["phases"]
    assert len(frame) == len(fast.rows)
    for want, got in zip(frame.itertuples(index=False), fast.rows, strict=True):
        assert [str(getattr(want, k)) for k in by] == [getattr(got, k) for k in by]
        assert want.phase == got.phase
        assert (want.tasks, want.latency_ms_tasks) == (got.tasks, got.latency_ms_tasks)
        for col in ("tokens_mean", "tokens_std", "tokens_share", "latency_ms_mean", "latency_ms_std"):
            assert _same(getattr(want, col), getattr(got, col)), (want.phase, col)
        assert _same(want.latency_ms_share, got.latency_ms_share), (want.phase, "latency_ms_share")
    # the header, the notes and what is printed
    assert (full.events, full.runs, full.tasks, full.complete) == (
        fast.events,
        fast.runs,
        fast.tasks,
        fast.complete,
    )
    assert full.notes == fast.notes
    assert full.table_notes.get("phases", []) == fast.table_notes.get("phases", [])
    assert full.approximations == fast.approximations
    want_doc, got_doc = report_document(full), phase_report_document(fast)
    assert want_doc.meta == got_doc.meta
    for renderer in ("table", "markdown"):
        assert _text(want_doc, renderer) == _text(got_doc, renderer)
    return fast


@pytest.mark.parametrize("name", ["example", "imported", "synthetic", "shared"])
def test_phase_report_equals_the_pandas_report(datasets: dict[str, Path], name: str) -> None:
    if name not in datasets:
        pytest.skip("../shared/data is not present next to the repository")
    path = datasets[name]
    seen = []
    for by in (["topology"], ["topology", "model"], []):
        for include_incomplete in (False, True):
            seen.append(_check(path, by, include_incomplete))
    assert any(r.rows for r in seen)  # a table was compared, not only empty ones


def test_the_datasets_hold_what_the_notes_are_about(datasets: dict[str, Path]) -> None:
    """Each note of the phases report is exercised: incomplete tasks, overlapping intervals, unknown latency."""
    notes = [
        _check(datasets["synthetic"], ["topology"], False),
        _check(datasets["imported"], ["topology"], False),
    ]
    text = " ".join(n for r in notes for n in [*r.notes, *r.table_notes.get("phases", [])])
    assert "not complete and are left out" in text
    assert "recorded intervals overlap" in text
    assert "latency unknown" in text or "no latency was recorded" in text


def test_phase_report_of_selected_runs(datasets: dict[str, Path]) -> None:
    run = pa.select(datasets["synthetic"]).runs[0].run_id
    fast = _check(datasets["synthetic"], ["topology"], False, runs=[run])
    assert fast.runs == 1


def test_cli_prints_the_phases_without_pandas(datasets: dict[str, Path]) -> None:
    """The command starts and finishes without importing pandas, and prints what the pandas report prints."""
    probe = (
        "import sys; from promcp.cli import main; code = main(sys.argv[1:]); "
        "print('pandas loaded' if 'pandas' in sys.modules else 'no pandas'); sys.exit(code)"
    )
    path = str(datasets["imported"])
    proc = subprocess.run(
        [sys.executable, "-c", probe, "report", path, "--section", "phases", "--format", "markdown"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    printed, last = proc.stdout.rsplit("\n", 2)[0], proc.stdout.rstrip().splitlines()[-1]
    assert last == "no pandas"
    want = get_renderer("markdown").render(report_document(pa.report(path, sections=["phases"])))
    assert printed.rstrip() == want.rstrip()
