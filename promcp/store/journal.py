"""The run journal: an append-only JSON Lines file written as events finish.

Layout of one journal (``<dataset>/_journal/<run_id>.jsonl``)::

    {"promcp_journal": 1, "schema_version": 1, "run_id": ..., "topology": ..., "source": ..., ...}   header
    {"stage": "INIT", "phase": "spawn", ...}                                                           an event
    {"blob": "<hash>", "kind": "schema", "text": "..."}                                                 captured content
    {"settled": [12]}                                    the events of these seqs were superseded: readers drop them
    ...

A source writes a call's request event when the request is forwarded (``attrs.in_flight``) and, once the call ended,
its final events and then a ``settled`` line naming the in-flight row: a process killed mid-call leaves the call in
flight, one that finishes leaves exactly the events it would have written at the end.

Every line is written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a line that was written is in the
kernel before the next event starts: a SIGKILL loses at most the line in flight, which a reader recognises as a
partial last line and drops with a warning. ``fsync`` policy (what survives a power loss or kernel crash, not just a
killed process):

* ``group`` (default) — a syncer thread fsyncs right after each write, covering every line written meanwhile
  (group commit): the recording thread never waits for the disk, and a line reaches it a fraction of a millisecond
  later (``fsync`` takes ~0.25 ms here, 4 per tool round: that was most of the host's own overhead);
* ``always`` — every line is on disk before ``append`` returns;
* ``interval`` — at most every ``fsync_interval_s`` (bulk imports, benchmarks); ``never`` — left to the OS.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from promcp.errors import JournalError, SchemaVersionError, StorageError
from promcp.events import SCHEMA_VERSION, Event, decode_event, encode_event
from promcp.store.files import make_dirs, open_private, storage_error

log = logging.getLogger(__name__)

FsyncPolicy = Literal["group", "always", "interval", "never"]

JOURNAL_DIR = "_journal"
JOURNAL_SUFFIX = ".jsonl"
_BLOB_PREFIX = b'{"blob":'
_SETTLED_PREFIX = b'{"settled":'
_HEADER_KEY = "promcp_journal"


class Blob(msgspec.Struct, frozen=True, omit_defaults=True):
    """Captured content (a tool schema, a result, a prompt), stored once per run under its hash.

    ``blob`` is the hash of the original text; ``text`` is what was stored (``mode`` ``full`` or ``redacted``,
    cut to a prefix when ``truncated``); ``original_bytes`` is the original's UTF-8 size.
    """

    blob: str
    kind: str
    text: str
    mode: str = "full"
    original_bytes: int | None = None
    truncated: bool = False


class JournalHeader(msgspec.Struct, kw_only=True):
    promcp_journal: int = 1
    schema_version: int = SCHEMA_VERSION
    run_id: str
    topology: str
    source: str
    benchmark: str | None = None
    created_ns: int
    promcp_version: str = ""
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    #: how content was captured (``full``, ``redacted``, ``none``) and the per-text cap; None in older journals
    content: str | None = None
    max_content_bytes: int | None = None


class Settled(msgspec.Struct, frozen=True):
    """The ``seq`` of events written earlier in the same journal that later events superseded (dropped on read)."""

    settled: list[int]


_blob_encoder = msgspec.json.Encoder()
_settled_decoder = msgspec.json.Decoder(Settled)
_header_decoder = msgspec.json.Decoder(JournalHeader)
_blob_decoder = msgspec.json.Decoder(Blob)


class JournalWriter:
    """Appends lines to one run's journal. Thread-safe."""

    def __init__(
        self,
        path: Path,
        header: JournalHeader,
        *,
        fsync: FsyncPolicy = "group",
        fsync_interval_s: float = 0.2,
    ) -> None:
        if fsync not in ("group", "always", "interval", "never"):
            raise ValueError(f"fsync policy must be group, always, interval or never, not {fsync!r}")
        self.path = path
        self.header = header
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        try:
            make_dirs(path.parent)
            self._fd: int | None = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        except OSError as exc:
            raise storage_error(
                exc, path, "cannot create the run's journal: {reason}; nothing was recorded"
            ) from None
        # The writer holds an exclusive lock for as long as it records: readers (report, load) must not finalize
        # a live run's journal. The kernel drops the lock when the process dies, so a killed run is recoverable.
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock = threading.Lock()
        self._last_sync = time.monotonic()
        self.lines = 0
        #: the error that stopped this journal (a full or read-only disk), once one happened
        self.error: StorageError | None = None
        self._dirty = threading.Condition()
        self._pending = False
        self._stopping = False
        self._syncer: threading.Thread | None = None
        if fsync == "group":
            self._syncer = threading.Thread(
                target=self._sync_loop, name=f"promcp-fsync-{path.stem}", daemon=True
            )
            self._syncer.start()
        self._write(msgspec.json.encode(header))
        _fsync_dir(path.parent)

    def _sync_loop(self) -> None:
        while True:
            with self._dirty:
                while not self._pending and not self._stopping:
                    self._dirty.wait()
                if not self._pending and self._stopping:
                    return
                self._pending = False
            fd = self._fd
            if fd is not None:
                with contextlib.suppress(OSError):  # closed meanwhile: close() syncs itself
                    os.fsync(fd)

    def append(self, event: Event) -> None:
        self._write(encode_event(event))

    def append_many(self, events: Sequence[Event]) -> None:
        """Append several events with one write (a batch from a receiver): each is still one whole line."""
        if events:
            self._write(b"\n".join(encode_event(e) for e in events), lines=len(events))

    def append_blob(self, blob: Blob) -> None:
        self._write(_blob_encoder.encode(blob))

    def append_settled(self, seqs: Sequence[int]) -> None:
        """Mark the events of ``seqs`` (written before in this journal) superseded: readers drop them."""
        if seqs:
            self._write(_blob_encoder.encode(Settled(list(seqs))))

    def _write(self, payload: bytes, *, lines: int = 1) -> None:
        with self._lock:
            if self._fd is None:
                raise JournalError("journal is closed", path=self.path)
            try:
                # one writev: the line and its newline go to the kernel together, without copying a big payload
                written = os.writev(self._fd, [payload, b"\n"])
                rest = memoryview(payload + b"\n")[written:] if written < len(payload) + 1 else None
                while (
                    rest
                ):  # os.writev may write fewer bytes than asked (signals, full disk): finish the line
                    rest = rest[os.write(self._fd, rest) :]
                if self.fsync == "always":
                    os.fsync(self._fd)
                elif self.fsync == "interval" and time.monotonic() - self._last_sync >= self.fsync_interval_s:
                    os.fsync(self._fd)
                    self._last_sync = time.monotonic()
            except OSError as exc:
                self.error = storage_error(
                    exc,
                    self.path,
                    f"cannot append to the journal: {{reason}}; the {self.lines} line(s) written before "
                    f"are kept in it; make room, then run `promcp finalize {self.path.parent.parent}`",
                )
                raise self.error from None
            self.lines += lines
            if self._syncer is not None:
                with self._dirty:
                    self._pending = True
                    self._dirty.notify()

    def sync(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        if self._syncer is not None:
            with self._dirty:
                self._stopping = True
                self._dirty.notify()
            self._syncer.join()
            self._syncer = None
        with self._lock:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                try:
                    os.fsync(fd)
                except OSError as exc:
                    raise storage_error(
                        exc,
                        self.path,
                        "cannot sync the journal to disk: {reason}; the lines the disk accepted are "
                        f"kept; run `promcp finalize {self.path.parent.parent}` once the disk is healthy",
                    ) from None
                finally:
                    os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd is None


@dataclass
class JournalContents:
    """What :func:`read_journal` recovered from one journal."""

    path: Path
    header: JournalHeader
    events: list[Event] = field(default_factory=list)
    blobs: dict[str, Blob] = field(default_factory=dict)
    #: problems found, each naming the line: corrupt lines, a partial last line
    problems: list[str] = field(default_factory=list)
    lines: int = 0


def read_journal(path: Path, *, warn: bool = True) -> JournalContents:
    """Read a journal, keeping every valid line.

    A corrupt line is skipped and reported with its line number; a partial last line (a writer killed mid-write)
    is dropped and reported. A header from a newer schema raises :class:`SchemaVersionError`; a file without a
    promcp header raises :class:`JournalError`.
    """
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise JournalError(f"cannot read journal: {exc.strerror or exc}", path=path) from exc
    with fh:
        # line by line: the file is never held whole next to its decoded events (a 50 MB result is one line)
        first = fh.readline()
        if not first.strip():
            raise JournalError("empty file: no promcp journal header", path=path, line=1)
        try:
            header = _header_decoder.decode(first)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise JournalError(f"not a promcp journal header ({exc})", path=path, line=1) from exc
        if header.schema_version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"journal written with event schema v{header.schema_version}; this promcp reads up to "
                f"v{SCHEMA_VERSION} (upgrade promcp)",
                path=path,
            )
        out = JournalContents(path=path, header=header, lines=1)
        number = 1
        settled: set[int] = set()
        for number, line in enumerate(fh, start=2):
            if not line.strip():
                continue
            try:
                if line.startswith(_BLOB_PREFIX):
                    blob = _blob_decoder.decode(line)
                    out.blobs[blob.blob] = blob
                elif line.startswith(_SETTLED_PREFIX):
                    settled.update(_settled_decoder.decode(line).settled)
                else:
                    out.events.append(decode_event(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if not line.endswith(b"\n"):
                    out.problems.append(
                        f"line {number}: partial last line dropped (the writer stopped mid-line)"
                    )
                else:
                    out.problems.append(f"line {number}: corrupt line skipped ({exc})")
        out.lines = number
        if settled:
            out.events = [e for e in out.events if e.seq not in settled]
    if warn:
        for problem in out.problems:
            log.warning("%s: %s", path, problem)
    return out


@contextlib.contextmanager
def claim(path: Path) -> Iterator[bool]:
    """Try to take a journal's lock (no waiting): yields True when no live writer holds it, False otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def is_live(path: Path) -> bool:
    """Whether a process is still recording into this journal."""
    with claim(path) as free:
        return not free and path.exists()


def iter_journals(root: Path) -> Iterator[Path]:
    """Journals waiting to be finalized under a dataset directory."""
    jdir = root / JOURNAL_DIR
    if jdir.is_dir():
        yield from sorted(p for p in jdir.iterdir() if p.suffix == JOURNAL_SUFFIX and p.is_file())


def is_journal(path: Path) -> bool:
    if not path.is_file() or path.suffix != JOURNAL_SUFFIX:
        return False
    with path.open("rb") as fh:
        return fh.read(32).lstrip().startswith(b'{"' + _HEADER_KEY.encode())


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
