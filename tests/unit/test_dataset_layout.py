"""A dataset root holds only Parquet under its Hive layout (issue 29): what each writer leaves opens in pandas,
pyarrow and DuckDB as it is; a run's logs and workspaces live beside the dataset; older layouts still load."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import promcp.analysis as pa
from promcp.events import Event, Origin, Part, Stage
from promcp.recorder import Recorder
from tests.conftest import REPO
from tests.datasets import dataset_roots, planted, reader_problems

EXAMPLE = REPO / "examples" / "default-run"
FIXTURES = REPO / "tests" / "fixtures" / "exports"


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_the_shipped_example_is_a_plain_parquet_dataset() -> None:
    assert reader_problems(EXAMPLE) == []
    assert [f for f in _files(EXAMPLE) if f.endswith(".parquet")] == [
        "topology=l-cust/run_id=20261124T000728Z-857808/events.parquet"
    ]


def test_recorder_with_content_writes_only_parquet_events(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with Recorder(root, topology="c-cust", run_id="r1", fsync="never", content="full") as rec:
        hash_ = rec.put_text("prompt", "what is 2+2?")
        rec.emit(Event(stage=Stage.S1, task_id="t", round=1, parts=[Part(Origin.USER, "prompt", 5)]))
        rec.emit(Event(stage=Stage.S6, task_id="t", round=1, tokens_out=2, attrs={"content": hash_}))
    assert _files(root) == ["_content/r1.pq", "topology=c-cust/run_id=r1/events.parquet"]
    assert reader_problems(root) == []
    assert pa.load_content(root)["text"].tolist() == ["what is 2+2?"]


def test_imports_write_plain_parquet_datasets(tmp_path: Path) -> None:
    out = tmp_path / "imported"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "import",
            str(FIXTURES / "claude-ai-cases.json"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 2), proc.stderr
    assert list(dataset_roots(tmp_path)) == [out]
    assert reader_problems(out) == []


def test_a_run_keeps_its_logs_and_workspaces_beside_the_dataset(tmp_path: Path) -> None:
    bench = tmp_path / "bench.yaml"
    bench.write_text(
        "name: t\nworkspace:\n  files:\n    notes.txt: hi\n"
        "servers:\n  echo:\n    command: python\n    args: [-m, promcp.servers.echo]\n"
        "tasks:\n  - {id: a, prompt: hi, servers: [echo]}\n",
        encoding="utf-8",
    )
    out = tmp_path / "traces"
    proc = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "run", str(bench), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert all(f.startswith(("topology=", "_content/")) for f in _files(out)), _files(out)
    scratch = tmp_path / "traces.scratch"
    (run_id,) = [p.name for p in (scratch / "workspaces").iterdir()]
    assert (scratch / "workspaces" / run_id / "notes.txt").read_text() == "hi"
    assert (scratch / "logs" / run_id / "echo.log").exists()
    assert reader_problems(out) == []


def test_the_older_layout_still_loads(tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(EXAMPLE, old)
    planted(old)
    for pq in (old / "_content").glob("*.pq"):
        pq.rename(pq.with_suffix(".parquet"))
    (old / "logs" / "r").mkdir(parents=True)  # what `promcp run` left inside a dataset before
    (old / "logs" / "r" / "mcp-sdk.log").write_text("not parquet")
    assert len(pa.load(old)) == len(pa.load(EXAMPLE))
    assert len(pa.load_content(old)) == len(pa.load_content(EXAMPLE)) > 0
    rep = pa.report(old, sections=["phases"])
    assert rep.tasks == 5


@pytest.mark.parametrize("reader", ["pandas", "duckdb"])
def test_the_check_finds_what_does_not_belong(tmp_path: Path, reader: str) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(EXAMPLE, bad)
    planted(bad)
    if reader == "pandas":
        (bad / "README.md").write_text("# notes")
    else:
        shutil.copy(next((bad / "_content").glob("*.pq")), bad / "_content" / "old.parquet")
    problems = reader_problems(bad)
    assert problems and any(reader in p for p in problems), problems
