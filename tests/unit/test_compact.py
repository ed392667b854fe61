"""``promcp compact``: many run files become a few packs, every row (events and content) unchanged, atomically and
safe against a kill between its steps; readers, selection, re-import and export see the same dataset."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from promcp import analysis
from promcp.analysis.engine import runs_of
from promcp.collectors import import_path
from promcp.store import packs
from promcp.store.packs import compact
from tests.datasets import reader_problems

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "default-run"
SESSION = ROOT / "tests" / "fixtures" / "exports" / "claude-code-project" / "sess1.jsonl"
EXPORTS = ROOT / "tests" / "fixtures" / "exports"


def _session(folder: Path, n: int) -> Path:
    path = folder / f"s{n}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SESSION.read_text().replace('"sess1"', f'"sess-{n}"'))
    return path


def _dataset(tmp: Path, sessions: int = 6) -> tuple[Path, Path]:
    """A dataset of many small runs: the example run (l-cust, content) and one import run per session and per
    export fixture (c-ots), the way imports wrote them before batching."""
    root = tmp / "ds"
    shutil.copytree(EXAMPLE, root)
    folder = tmp / "sessions"
    for n in range(sessions):
        import_path(_session(folder, n), root)
    import_path(EXPORTS / "claude-ai-cases.json", root)
    import_path(EXPORTS / "chatgpt-tools.json", root)
    return root, folder


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The many-small-runs dataset, built once (tests copy it)."""
    root, _ = _dataset(tmp_path_factory.mktemp("compact-base"))
    return root


def _copy(base: Path, tmp: Path) -> Path:
    root = tmp / "ds"
    shutil.copytree(base, root)
    return root


def _raw_rows(root: Path) -> dict[str, list[dict[str, object]]]:
    """Every row as stored, per run (read from the files, no schema unification)."""
    out: dict[str, list[dict[str, object]]] = {}
    files = sorted(root.glob("topology=*/run_id=*/events.parquet")) + packs.pack_files(root)
    for path in files:
        for row in pq.read_table(path).to_pylist():
            out.setdefault(str(row["run_id"]), []).append(row)
    return out


def _content(root: Path) -> list[tuple[object, ...]]:
    frame = analysis.load_content(root)
    return sorted(tuple(r) for r in frame.itertuples(index=False))


def _report(root: Path, **kw: object) -> str:
    from promcp.analysis.views import get_renderer
    from promcp.analysis.views.report import report_document

    rep = analysis.report(root, **kw)  # type: ignore[arg-type]
    import io

    buf = io.StringIO()
    get_renderer("json").write(report_document(rep), buf)
    return buf.getvalue()


def _run_files(root: Path) -> list[Path]:
    return sorted(root.glob("topology=*/run_id=*/events.parquet"))


def test_every_row_and_content_row_survives_unchanged(base: Path, tmp_path: Path) -> None:
    root = _copy(base, tmp_path)
    before_rows = _raw_rows(root)
    before_content = _content(root)
    before_report = _report(root)
    runs = len(_run_files(root))
    assert runs >= 9

    summary = compact(root, pack_rows=40)  # small packs: several per topology

    assert summary.runs == runs and not summary.left
    assert _run_files(root) == []  # every run moved
    assert len(summary.packs) >= 3
    assert summary.files_after < summary.files_before
    assert _raw_rows(root) == before_rows  # every column of every row, per run, in order
    assert _content(root) == before_content
    assert _report(root) == before_report
    assert reader_problems(root) == []  # pandas, pyarrow.dataset, DuckDB (hive) read the packs alike
    frame = pd.read_parquet(root)
    assert sorted(frame["run_id"].astype(str).unique()) == sorted(before_rows)
    # a second compact has nothing to do
    again = compact(root, pack_rows=40)
    assert again.runs == 0 and again.recovered == 0


def test_selection_and_latest_see_the_packed_runs(base: Path, tmp_path: Path) -> None:
    root = _copy(base, tmp_path)
    refs = runs_of(root)
    one = refs[1].run_id
    before_one = _report(root, runs=[one])
    before_latest = _report(root, latest=2)
    compact(root)
    assert [r.run_id for r in runs_of(root)] == [r.run_id for r in refs]
    assert _report(root, runs=[one]) == before_one
    assert _report(root, latest=2) == before_latest
    table = analysis.load_table(root)
    assert table.num_rows == sum(len(v) for v in _raw_rows(root).values())


_KILL = """
import os, sys
from pathlib import Path
from promcp.store import packs
step, nth = sys.argv[2], int(sys.argv[3])
seen = {"n": 0}
def stop(name, pack):
    if name == step:
        seen["n"] += 1
        if seen["n"] == nth:
            os._exit(137)  # what a kill does: no cleanup, no finally
packs._step = stop
packs.compact(Path(sys.argv[1]), pack_rows=int(sys.argv[4]) if len(sys.argv) > 4 else 40)
"""


@pytest.mark.parametrize("step", ["content", "events"])
def test_a_compact_killed_between_steps_leaves_a_readable_dataset_and_finishes_next_time(
    base: Path, tmp_path: Path, step: str
) -> None:
    root = _copy(base, tmp_path)
    before_rows = _raw_rows(root)
    before_content = _content(root)
    before_report = _report(root, sections=["phases", "tasks"])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_KILL), str(root), step, "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 137, proc.stderr
    # mid-way: one pack committed, the second either not committed (content only) or not cleaned up
    assert packs.pack_files(root) and _run_files(root)
    assert analysis.load_table(root).num_rows == sum(len(v) for v in before_rows.values())
    assert _report(root, sections=["phases", "tasks"]) == before_report
    assert _content(root) == before_content

    summary = compact(root, pack_rows=40)

    assert summary.recovered >= 1
    assert _run_files(root) == []
    assert _raw_rows(root) == before_rows
    assert _content(root) == before_content
    assert reader_problems(root) == []
    orphans = [
        p for p in (root / "_content").glob("pack-*.pq") if not any(root.glob(f"topology=*/{p.stem}.parquet"))
    ]
    assert orphans == []


