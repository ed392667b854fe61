"""The durable store: journal recovery, atomic Parquet, schema versions, bad inputs."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import promcp.analysis as pa_
from promcp.errors import NotATraceError, SchemaVersionError
from promcp.events import SCHEMA_VERSION, Event, Stage
from promcp.recorder import Recorder
from promcp.stages.link import link_tool_calls
from promcp.store import discover, read_journal
from promcp.store.journal import JOURNAL_DIR

REPO = Path(__file__).resolve().parents[2]


def _s3(i: int) -> Event:
    return Event(stage=Stage.S3, task_id=f"t{i // 4}", round=1, footprint_tokens=i, latency_ms=0.5, tool="x")


def test_recorder_round_trip_and_layout(tmp_path: Path) -> None:
    with Recorder(tmp_path, topology="c-cust", run_id="run1", benchmark="b") as rec:
        for i in range(10):
            rec.emit(_s3(i))
        h = rec.put_text("schema", '{"name": "x"}')
    files = list(tmp_path.rglob("events.parquet"))
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "topology=c-cust/run_id=run1/events.parquet"
    ]
    assert not list((tmp_path / JOURNAL_DIR).glob("*.jsonl")), "the journal is removed once finalized"
    meta = pq.read_schema(files[0]).metadata
    assert meta[b"promcp.schema_version"] == str(SCHEMA_VERSION).encode()
    df = pa_.load(tmp_path)
    assert list(df["seq"]) == list(range(10))
    assert list(df["footprint_tokens"]) == list(range(10))
    assert set(df["benchmark"].astype(str)) == {"b"}
    content = pa_.load_content(tmp_path)
    assert content.loc[content["hash"] == h, "text"].item() == '{"name": "x"}'


def _warned(caplog: pytest.LogCaptureFixture) -> str:
    """The warnings promcp logged (a reader's skipped data goes to promcp.* loggers), as one text."""
    return " ".join(
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("promcp.")
    )


def test_corrupt_journal_line_keeps_valid_rows(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(tmp_path, run_id="run2")
    for i in range(5):
        rec.emit(_s3(i))
    rec.close(finalize_run=False)
    journal = tmp_path / JOURNAL_DIR / "run2.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    lines.insert(3, b'{"stage": "S3", "footprint_tokens": "NaN-ish"}\n')
    lines.insert(5, b"\xff\xfe garbage\n")
    journal.write_bytes(b"".join(lines) + b'{"stage":"S3","footprint_tok')  # and a torn last line
    df = pa_.load(tmp_path)
    assert len(df) == 5
    messages = _warned(caplog)
    assert "run2.jsonl" in messages and "line 4" in messages and "line 6" in messages


def test_report_reads_an_unfinalized_journal_in_place(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, run_id="run3")
    rec.emit(_s3(1))
    rec.close(finalize_run=False)
    rep = pa_.report(tmp_path)
    assert rep.events == 1
    assert not list(tmp_path.rglob("events.parquet")), "reading never finalizes (promcp finalize does)"
    assert (tmp_path / JOURNAL_DIR / "run3.jsonl").exists()


def test_future_schema_version_is_refused_by_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Recorder(tmp_path, run_id="ok") as rec:
        rec.emit(_s3(1))
    good = next(tmp_path.rglob("events.parquet"))
    future_dir = tmp_path / "topology=l-cust" / "run_id=future"
    future_dir.mkdir(parents=True)
    table = pq.read_table(good)
    meta = dict(table.schema.metadata)
    meta[b"promcp.schema_version"] = b"99"
    pq.write_table(table.replace_schema_metadata(meta), future_dir / "events.parquet")
    with pytest.raises(SchemaVersionError, match=r"run_id=future.*99"):
        discover(future_dir / "events.parquet", link=link_tool_calls)
    df = pa_.load(tmp_path)
    assert len(df) == 1, "the valid run is kept"
    assert "run_id=future" in _warned(caplog)


def test_paths_that_are_not_traces(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(NotATraceError, match="no such file"):
        pa_.load(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NotATraceError, match=r"notes\.txt"):
        pa_.load(tmp_path / "notes.txt")
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1]}), foreign)
    with pytest.raises(NotATraceError, match=r"foreign\.parquet.*not written by promcp"):
        pa_.load(foreign)
    with pytest.raises(NotATraceError, match="no promcp events"):
        pa_.load(tmp_path)
    assert "foreign.parquet" in _warned(caplog)


WRITER = textwrap.dedent("""
    import sys, time
    from promcp.events import Event, Stage
    from promcp.recorder import Recorder
    rec = Recorder(sys.argv[1], run_id="killed", fsync="always")
    i = 0
    while True:
        rec.emit(Event(stage=Stage.S3, task_id="t", footprint_tokens=i))
        print(i, flush=True)
        i += 1
        time.sleep(0.002)
""")


