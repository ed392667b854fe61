"""Where a :class:`~promcp.recorder.Recorder`'s rows go: the :class:`Sink` protocol and its two implementations.

The recorder decides what a row holds (identity, scope, ``seq``, redaction, content capture once per hash); a sink
only keeps what it is given, in order:

* :class:`JournalSink` — the run's journal (``DATASET/_journal/<run_id>.jsonl``, or one part of a run several
  processes record), finalized into the run's Parquet file on :meth:`JournalSink.finalize` (docs/architecture.md
  "Durability"). What every command uses.
* :class:`MemorySink` — a list in memory, for tests of a source: the rows the recorder would have journaled, without
  a dataset folder, a lock or Parquet.

Nothing here imports pyarrow: the journal is JSON lines (msgspec); Parquet is loaded by ``finalize`` only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from promcp.errors import StorageError
from promcp.events import Event
from promcp.store.journal import JOURNAL_DIR, JOURNAL_SUFFIX, Blob, FsyncPolicy, JournalHeader, JournalWriter
from promcp.store.parts import finalize_group, group_lock, new_part_path

__all__ = ["JournalSink", "MemorySink", "Sink"]


class Sink(Protocol):
    """What a recorder writes to. ``open`` comes first (with the run's header), ``close`` last; ``error`` is the
    storage error that stopped the sink, if one did (the recorder says it at close)."""

    path: Path
    error: StorageError | None

    def open(self, header: JournalHeader) -> None: ...

    def append(self, rows: Sequence[Event]) -> None: ...

    def append_blob(self, blob: Blob) -> None: ...

    def settle(self, seqs: Sequence[int]) -> None:
        """The rows of ``seqs`` appended before were superseded by later ones (a call's in-flight request row)."""
        ...

    def close(self) -> None: ...

    def finalize(self) -> Path | None:
        """After :meth:`close`: make the rows durable in their final form; the run's file (None: not yet, or none)."""
        ...

    def discard(self) -> None:
        """After :meth:`close`: remove what was written (a run that recorded no event)."""
        ...


class JournalSink:
    """The run's journal in the dataset folder ``out`` (``part``: one part of a run that several processes record,
    merged by the last one to finish: promcp/store/parts.py)."""

    def __init__(self, out: Path, *, fsync: FsyncPolicy = "group", part: str | None = None) -> None:
        self.out, self.fsync, self.part = out, fsync, part
        self.path = out
        self.error: StorageError | None = None
        self._writer: JournalWriter | None = None
        self._run_id = ""

    def open(self, header: JournalHeader) -> None:
        self._run_id = header.run_id
        if self.part is None:
            self.path = self.out / JOURNAL_DIR / f"{header.run_id}{JOURNAL_SUFFIX}"
            self._writer = JournalWriter(self.path, header, fsync=self.fsync)
        else:
            with group_lock(self.out):  # a merge must not see the part before its writer holds the lock
                self.path = new_part_path(self.out, header.run_id, self.part)
                self._writer = JournalWriter(self.path, header, fsync=self.fsync)

    def _open_writer(self) -> JournalWriter:
        if self._writer is None:
            raise StorageError("the journal sink was not opened", path=self.path)
        return self._writer

    def append(self, rows: Sequence[Event]) -> None:
        writer = self._open_writer()
        try:
            if len(rows) == 1:
                writer.append(rows[0])
            else:
                writer.append_many(rows)
        finally:
            self.error = writer.error

    def append_blob(self, blob: Blob) -> None:
        writer = self._open_writer()
        try:
            writer.append_blob(blob)
        finally:
            self.error = writer.error

    def settle(self, seqs: Sequence[int]) -> None:
        writer = self._open_writer()
        try:
            writer.append_settled(seqs)
        finally:
            self.error = writer.error

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self.error = self._writer.error

    def finalize(self) -> Path | None:
        from promcp.stages.link import link_tool_calls  # the caller's join: the store applies no stage rule

        if self.part is not None:  # merged by the last part to end (None until then)
            return finalize_group(self.out, self._run_id, link=link_tool_calls)
        from promcp.store.finalization import finalize  # pyarrow: only when the run is written

        return finalize(self.path, link=link_tool_calls)

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


class MemorySink:
    """Rows and content blobs kept in memory, in the order they came (for tests: nothing touches the disk)."""

    def __init__(self) -> None:
        self.path = Path("memory")
        self.error: StorageError | None = None
        self.header: JournalHeader | None = None
        self.rows: list[Event] = []
        self.blobs: dict[str, Blob] = {}
        self.closed = False
        self._lock = threading.Lock()

    def open(self, header: JournalHeader) -> None:
        self.header = header
        self.path = Path("memory") / f"{header.run_id}{JOURNAL_SUFFIX}"

    def append(self, rows: Sequence[Event]) -> None:
        if self.closed:
            raise StorageError("the memory sink is closed", path=self.path)
        with self._lock:
            self.rows.extend(rows)

    def append_blob(self, blob: Blob) -> None:
        with self._lock:
            self.blobs[blob.blob] = blob

    def settle(self, seqs: Sequence[int]) -> None:
        gone = set(seqs)
        with self._lock:
            self.rows = [row for row in self.rows if row.seq not in gone]

    def close(self) -> None:
        self.closed = True

    def finalize(self) -> Path | None:
        return None

    def discard(self) -> None:
        with self._lock:
            self.rows.clear()
            self.blobs.clear()
