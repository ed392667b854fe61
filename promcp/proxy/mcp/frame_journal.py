"""The stdio proxy's frame journal: every byte the relay passed on, as it passed, for its recorder to read.

The relay (:mod:`.stdio`) appends, for every chunk it reads from either side, a record of the chunk — direction,
the monotonic instant it arrived, the wall clock then, its bytes — *before* it forwards the chunk, and a second small
record with the instant the forward ended, after. Each record is one ``os.writev`` to a file opened ``O_APPEND``. A
few records say what else happened (the server spawned, failed to start, exited; a direction reached EOF). The
recorder process (:mod:`.stdio_recorder`) reads the file as it grows, cuts the chunks into frames with the same
:class:`~.frames.LineFrames` and the same instants the relay's own framing had, and builds the events. A SIGKILL of
the relay loses nothing it relayed: a chunk is in the file (the kernel's page cache) before it is forwarded; a
chunk whose forward record is missing is recorded as not known to have been forwarded.

Bounds: the relay holds one chunk (64 KiB) per direction, never a frame. Bytes in the middle of a frame already
longer than ``--max-frame`` are not written, only their count and last bytes (:data:`SKIPPED`): the frame is then
recorded as oversize, as before, and the file grows with the traffic, not with a runaway line.

Where and how::

    DIR/_journal/<run_id>.parts/.frames-<name>-<pid>-<random>.fj     owner-only (0600), in a 0700 folder

It holds the server's traffic verbatim whatever ``--content`` says (the recorder applies the content policy to what
it stores) and exists only while its session is recorded: the recorder removes it once its events are journaled.

Who is on it: the relay holds a shared ``flock`` from creation (the file is created under another name and renamed
once locked) until it exits, and so does its recorder from its start until it has removed the file. A journal whose
lock can be taken exclusively was left by a relay killed before its recorder took it (or by a recorder that died):
``promcp finalize``, ``promcp record`` and every run merge record it then (:func:`.stdio_recorder.record_orphans`).

Standard library only: the relay imports this before the server has answered anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "HEADER",
    "JournalWriter",
    "Record",
    "claim",
    "journals",
    "read_records",
]

MAGIC = b"promcp-frames 1\n"
PREFIX = ".frames-"
SUFFIX = ".fj"
#: kind, origin, flags, payload length, six numbers
_HEAD = struct.Struct("<cBHI6q")
HEADER = b"H"  # payload: the session's options (JSON)
CHUNK = (
    b"C"  # origin; numbers: read (monotonic ns), wall ns then; payload: the bytes, written before the forward
)
SKIPPED = b"K"  # origin; numbers: read, wall, bytes skipped; payload: their last EDGE bytes (an oversize frame's middle)
FORWARDED = (
    b"F"  # origin; numbers: the forward's end (monotonic ns), wall ns then (for the origin's last chunk)
)
EOF = b"Z"  # origin; numbers: when its stream ended, wall ns then
SPAWNED = b"S"  # numbers: spawn start, spawn end, pid, wall ns at spawn end
SPAWN_FAILED = b"X"  # numbers: start, end, errno, wall; payload: the OS's message
EXITED = b"E"  # numbers: return code, exit ns, first output ns (-1: none), dropped chunks, wall; flags below
ORIGINS = ("client", "server")
CLIENT_CLOSED, SIGNALLED = 1, 2  # EXITED


class Record:
    """One record read back."""

    __slots__ = ("flags", "kind", "numbers", "origin", "payload")

    def __init__(
        self, kind: bytes, origin: int, flags: int, numbers: tuple[int, ...], payload: bytes
    ) -> None:
        self.kind, self.origin, self.flags, self.numbers, self.payload = kind, origin, flags, numbers, payload


def _mkdirs(folder: str) -> None:
    """``mkdir -p`` with 0700 for every folder it creates (as promcp's store does)."""
    missing = []
    probe = folder
    while probe and not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)