def test_sigkill_loses_at_most_the_event_in_flight(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    done = -1
    for line in proc.stdout:  # every printed number was emitted (journaled + fsync'd) before the print
        done = int(line)
        if done >= 200:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    contents = read_journal(tmp_path / JOURNAL_DIR / "killed.jsonl", warn=False)
    recovered = [e.footprint_tokens for e in contents.events]
    assert recovered[: done + 1] == list(range(done + 1))
    assert len(recovered) <= done + 2
    df = pa_.load(tmp_path)  # reads the journal of the dead writer in place
    assert len(df) == len(recovered)


CLI_WRITER = textwrap.dedent("""
    import sys, time, argparse
    from promcp.cli._common import run_command
    from promcp.events import Event, Stage
    from promcp.recorder import Recorder

    def work(args):
        with Recorder(args.out, run_id="sig") as rec:
            for i in range(10**9):
                rec.emit(Event(stage=Stage.S3, task_id="t", footprint_tokens=i))
                if i == 20:
                    print("ready", flush=True)
                time.sleep(0.001)
        return 0

    sys.exit(run_command(work, argparse.Namespace(out=sys.argv[1])))
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_a_finalized_dataset(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    files = list(tmp_path.rglob("events.parquet"))
    assert len(files) == 1
    assert not list((tmp_path / JOURNAL_DIR).glob("*.jsonl"))
    assert pq.read_table(files[0]).num_rows > 20


def test_journal_header_is_json_with_schema_version(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, run_id="hdr", meta={"benchmark_file": "b.yaml"})
    rec.close(finalize_run=False)
    header = json.loads((tmp_path / JOURNAL_DIR / "hdr.jsonl").read_text().splitlines()[0])
    assert header["schema_version"] == SCHEMA_VERSION and header["meta"] == {"benchmark_file": "b.yaml"}


def test_readers_never_finalize_a_run_still_recording(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Recorder(tmp_path, run_id="done") as rec:
        rec.emit(_s3(1))
    live = Recorder(tmp_path, run_id="live")
    live.emit(_s3(2))
    df = pa_.load(tmp_path)
    assert "live.jsonl: a process is still recording" in _warned(caplog)
    assert list(df["run_id"].astype(str)) == ["done"]
    assert live.journal_path.exists(), "the live journal is left alone"
    live.emit(_s3(3))  # and the live run goes on recording
    live.close()
    df = pa_.load(tmp_path)
    assert sorted(df["run_id"].astype(str)) == ["done", "live", "live"]


def test_a_journal_path_of_a_live_run_is_a_clear_error(tmp_path: Path) -> None:
    from promcp.errors import RunInProgressError

    with Recorder(tmp_path, run_id="busy") as rec:
        rec.emit(_s3(1))
        with pytest.raises(RunInProgressError, match=r"busy\.jsonl: a process is still recording"):
            pa_.load(rec.journal_path)


def test_emit_later_waits_for_quiet_but_flush_and_close_build_everything(tmp_path: Path) -> None:
    built: list[float] = []

    def build(i: int) -> Event:
        built.append(time.monotonic())
        return _s3(i)

    rec = Recorder(tmp_path, run_id="later")
    t0 = time.monotonic()
    for i in range(5):
        rec.emit_later(lambda i=i: build(i))
    rec.flush()  # flush builds at once, without waiting for quiet
    assert len(built) == 5 and built[0] - t0 < Recorder.LATER_IDLE_S * 10
    for i in range(5, 8):
        rec.emit_later(lambda i=i: build(i))
    time.sleep(Recorder.LATER_IDLE_S * 6)  # quiet: the worker catches up by itself
    assert len(built) == 8
    rec.emit_later(lambda: build(99))
    path = rec.close()
    assert path is not None and pq.read_table(path).num_rows == 9
    assert sorted(pq.read_table(path).column("seq").to_pylist()) == list(range(9))


def test_a_dataset_written_by_schema_v1_loads_with_the_new_columns_null(tmp_path: Path) -> None:
    """Schema v2 added the cache split and reasoning columns: a v1 file (as the previous promcp wrote it: no such
    columns, ``promcp.schema_version`` 1, cache counts in attrs) loads, reports, and the new columns are null."""
    from promcp.analysis import report

    with Recorder(tmp_path / "new", topology="c-cust", run_id="old1") as rec:
        rec.emit(Event(stage=Stage.S1, task_id="t", round=1, tokens_in=100, model="claude-sonnet-4-5"))
        rec.emit(Event(stage=Stage.S6, task_id="t", round=1, tokens_out=5, model="claude-sonnet-4-5"))
    new = next((tmp_path / "new").rglob("events.parquet"))
    table = pq.read_table(new)
    v2_only = ["cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens"]
    v2_only.append("reasoning_tokens")
    old = table.drop_columns(v2_only)
    meta = dict(old.schema.metadata)
    meta[b"promcp.schema_version"] = b"1"
    dest = tmp_path / "old" / new.relative_to(tmp_path / "new")
    dest.parent.mkdir(parents=True)
    pq.write_table(old.replace_schema_metadata(meta), dest)
    df = pa_.load(tmp_path / "old")
    assert len(df) == 2 and all(df[c].isna().all() for c in v2_only)
    assert str(df["cache_read_tokens"].dtype) == "Int64"
    rep = report(tmp_path / "old", sections=["phases"])
    assert rep.tasks == 1


def _run_with(out: Path, run_id: str, tasks: list[str], *, finalize_run: bool) -> Path | None:
    rec = Recorder(out, run_id=run_id, topology="c-cust", source="otlp:spans")
    rec.emit_many([Event(stage=Stage.S1, task_id=t, t_start_ns=i) for i, t in enumerate(tasks)])
    return rec.close(finalize_run=finalize_run)


def test_finalize_merges_a_journal_whose_run_file_holds_other_events(tmp_path: Path) -> None:
    """A killed process's journal, and a Parquet file a later process wrote for the same run id: ``promcp
    finalize`` merges the two (it used to delete the journal as "already finalized")."""
    from promcp.store.finalization import finalize_pending

    _run_with(tmp_path, "r", ["killed-1", "killed-2"], finalize_run=False)  # left by the killed process
    elsewhere = tmp_path / "later"
    written = _run_with(elsewhere, "r", ["later-1"], finalize_run=True)
    assert written is not None
    dest = tmp_path / written.relative_to(elsewhere)
    dest.parent.mkdir(parents=True)
    written.rename(dest)  # the later process's run file, same run id
    finalize_pending(tmp_path, link=link_tool_calls)
    df = pa_.load(tmp_path)
    assert sorted(df["task_id"]) == ["killed-1", "killed-2", "later-1"]
    assert not list((tmp_path / JOURNAL_DIR).rglob("*.jsonl"))
    finalize_pending(tmp_path, link=link_tool_calls)  # idempotent
    assert len(pa_.load(tmp_path)) == 3


def test_finalize_still_removes_a_journal_already_in_its_run_file(tmp_path: Path) -> None:
    from promcp.store.finalization import finalize_pending

    rec = Recorder(tmp_path, run_id="r", topology="c-cust", source="x")
    rec.emit(Event(stage=Stage.S1, task_id="t"))
    rec.close(finalize_run=False)
    copy = rec.journal_path.read_bytes()
    from promcp.store.finalization import finalize

    finalize(rec.journal_path, link=link_tool_calls)
    rec.journal_path.write_bytes(copy)  # a finalize that died after writing the run file
    finalize_pending(tmp_path, link=link_tool_calls)
    assert len(pa_.load(tmp_path)) == 1 and not rec.journal_path.exists()


def test_a_run_written_in_parts_creates_owner_only_folders(tmp_path: Path) -> None:
    """What the proxies and `promcp record` write (journal parts) gets 0700 folders and 0600 files, like every
    other source, whatever the umask."""
    old = os.umask(0o022)
    try:
        rec = Recorder(tmp_path / "ds", run_id="r", topology="c-ots", source="proxy:llm", part="llm")
        rec.emit(Event(stage=Stage.S1, task_id="t"))
        rec.close()
    finally:
        os.umask(old)
    for path in (tmp_path / "ds").rglob("*"):
        expected = 0o700 if path.is_dir() else 0o600
        assert path.stat().st_mode & 0o777 == expected, path
    assert (tmp_path / "ds").stat().st_mode & 0o777 == 0o700


def test_record_removes_the_temp_folder_a_killed_record_left(tmp_path: Path) -> None:
    import tempfile

    from promcp.proxy.record import TEMP_PREFIX, _sweep_temp

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    left = Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}{dead.stdout.strip()}-abc"
    left.mkdir()
    (left / "mcp-config.json").write_text('{"mcpServers": {"x": {"env": {"TOKEN": "secret"}}}}')
    mine = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
    try:
        _sweep_temp()
        assert not left.exists() and mine.exists()  # a live record's folder stays
    finally:
        mine.rmdir()


def test_content_none_stores_no_text_not_even_previews(tmp_path: Path) -> None:
    aws = "aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY and password hunter2"
    rec = Recorder(tmp_path, run_id="r", content="none")
    rec.emit(Event(stage=Stage.S4, task_id="t", req_preview=aws, resp_preview=aws))
    rec.put_text("result", aws)
    rec.close()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"wJalrXUtnFEMI" not in data and b"hunter2" not in data, path
    df = pa_.load(tmp_path)
    assert df["req_preview"].isna().all() and df["resp_preview"].isna().all()
