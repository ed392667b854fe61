"""The import index: per-file cost independent of the dataset's runs, batching, incremental re-import, defaults."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from promcp import analysis
from promcp.collectors import import_path

SESSION = Path(__file__).parents[1] / "fixtures" / "exports" / "claude-code-project" / "sess1.jsonl"


def _session(folder: Path, n: int) -> Path:
    """A copy of the fixture session with its own session id."""
    path = folder / f"s{n}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SESSION.read_text().replace('"sess1"', f'"sess-{n}"'))
    return path


def _grow(path: Path, n: int) -> None:
    """Append one more prompt and answer to a session (what Claude Code does while it runs)."""
    lines = [
        {
            "parentUuid": "a-last",
            "sessionId": f"sess-{n}",
            "type": "user",
            "uuid": f"grow-u-{n}",
            "timestamp": "2026-01-17T07:00:00.000Z",
            "message": {"role": "user", "content": "one more thing"},
        },
        {
            "parentUuid": f"grow-u-{n}",
            "sessionId": f"sess-{n}",
            "type": "assistant",
            "uuid": f"grow-a-{n}",
            "timestamp": "2026-01-17T07:00:03.000Z",
            "message": {
                "model": "claude-opus-4-5",
                "id": f"msg_grow_{n}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": "done"}],
                "usage": {"input_tokens": 7, "output_tokens": 3},
            },
        },
    ]
    with path.open("a") as fh:
        fh.write("".join(json.dumps(line) + "\n" for line in lines))


def _rows(out: Path) -> Counter[tuple[object, ...]]:
    df = analysis.load(out)
    cols = ["task_id", "stage", "round", "tokens_in", "tokens_out", "tool_call_id"]
    return Counter(tuple(r) for r in df[cols].itertuples(index=False))


class _Reads:
    """Counts Parquet schema reads and file opens under a dataset while it is on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.root = str(root)
        self.schemas = 0
        self.opens = 0
        self.on = False
        real = pq.read_schema

        def read_schema(*args: object, **kwargs: object) -> object:
            self.schemas += self.on
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(pq, "read_schema", read_schema)
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if self.on and event == "open" and str(args[0]).startswith(self.root):
            self.opens += 1


def test_per_file_cost_does_not_grow_with_the_runs_in_the_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    costs = []
    for runs in (2, 12):
        out = tmp_path / f"ds{runs}"
        paths = [_session(tmp_path / f"in{runs}", n) for n in range(runs)]
        for path in paths:  # one import call per file: one run each
            import_path(path, out)
        assert len(list(out.glob("topology=*/run_id=*"))) == runs
        reads = _Reads(monkeypatch, out)
        reads.on = True
        s = import_path(_session(tmp_path / f"new{runs}", 999), out)  # a new file
        again = import_path(paths[0], out)  # a file imported before
        reads.on = False
        assert s.imported == 1 and again.unchanged == 1
        costs.append((reads.schemas, reads.opens))
    assert costs[0][0] == costs[1][0] == 0, "no run's schema is read to find duplicates"
    assert costs[0][1] == costs[1][1], f"file opens grew with the runs: {costs}"


