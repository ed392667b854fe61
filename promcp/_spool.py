"""``promcp collect``'s spool: every OTLP batch is on disk before it is answered 200, until it is recorded.

The receiver answers an exporter as soon as a batch is decoded; recording it (mapping, journaling) happens later on
the recording worker, and Claude Code's log records are even held in memory until their prompt finishes. So the
accept path first appends the batch, as received, to a spool file under ``DIR/_spool/`` (0700 folder, 0600 files)
with one ``write`` — in the OS's page cache, which a SIGKILL of the collector does not lose (``fsync="always"``
also survives a power loss, at a cost measured in docs/collect.md) — and only then queues it and answers 200.

A spool file is removed as soon as every batch in it is recorded *and* no open prompt still holds records from it
(the worker reports both: :meth:`Spool.recorded`), so the spool holds what is in memory and not journaled yet,
never a copy of the dataset. A spool file another process left (a collector killed with SIGKILL) is replayed by
the next ``promcp collect`` on the same folder, or by ``promcp finalize``: each of its batches goes through the
accept path again (spooled anew, then recorded; what was already journaled is skipped as a duplicate by the
runs' keys) and the old file is removed once all of its batches are in the new spool. A spool file being written
is locked (``flock``), so a live collector's spool is never taken.

Record format: a header line ``<kind> <media type> <encoding or -> <bytes>\\n`` then the body; the file starts with
one JSON line of the writer's settings (its content mode), used by ``promcp finalize``. A last record cut short (the
process killed inside ``write``, before it could answer) is ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

__all__ = ["SPOOL_DIR", "Spool", "SpooledBatch", "leftovers", "read_spool", "settings"]

SPOOL_DIR: Final = "_spool"
SUFFIX: Final = ".spool"
#: a spool file is continued until it holds this many bytes, then a new one is started (old ones are removed as
#: soon as what they hold is recorded)
SEGMENT_BYTES: Final = 64 * 1024 * 1024
_MAGIC: Final = "promcp-spool"

FsyncPolicy = Literal["never", "always"]


@dataclass(frozen=True)
class SpooledBatch:
    kind: str  # logs / traces / metrics
    media: str  # application/x-protobuf or application/json
    encoding: str  # the body's content-encoding ("" for none)
    body: bytes


@dataclass
class _Segment:
    path: Path
    fd: int
    size: int
    last: int = -1  # the last batch number written to it


class Spool:
    """The spool of one collector process: :meth:`write` (handler threads), :meth:`recorded` (the worker)."""

    def __init__(
        self,
        out: str | Path,
        *,
        meta: dict[str, Any] | None = None,
        fsync: FsyncPolicy = "never",
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        self.dir = Path(out) / SPOOL_DIR
        self.meta = meta or {}
        self.fsync, self.segment_bytes = fsync, segment_bytes
        self._lock = threading.Lock()
        self._segments: list[_Segment] = []  # oldest first; the last one is written to
        self._next = 0  # the next batch number
        self._made = 0  # spool files this process started
        self._unrecorded: set[int] = set()  # batches written and not recorded yet
        self._held: dict[Any, int] = {}  # an open prompt → the first batch whose records it holds
        self.closed = False

    # -- the accept path --------------------------------------------------------------------------------------------

    def write(self, batch: SpooledBatch) -> int:
        """Append ``batch`` (one ``write`` of header and body) and return its number; OSError when it cannot be
        written (the caller answers 503: nothing is acknowledged that is not on disk)."""
        head = f"{batch.kind} {batch.media} {batch.encoding or '-'} {len(batch.body)}\n".encode()
        with self._lock:
            segment = self._segments[-1] if self._segments else None
            if segment is None or segment.size >= self.segment_bytes:
                segment = self._start()
            _write_all(segment.fd, head + batch.body)
            if self.fsync == "always":
                os.fsync(segment.fd)
            segment.size += len(head) + len(batch.body)
            number = self._next
            self._next += 1
            segment.last = number
            self._unrecorded.add(number)
            return number

    def _start(self) -> _Segment:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._made += 1
        path = self.dir / f"{os.getpid()}-{self._made}{SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # live: no other process replays it
            first = json.dumps({_MAGIC: 1, **self.meta}).encode() + b"\n"
            _write_all(fd, first)
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        segment = _Segment(path, fd, len(first))
        self._segments.append(segment)
        return segment

    # -- the recording side -----------------------------------------------------------------------------------------

    def forget(self, number: int) -> None:
        """Batch ``number`` will not be recorded by this process (it was answered 503, not queued)."""
        self.recorded(number, None)

    def recorded(self, number: int | None, held: Iterable[Any] | None) -> None:
        """Batch ``number`` (None: none) is recorded; ``held``: the open prompts now holding records in memory (None:
        unchanged). Removes every spool file all of whose batches are recorded and held by no open prompt."""
        with self._lock:
            if number is not None:
                self._unrecorded.discard(number)
            if held is not None:
                now = set(held)
                for key in [k for k in self._held if k not in now]:
                    del self._held[key]
                stamp = number if number is not None else self._next - 1
                for key in now:
                    self._held.setdefault(key, stamp)
            low = min(min(self._unrecorded, default=self._next), min(self._held.values(), default=self._next))
            while self._segments and self._segments[0].last < low:
                self._drop(self._segments.pop(0))

    def _drop(self, segment: _Segment) -> None:
        segment.path.unlink(missing_ok=True)
        os.close(segment.fd)

    def close(self) -> None:
        """At a clean exit, after everything was recorded and flushed: remove this process's spool files."""
        with self._lock:
            self._unrecorded.clear()
            self._held.clear()
            while self._segments:
                self._drop(self._segments.pop(0))
            self.closed = True
            with contextlib.suppress(OSError):
                self.dir.rmdir()  # only when empty

    def release(self) -> None:
        """Stop writing and unlock the files, leaving them for the next process (what they hold is not recorded: the
        recording worker stopped)."""
        with self._lock:
            for segment in self._segments:
                os.close(segment.fd)
            self._segments.clear()
            self.closed = True

    @property
    def files(self) -> int:
        with self._lock:
            return len(self._segments)


def leftovers(out: str | Path) -> list[Path]:
    """Spool files an earlier process left in ``out`` (none of them locked by a live writer), oldest first."""
    folder = Path(out) / SPOOL_DIR
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        if path.suffix != SUFFIX or not path.is_file():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a live collector's
        finally:
            os.close(fd)
        found.append(path)
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))


def settings(path: Path) -> dict[str, Any]:
    """The writer's settings a spool file starts with ({} when unreadable)."""
    try:
        with path.open("rb") as fh:
            first = json.loads(fh.readline(65536) or b"{}")
    except (OSError, ValueError):
        return {}
    return first if isinstance(first, dict) and first.pop(_MAGIC, None) == 1 else {}


def read_spool(path: Path) -> Iterator[SpooledBatch]:
    """The batches of a spool file, one at a time (memory: one body); a record cut short at the end is skipped."""
    with path.open("rb") as fh:
        fh.readline(65536)  # the settings line
        while head := fh.readline(1024):
            try:
                kind, media, encoding, size = head.decode().split()
                length = int(size)
            except ValueError:
                return  # a header cut short or damaged: nothing after it can be framed
            body = fh.read(length)
            if len(body) < length:
                return
            yield SpooledBatch(kind, media, "" if encoding == "-" else encoding, body)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