class JournalWriter:
    """The relay's side: create the journal locked, append records, never raise into the relay."""

    def __init__(self, folder: str, name: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or "server"
        base = f"{PREFIX}{safe}-{os.getpid()}-{os.urandom(3).hex()}"
        for _attempt in range(5):  # a merge may remove an empty parts folder between mkdir and open
            _mkdirs(folder)
            tmp = os.path.join(folder, base + ".new")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                continue
            break
        else:
            raise FileNotFoundError(f"{folder}: removed while the proxy created its frame journal")
        fcntl.flock(fd, fcntl.LOCK_SH)
        self.path = os.path.join(folder, base + SUFFIX)
        os.rename(tmp, self.path)  # under its final name only once locked: nobody takes it for an orphan
        self.fd = fd
        self._lock = threading.Lock()
        self.error: OSError | None = None
        self.dropped = 0
        self._write([MAGIC])

    def _write(self, parts: list[bytes]) -> bool:
        with self._lock:
            if self.error is not None:
                return False
            try:
                total = sum(len(p) for p in parts)
                done = os.writev(self.fd, parts)
                if done < total:  # a short write (disk full, a signal): finish it, in order
                    rest = b"".join(parts)[done:]
                    while rest:
                        rest = rest[os.write(self.fd, rest) :]
            except OSError as exc:
                self.error = exc
                return False
            return True

    def record(
        self,
        kind: bytes,
        numbers: tuple[int, ...] = (),
        payload: bytes = b"",
        origin: int = 0,
        flags: int = 0,
    ) -> bool:
        nums = (*numbers, 0, 0, 0, 0, 0, 0)[:6]
        return self._write([_HEAD.pack(kind, origin, flags, len(payload), *nums), payload])

    def chunk(self, origin: int, read_ns: int, data: bytes) -> None:
        if not self.record(CHUNK, (read_ns, time.time_ns()), data, origin):
            self.dropped += 1

    def skipped(self, origin: int, read_ns: int, n: int, tail: bytes) -> None:
        if not self.record(SKIPPED, (read_ns, time.time_ns(), n), tail, origin):
            self.dropped += 1

    def forwarded(self, origin: int, forwarded_ns: int) -> None:
        self.record(FORWARDED, (forwarded_ns, time.time_ns()), origin=origin)

    def eof(self, origin: int, at_ns: int) -> None:
        self.record(EOF, (at_ns, time.time_ns()), origin=origin)

    def close(self) -> None:
        """Close the file (the relay's lock goes with it); the recorder removes it."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def read_records(fd: int, offset: int, max_payload: int) -> Iterator[tuple[Record, int]]:
    """The complete records from ``offset`` on, each with the offset after it; stops at a record still being
    written (or cut by a kill). A payload longer than ``max_payload`` means a damaged file: ValueError."""
    head_size = _HEAD.size
    while True:
        head = os.pread(fd, head_size, offset)
        if len(head) < head_size:
            return
        kind, origin, flags, length, *numbers = _HEAD.unpack(head)
        if length > max_payload:
            raise ValueError(f"a record of {length} bytes at offset {offset} (damaged frame journal)")
        payload = b""
        if length:
            chunks = []
            got = 0
            while got < length:
                chunk = os.pread(fd, length - got, offset + head_size + got)
                if not chunk:
                    return
                chunks.append(chunk)
                got += len(chunk)
            payload = b"".join(chunks)
        offset += head_size + length
        yield Record(kind, origin, flags, tuple(numbers), payload), offset


def journal_id(path: str) -> str:
    """The ``<pid>-<random>`` that names one relay's journal (its recorder's journal part carries it too)."""
    base = os.path.basename(path)[len(PREFIX) : -len(SUFFIX)]
    return "-".join(base.rsplit("-", 2)[-2:])


def check_magic(fd: int) -> bool:
    return os.pread(fd, len(MAGIC), 0) == MAGIC


def journals(folder: str) -> list[str]:
    """The frame journals in a run's parts folder."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX))


def claim(path: str, *, exclusive: bool) -> int | None:
    """Open ``path`` and take its lock without waiting (shared: the relay's recorder; exclusive: whoever records a
    journal nobody is on); the fd, or None when someone else has it or it was removed meanwhile."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink == 0:  # recorded and removed by whoever had it before us
            raise BlockingIOError
    except OSError:
        os.close(fd)
        return None
    return fd


def is_live(path: str) -> bool:
    """Whether a relay or its recorder is still on this journal (an orphan is not)."""
    fd = claim(path, exclusive=True)
    if fd is None:
        return os.path.exists(path)
    os.close(fd)
    return False