def test_a_folder_becomes_one_run_whose_sessions_stay_tasks(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-p"
    for n in range(5):
        _session(folder, n)
    out = tmp_path / "ds"
    s = import_path(tmp_path / "projects", out)
    assert (s.files, s.imported) == (5, 5)
    assert len(list(out.glob("topology=*/run_id=*/events.parquet"))) == 1
    df = analysis.load(out)
    assert {t.split("#")[0] for t in df["task_id"]} == {f"sess-{n}" for n in range(5)}
    small = tmp_path / "small"
    import_path(tmp_path / "projects", small, batch_events=1)  # a new run once a run holds that many events
    assert len(list(small.glob("topology=*/run_id=*/events.parquet"))) == 5
    assert _rows(small) == _rows(out)


def test_importing_again_reads_only_what_changed_and_replaces_its_rows(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-p"
    sessions = [_session(folder, n) for n in range(4)]
    out = tmp_path / "ds"
    import_path(tmp_path / "projects", out)
    before = _rows(out)
    again = import_path(tmp_path / "projects", out)
    assert (again.unchanged, again.files, again.events) == (4, 0, 0)
    assert _rows(out) == before
    _grow(sessions[1], 1)
    _session(folder, 7)  # a new session
    third = import_path(tmp_path / "projects", out)
    assert (third.unchanged, third.files, third.changed) == (3, 2, ["s1.jsonl"])
    assert len(third.replaced) == 1
    fresh = tmp_path / "fresh"
    import_path(tmp_path / "projects", fresh)
    assert _rows(out) == _rows(fresh), "the grown session's earlier rows are gone, the others untouched"
    assert any(t == "sess-1#2" for t, *_ in _rows(out)), "the new prompt is its own task"


def test_a_copy_under_another_name_is_skipped_and_replace_imports_it_again(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    path = _session(folder, 0)
    out = tmp_path / "ds"
    import_path(path, out)
    before = _rows(out)
    copy = tmp_path / "b" / "copy.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    s = import_path(copy, out)
    assert s.files == 0 and [name for name, _ in s.duplicates] == ["copy.jsonl"]
    assert import_path(copy, out).unchanged == 1, "the copy is remembered: not even hashed again"
    r = import_path(path, out, replace=True)
    assert r.files == 1 and len(r.replaced) == 1
    assert _rows(out) == before
    assert len(list(out.glob("topology=*/run_id=*/events.parquet"))) == 1


def test_a_run_deleted_by_hand_is_imported_again(tmp_path: Path) -> None:
    import shutil

    path = _session(tmp_path / "in", 0)
    out = tmp_path / "ds"
    import_path(path, out)
    for run in out.glob("topology=*/run_id=*"):
        shutil.rmtree(run)
    assert import_path(path, out).files == 1


def test_no_path_reads_claude_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from promcp.cli import main

    config = tmp_path / "cfg"
    _session(config / "projects" / "-proj", 3)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    out = tmp_path / "ds"
    assert main(["import", "--out", str(out), "--quiet"]) == 0
    assert "importing" in capsys.readouterr().err
    assert {t.split("#")[0] for t in analysis.load(out)["task_id"]} == {"sess-3"}
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "nowhere"))
    assert main(["import", "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no client folder found" in err and "nowhere" in err


def test_an_index_line_torn_by_a_crash_is_ignored(tmp_path: Path) -> None:
    path = _session(tmp_path / "in", 0)
    out = tmp_path / "ds"
    import_path(path, out)
    with (out / "_imports" / "index.jsonl").open("ab") as fh:
        fh.write(b'{"path": "/x", "si')  # killed mid-write
    assert import_path(path, out).unchanged == 1


def test_a_finalize_the_disk_refuses_is_completed_later_without_doubling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from promcp.errors import StorageError
    from promcp.stages.link import link_tool_calls
    from promcp.store.finalization import finalize_pending

    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    path = _session(tmp_path / "in", 0)
    out = tmp_path / "ds"
    with monkeypatch.context() as m:
        m.setattr("promcp.store.parquet.pq.write_table", full)
        with pytest.raises(StorageError, match="nothing was lost"):
            import_path(path, out)
    assert import_path(path, out).unchanged == 1, "the journal holds it: not imported twice"
    finalize_pending(out, link=link_tool_calls)
    fresh = tmp_path / "fresh"
    import_path(path, fresh)
    assert _rows(out) == _rows(fresh)


def test_a_touched_file_with_the_same_bytes_is_unchanged(tmp_path: Path) -> None:
    import os

    path = _session(tmp_path / "in", 0)
    out = tmp_path / "ds"
    import_path(path, out)
    os.utime(path, ns=(1, 1))
    s = import_path(path, out)
    assert (s.unchanged, s.files, s.duplicates) == (1, 0, [])
    assert import_path(path, out).unchanged == 1
