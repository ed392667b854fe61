"""Storage: reading never writes, the explicit finalize step, disk errors as one line, owner-only files."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import promcp.analysis as pa_
from promcp.cli import main
from promcp.errors import StorageError
from promcp.events import Event, Stage
from promcp.recorder import Recorder
from promcp.store.journal import JOURNAL_DIR, read_journal

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "exports"


def _s3(i: int) -> Event:
    return Event(stage=Stage.S3, task_id=f"t{i // 4}", round=1, footprint_tokens=i, latency_ms=0.5, tool="x")


def _dataset_with_journal(root: Path) -> None:
    """One finalized run and one run whose process died before finalizing (its journal is left)."""
    with Recorder(root, run_id="done") as rec:
        rec.emit(_s3(1))
        rec.put_text("result", "finalized text")
    crashed = Recorder(root, run_id="crashed")
    for i in range(5):
        crashed.emit(_s3(i))
    crashed.put_text("result", "journal text")
    crashed.close(finalize_run=False)


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
        for p in sorted(root.rglob("*"))
    }


_WRITE_EVENTS = {"os.remove", "os.rename", "os.mkdir", "os.chmod", "os.truncate", "shutil.rmtree"}
_audit_state: dict[str, Any] = {"root": None, "writes": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    root = _audit_state["root"]
    if root is None:
        return
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        )
        if writing and str(path).startswith(root):
            _audit_state["writes"].append((event, path))
    elif event in _WRITE_EVENTS and args and str(args[0]).startswith(root):
        _audit_state["writes"].append((event, args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def no_writes_under(tmp_path: Path) -> Iterator[list[tuple[str, Any]]]:
    """Every write-mode open, remove, rename, mkdir or chmod under ``tmp_path`` made while the test runs."""
    _audit_state["root"], _audit_state["writes"] = str(tmp_path), []
    try:
        yield _audit_state["writes"]
    finally:
        _audit_state["root"] = None


def test_reading_a_dataset_with_a_journal_never_writes(
    tmp_path: Path, no_writes_under: list[tuple[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    _audit_state["root"] = None
    _dataset_with_journal(tmp_path)
    before = _snapshot(tmp_path)
    _audit_state["root"] = str(tmp_path)

    df = pa_.load(tmp_path)
    assert sorted(df["run_id"].astype(str).unique()) == ["crashed", "done"] and len(df) == 6
    rep = pa_.report(tmp_path)
    assert rep.events == 6 and rep.runs == 2
    content = pa_.load_content(tmp_path)
    assert set(content["text"]) == {"finalized text", "journal text"}
    assert pa_.load(tmp_path / JOURNAL_DIR / "crashed.jsonl")["footprint_tokens"].tolist() == list(range(5))
    assert main(["report", str(tmp_path), "--section", "phases"]) == 0

    assert no_writes_under == []
    assert _snapshot(tmp_path) == before
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes through file modes (the audit-hook test covers root)"
)
def test_report_on_a_read_only_dataset_holding_a_journal(tmp_path: Path) -> None:
    _dataset_with_journal(tmp_path)
    for p in [tmp_path, *tmp_path.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "promcp.cli", "report", str(tmp_path)], capture_output=True, text=True
        )
    finally:
        for p in [tmp_path, *tmp_path.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    assert proc.returncode == 0, proc.stderr
    assert "6 events" in proc.stdout and "Traceback" not in proc.stderr


def test_promcp_finalize_is_the_explicit_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _dataset_with_journal(tmp_path)
    before = pa_.load(tmp_path)
    live = Recorder(tmp_path, run_id="live")
    live.emit(_s3(9))
    assert main(["finalize", str(tmp_path)]) == 0  # a warning logged: the CLI prints it as one line
    out, err = capsys.readouterr()
    assert "live.jsonl: a process is still recording this run; left for it to finalize" in err
    assert "run_id=crashed/events.parquet" in out
    assert not (tmp_path / JOURNAL_DIR / "crashed.jsonl").exists()
    assert live.journal_path.exists(), "a run still recording is left to its own process"
    live.close()
    assert sorted(p.parent.name for p in tmp_path.rglob("events.parquet")) == [
        "run_id=crashed",
        "run_id=done",
        "run_id=live",
    ]
    after = pa_.load(tmp_path)
    assert len(after) == len(before) + 1, "the finalized runs hold what was read in place, plus the live run"
    assert main(["finalize", str(tmp_path)]) == 0
    assert "no journal to finalize" in capsys.readouterr().out


def _enospc(*_a: Any, **_k: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_at_finalize_keeps_the_journal_and_says_how_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    export = FIXTURES / "claude-ai-cases.json"
    out = tmp_path / "ds"
    monkeypatch.setattr("promcp.store.parquet.pq.write_table", _enospc)
    assert main(["import", str(export), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert "No space left on device" in err and f"promcp finalize {out}" in err and "nothing was lost" in err
    (journal,) = (out / JOURNAL_DIR).glob("*.jsonl")
    kept = len(read_journal(journal, warn=False).events)
    assert kept > 0 and f"all {kept} event(s)" in err
    monkeypatch.undo()
    assert main(["finalize", str(out)]) == 0
    assert len(pa_.load(out)) == kept


def test_full_disk_while_journaling_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import promcp.store.journal as journal_mod

    real_writev = os.writev
    calls = {"n": 0}

    def writev(fd: int, buffers: Any) -> int:
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_writev(fd, buffers)

    monkeypatch.setattr(journal_mod.os, "writev", writev)
    rec = Recorder(tmp_path, run_id="full", fsync="never")
    for i in range(4):
        rec.emit(_s3(i))
    with pytest.raises(
        StorageError, match=r"No space left on device.*the 5 line\(s\) written before are kept"
    ):
        rec.emit(_s3(4))
    monkeypatch.undo()
    rec.close(finalize_run=False)
    assert len(pa_.load(tmp_path)) == 4


def test_a_real_write_limit_is_reported_without_a_traceback(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the kernel refuse the writes (EFBIG), as a full disk would (ENOSPC)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    out = tmp_path / "ds"
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
        preexec_fn=limit,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "File too large" in proc.stderr and "promcp finalize" in proc.stderr
    (journal,) = (out / JOURNAL_DIR).glob("*.jsonl")
    assert read_journal(journal, warn=False).events, "what was journaled before the limit is kept"


def test_dataset_files_are_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = os.umask(0o022)
    try:
        with Recorder(tmp_path / "ds", run_id="m") as rec:
            rec.emit(_s3(1))
            rec.put_text("result", "text")
        for p in (tmp_path / "ds").rglob("*"):
            want = 0o700 if p.is_dir() else 0o600
            assert stat.S_IMODE(p.stat().st_mode) == want, p
        monkeypatch.setenv("PROMCP_FILE_MODE", "640")
        with Recorder(tmp_path / "shared", run_id="s") as rec:
            rec.emit(_s3(1))
        for p in (tmp_path / "shared").rglob("*"):
            want = 0o750 if p.is_dir() else 0o640
            assert stat.S_IMODE(p.stat().st_mode) == want, p
    finally:
        os.umask(old)
