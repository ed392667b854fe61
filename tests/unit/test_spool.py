"""promcp/_spool.py: a batch is on disk once written; a spool file goes as soon as all it holds is recorded and no
open prompt holds records from it; another process's live spool is never taken; a cut-short last record is
skipped."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from promcp._spool import SPOOL_DIR, Spool, SpooledBatch, leftovers, read_spool, settings


def _batch(n: int) -> SpooledBatch:
    return SpooledBatch("logs", "application/x-protobuf", "gzip" if n % 2 else "", b"body-%d\n\x00" % n * 50)


def test_written_batches_read_back_and_files_are_private(tmp_path: Path) -> None:
    spool = Spool(tmp_path, meta={"content": "none"})
    numbers = [spool.write(_batch(n)) for n in range(3)]
    assert numbers == [0, 1, 2]
    (path,) = (tmp_path / SPOOL_DIR).iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert list(read_spool(path)) == [_batch(n) for n in range(3)]
    assert settings(path) == {"content": "none"}
    assert leftovers(tmp_path) == []  # locked: this process is writing it
    spool.close()
    assert not (tmp_path / SPOOL_DIR).exists()


def test_a_file_goes_once_recorded_and_no_open_prompt_holds_it(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=1)  # one batch per file
    for n in range(4):
        spool.write(_batch(n))
    assert spool.files == 4
    spool.recorded(1, [("s", "p1")])  # batch 1 opened a prompt that is still held in memory
    assert spool.files == 4  # batch 0 is not recorded yet
    spool.recorded(0, [("s", "p1")])
    assert spool.files == 3  # file 0 went; file 1 stays for the held prompt
    spool.recorded(2, [("s", "p1")])
    spool.recorded(3, [("s", "p1")])
    assert spool.files == 3  # recorded, but after file 1: a replay starts there
    spool.recorded(None, [])  # the prompt finished (journaled)
    assert spool.files == 0
    spool.write(_batch(4))
    assert spool.files == 1  # a new file for what comes next
    spool.forget(4)  # answered 503 after all: nothing to keep
    assert spool.files == 0


def test_a_killed_writers_spool_is_left_over_and_its_cut_record_skipped(tmp_path: Path) -> None:
    code = (
        "import os, sys; from promcp._spool import Spool, SpooledBatch\n"
        "s = Spool(sys.argv[1])\n"
        "for n in range(3): s.write(SpooledBatch('traces', 'application/json', '', b'{}' * (n + 1)))\n"
        "os.kill(os.getpid(), 9)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, check=False)
    (path,) = leftovers(tmp_path)  # no live writer holds it any more
    with path.open("ab") as fh:
        fh.write(b"traces application/json - 100\n{")  # a write cut short by the kill
    assert [b.body for b in read_spool(path)] == [b"{}", b"{}{}", b"{}{}{}"]