def test_import_after_compact_stays_incremental_and_replaces_grown_sessions(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    folder = tmp_path / "projects"
    for n in range(5):
        import_path(_session(folder, n), root)  # five runs
    compact(root)
    assert len(packs.pack_files(root)) == 1

    again = import_path(folder, root)
    assert again.imported == 0 and again.unchanged == 5  # the index knows the packed runs

    grown = folder / "s2.jsonl"
    with grown.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "parentUuid": None,
                    "sessionId": "sess-2",
                    "type": "user",
                    "uuid": "grow-1",
                    "timestamp": "2026-01-17T07:00:00.000Z",
                    "message": {"role": "user", "content": "one more thing"},
                }
            )
            + "\n"
        )
    import_path(folder, root)
    assert len(packs.pack_files(root)) == 2 and not _run_files(root)  # the new run joined a pack of its own
    assert reader_problems(root) == []
    fresh = tmp_path / "fresh"
    import_path(folder, fresh)
    cols = ["task_id", "stage", "round", "tokens_in", "tokens_out", "tool_call_id"]

    def rows(p: Path) -> list[tuple[object, ...]]:
        df = analysis.load(p)[cols]
        return sorted(tuple(str(v) for v in r) for r in df.itertuples(index=False))

    assert rows(root) == rows(fresh)  # sess-2's old rows left the pack, its new ones are in the new run


def test_export_reads_a_packed_run_alone(base: Path, tmp_path: Path) -> None:
    from promcp.export.runs import RunSpans
    from promcp.stages.link import link_tool_calls
    from promcp.store.discovery import discover

    root = _copy(base, tmp_path)
    counts = {str(r.run.get("run_id")): RunSpans(r).count() for r in discover(root, link=link_tool_calls)}
    compact(root)
    found = discover(root, link=link_tool_calls)
    assert all(r.packed for r in found)
    assert {str(r.run.get("run_id")): RunSpans(r).count() for r in found} == counts


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", "compact", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_cli_says_what_it_did_and_refuses_clearly(base: Path, tmp_path: Path) -> None:
    root = _copy(base, tmp_path)
    runs = len(_run_files(root))
    proc = _cli(str(root))
    assert proc.returncode == 0, proc.stderr
    assert f"{runs} run(s)" in proc.stdout and "pack(s)" in proc.stdout and "→" in proc.stdout

    missing = _cli(str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "nope" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1

    journal = root / "_journal" / "left.jsonl"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text("")
    pending = _cli(str(root))
    assert pending.returncode == 2
    assert "promcp finalize" in pending.stderr and "Traceback" not in pending.stderr


def test_runs_of_an_older_schema_are_packed_apart_unchanged(base: Path, tmp_path: Path) -> None:
    root = _copy(base, tmp_path)  # the example run is of an older schema (no cache columns)
    schemas = {pq.read_schema(p).remove_metadata().to_string() for p in _run_files(root)}
    assert len(schemas) == 2
    before = _raw_rows(root)
    compact(root)
    assert {pq.read_schema(p).remove_metadata().to_string() for p in packs.pack_files(root)} == schemas
    assert _raw_rows(root) == before


def test_a_damaged_pack_is_named_and_the_rest_still_reads(
    base: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = _copy(base, tmp_path)
    compact(root, pack_rows=40)
    first, second, *_ = packs.pack_files(root)
    kept = sum(
        pq.ParquetFile(p).metadata.num_rows for p in packs.pack_files(root) if p not in (first, second)
    )
    first.write_bytes(first.read_bytes()[:100])  # cut short (a disk error, a partial copy)
    table = pq.read_table(second)
    meta = dict(table.schema.metadata or {})
    meta[packs.META_PACK] = b"{not json"
    pq.write_table(table.replace_schema_metadata(meta), second)
    rows = analysis.load_table(root).num_rows
    assert rows == kept
    said = " ".join(r.getMessage() for r in caplog.records if r.name.startswith("promcp.store."))
    assert first.name in said and second.name in said
    proc = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "report", str(root), "--section", "phases"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert compact(root).runs == 0  # nothing to pack, and no crash on the damaged packs


def test_small_packs_merge_and_a_merge_killed_midway_reads_once(base: Path, tmp_path: Path) -> None:
    root = _copy(base, tmp_path)
    compact(root, pack_rows=40)
    before_packs = packs.pack_files(root)
    assert len(before_packs) >= 3
    before_rows = _raw_rows(root)
    before_content = _content(root)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_KILL), str(root), "events", "1", "1000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 137, proc.stderr
    on_disk = sorted(root.glob("topology=*/pack-*.parquet"))
    assert len(on_disk) > len(
        packs.pack_files(root)
    )  # the merged pack is in, the packs it replaces not removed
    assert _raw_rows(root) == before_rows  # read once: the replaced packs are skipped
    assert analysis.load_table(root).num_rows == sum(len(v) for v in before_rows.values())
    assert _content(root) == before_content

    summary = compact(root, pack_rows=1000)

    assert summary.recovered >= 2
    assert sorted(root.glob("topology=*/pack-*.parquet")) == packs.pack_files(root)
    assert len(packs.pack_files(root)) < len(before_packs)
    assert _raw_rows(root) == before_rows
    assert _content(root) == before_content
    assert reader_problems(root) == []
