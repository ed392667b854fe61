"""The stdio proxy's recorder process: reads the frame journal the relay writes (:mod:`.frame_journal`) and records
the session with :class:`~.observer.McpObserver` — the same events, from the same frames and instants, as when the
observer ran inside the relay.

``python -m promcp.proxy.mcp.stdio_recorder JOURNAL GO_FD`` is started by the relay (:mod:`.stdio`) once the
server has answered ``initialize`` and the request after it (or the relay's grace period passed, the client closed,
a SIGTERM / SIGINT came, the server exited), in its own session and at a lower priority (``os.nice``): nothing of
it competes with the server's start. It takes the journal's shared lock, waits for the relay's go on the pipe
``GO_FD`` (sent as it is started; at most :data:`GRACE_S`), then loads the recorder and the tokenizer, reads the journal as it grows, and when the relay
is gone (EOF on the pipe: it exited, or was killed) and the journal is read to its end, it closes its journal part,
removes the frame journal and merges the run (the last process of a run to end merges it,
:func:`promcp.store.parts.finalize_group`).

A relay killed before its recorder took the journal leaves it with nobody on it: :func:`record_orphans` records
such journals the same way (``promcp finalize``, ``promcp record`` and every run merge call it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import time
from pathlib import Path

from promcp.proxy.mcp import frame_journal as fj

TYPE_CHECKING = False  # the process starts light: nothing loads before the relay's go
if TYPE_CHECKING:
    from typing import Any

__all__ = ["GRACE_S", "main", "record_journal", "record_orphans"]

log = logging.getLogger(__name__)

#: how long the recorder waits for the relay's go before it loads anyway
GRACE_S = 3.0
#: how often it looks for new frames while the relay lives (its EOF wakes it at once)
_POLL_S = 0.05
#: the nice increment of the recorder process (the server and the client come first)
NICE = 10


def _at(wall_ns: int, ref_ns: int, mono_ns: int) -> Any:
    """The instant of a monotonic reading, its wall time from a (wall, monotonic) pair the relay read together."""
    from promcp.stages import Instant

    return Instant(wall_ns - (ref_ns - mono_ns), mono_ns)


class _Session:
    """One journal's recorder and observer (loaded once the journal's header is read)."""

    def __init__(self, header: dict[str, Any], journal_id: str) -> None:
        from promcp.content import DEFAULT_CONTENT, DEFAULT_MAX_CONTENT_BYTES
        from promcp.defaults import DEFAULT_TOKENIZER
        from promcp.events import Topology, Transport
        from promcp.proxy.mcp.frames import LineFrames, json_decoder
        from promcp.proxy.mcp.observer import McpObserver
        from promcp.recorder import Recorder

        self.header = header
        self.name = header["name"]
        self.max_frame = int(header["max_frame"])
        max_content = header.get("max_content_bytes", -1)
        self.recorder = Recorder(
            header["out"],
            topology=Topology.C_OTS,
            source="proxy:mcp",
            run_id=header["run_id"],
            part=part_name(journal_id, self.name),
            content=header.get("content") or DEFAULT_CONTENT,
            max_content_bytes=DEFAULT_MAX_CONTENT_BYTES if max_content == -1 else max_content,
            meta={
                "server": self.name,
                "transport": "stdio",
                "command": header["command"],
                "proxy_pid": header["proxy_pid"],
                "run_chosen_by": header["chosen_by"],
            },
        )
        self.timeout_s: float | None = header.get("timeout_s")
        self.observer = McpObserver(
            self.recorder,
            server=self.name,
            transport=Transport.STDIO,
            tokenizer=header.get("tokenizer") or DEFAULT_TOKENIZER,
            timeout_s=self.timeout_s,
        )
        self.observer.on_error = log.warning
        self.decode = json_decoder()
        #: each direction's framing, as the relay's own was (the same chunks, the same instants)
        self._frames = [LineFrames(self.max_frame) for _ in fj.ORIGINS]
        #: each direction's last chunk, until the record of its forward's end
        self._unforwarded: list[fj.Record | None] = [None for _ in fj.ORIGINS]
        self.first_output = False
        self.exited = False
        self._next_tick = 0.0

    def warm(self) -> None:
        """Load the tokenizer now (~0.5 s of CPU): the session's counts are ready when its frames are read."""
        try:
            self.observer.tokenizer()
        except Exception as exc:
            log.warning("tokenizer unavailable (%s); events are recorded without token counts", exc)

    def handle(self, rec: fj.Record) -> None:
        kind, n = rec.kind, rec.numbers
        if kind in (
            fj.CHUNK,
            fj.SKIPPED,
        ):  # its forward's end follows (another direction's records may come first)
            self._unforwarded[rec.origin] = rec
        elif kind == fj.FORWARDED:
            self._chunk(rec.origin, n[0], n[1])
        elif kind == fj.EOF:
            self._chunk(rec.origin, None, n[1])
            self._deliver(rec.origin, self._frames[rec.origin].close(n[0], n[0]), n[1], n[0], True)
        elif kind == fj.SPAWNED:
            wall = n[3]
            self.observer.spawned(_at(wall, n[1], n[0]), _at(wall, n[1], n[1]), attrs={"pid": n[2]})
        elif kind == fj.SPAWN_FAILED:
            self._spawn_failed(rec)
        elif kind == fj.EXITED:
            self._exited(rec)

    def relay_gone(self) -> None:
        """The journal ended: a chunk read but not known to be forwarded (the relay was killed between the two) is
        recorded as such; a frame without its newline stays unrecorded, as a kill leaves it."""
        for origin in range(len(fj.ORIGINS)):
            self._chunk(origin, None, None)

    def _chunk(self, origin: int, forwarded_ns: int | None, wall_ns: int | None) -> None:
        rec = self._unforwarded[origin]
        if rec is None:
            return
        self._unforwarded[origin] = None
        frames = self._frames[origin]
        read_ns, read_wall = rec.numbers[0], rec.numbers[1]
        if rec.kind == fj.SKIPPED:
            frames.skip(rec.numbers[2], rec.payload)
            return
        if forwarded_ns is not None and wall_ns is not None:
            self._deliver(
                origin, frames.feed(rec.payload, read_ns, forwarded_ns), wall_ns, forwarded_ns, True
            )
        else:  # not known to have been forwarded
            self._deliver(origin, frames.feed(rec.payload, read_ns, read_ns), read_wall, read_ns, False)

    def _deliver(self, origin_index: int, frames: list[Any], wall: int, ref_ns: int, forwarded: bool) -> None:
        from promcp.proxy.mcp.observer import Seen

        origin = fj.ORIGINS[origin_index]
        observer = self.observer
        for frame in frames:
            seen = Seen(
                frame.size,
                _at(wall, ref_ns, frame.first_ns),
                _at(wall, ref_ns, frame.last_ns),
                _at(wall, ref_ns, frame.forwarded_ns) if forwarded else None,
            )
            if origin == "server" and not self.first_output:
                self.first_output = True
                observer.first_output(seen.first)
            if frame.data is None:
                observer.oversize(origin, seen, frame.edges, self.max_frame)
                continue
            line = frame.data.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                message = self.decode(line)
            except ValueError as exc:
                observer.unparsable(origin, seen, "invalid_json", f"not JSON ({exc}): {line[:80]!r}")
                continue
            observer.message(origin, message, seen)

    def _spawn_failed(self, rec: fj.Record) -> None:
        from promcp.stages import Failure

        start, end, err, wall = rec.numbers[:4]
        reason = rec.payload.decode(errors="replace")
        failure = Failure.of(
            "spawn_failed", f"cannot start {self.header['command']!r}: {reason}", errno=err or None
        )
        self.observer.spawned(_at(wall, end, start), _at(wall, end, end), failure=failure)

    def _exited(self, rec: fj.Record) -> None:
        from promcp.events import Status
        from promcp.stages import Failure

        returncode, exit_ns, first_output, dropped, wall = rec.numbers[:5]
        client_closed, signalled = bool(rec.flags & fj.CLIENT_CLOSED), bool(rec.flags & fj.SIGNALLED)
        observer = self.observer
        at = _at(wall, exit_ns, exit_ns)
        status = f"signal {-returncode}" if returncode < 0 else f"code {returncode}"
        self.exited = True
        if first_output < 0:
            failure = Failure.of("server_exited", f"the server exited ({status}) before writing anything")
            observer.not_ready(at, failure, {"exit_code": returncode})
        if client_closed:
            gone = Failure(
                Status.CANCELLED, "client_closed", "the client closed the session before the answer"
            )
        else:
            gone = Failure.of("server_crashed", f"the server exited ({status}) before answering")
        observer.ended(at, gone)
        if returncode != 0 and not client_closed and not signalled:
            observer.note(
                at, Failure.of("server_exited", f"the server exited ({status})"), {"exit_code": returncode}
            )
        if dropped:
            log.warning("%d chunk(s) could not be journaled by the relay and were not recorded", dropped)

    def tick(self) -> None:
        """Close requests past ``--timeout`` (only called when every journaled frame has been read)."""
        if self.timeout_s is None or self.exited:
            return
        now = time.monotonic()
        if now >= self._next_tick:
            self._next_tick = now + min(max(self.timeout_s / 4, 0.05), 1.0)
            with contextlib.suppress(Exception):
                self.observer.check_timeouts()

    def close(self) -> None:
        self.recorder.flush()
        self.recorder.close(finalize_run=False)


def part_name(journal_id: str, server: str) -> str:
    """The journal part a recorder writes for the frame journal ``journal_id``: named after it, so whoever records
    that journal again (its recorder died) finds what the dead one wrote."""
    return f"fj{journal_id}-mcp-{server}"


def _drop_dead_parts(header: dict[str, Any], journal_id: str) -> int:
    """Remove the journal parts a dead recorder of this frame journal left (the journal is recorded whole again);
    how many. Under the dataset's group lock, so no merge reads them meanwhile."""
    from promcp.store.parts import group_lock, parts_dir

    root = Path(header["out"])
    folder = parts_dir(root, header["run_id"])
    prefix = part_name(journal_id, "")
    dropped = 0
    with group_lock(root):
        for part in folder.glob(f"{prefix}*.jsonl"):
            part.unlink()
            dropped += 1
    return dropped


def record_journal(path: str, fd: int, go_fd: int | None = None) -> tuple[str, str] | None:
    """Record the frame journal ``path`` (``fd``: open, locked) until its relay is gone — ``go_fd`` is the relay's
    pipe, None when it is gone already — then remove it. Returns (dataset folder, run id), or None when the
    journal held no session (removed all the same)."""
    import json

    if not fj.check_magic(fd):
        if go_fd is None:
            log.warning("%s: not a frame journal (or cut before its first record); removed", path)
            os.unlink(path)
        return None
    offset = len(fj.MAGIC)
    session: _Session | None = None
    try:
        relay_gone = go_fd is None
        max_payload = 1 << 20  # a chunk (64 KiB) or a header: anything larger is a damaged file
        while True:
            gone_before = relay_gone
            start = offset
            for rec, offset in fj.read_records(fd, start, max_payload):  # noqa: B007 (where the next read starts)
                if session is None:
                    if rec.kind != fj.HEADER:
                        raise ValueError(f"{path}: the first record is not the session's header")
                    header = json.loads(rec.payload)
                    if go_fd is None and (dropped := _drop_dead_parts(header, fj.journal_id(path))):
                        log.warning(
                            "%s: recorded again whole; the %d part(s) its dead recorder left are removed",
                            path,
                            dropped,
                        )
                    session = _Session(header, fj.journal_id(path))
                    session.warm()
                    continue
                try:
                    session.handle(rec)
                except (
                    Exception
                ) as exc:  # one record the observer cannot use must not take the session with it
                    log.warning("recording error (%s: %s)", type(exc).__name__, exc)
            if gone_before:
                break
            if session is not None:
                session.tick()
            assert go_fd is not None
            ready, _, _ = select.select([go_fd], [], [], _POLL_S)
            if ready:
                try:
                    data = os.read(go_fd, 4096)
                except OSError:
                    data = b""
                relay_gone = not data
    except BaseException:
        # the journal stays for `promcp finalize`, which records it whole: what this process journaled goes, or the
        # session would be recorded twice
        if session is not None:
            with contextlib.suppress(Exception):
                session.recorder.discard()
        raise
    if session is None:  # a relay killed before its header: nothing to record
        os.unlink(path)
        return None
    session.relay_gone()
    session.close()
    # the part is closed before the frame journal goes: whoever waits for the run sees one or the other
    os.unlink(path)
    return str(session.header["out"]), str(session.header["run_id"])


def record_orphans(root: Path | str, run_id: str | None = None) -> int:
    """Record the frame journals under dataset ``root`` (one run's, or every run's) that nobody is on — left by a
    relay killed before its recorder started, or by a recorder that died; returns how many. Live ones are left
    to their recorder. Not merged here: the caller merges."""
    from promcp.store.parts import parts_dir, pending_groups

    done = 0
    for rid in [run_id] if run_id is not None else pending_groups(Path(root)):
        for path in fj.journals(str(parts_dir(Path(root), rid))):
            fd = fj.claim(path, exclusive=True)
            if fd is None:
                continue
            try:
                record_journal(path, fd, None)
                done += 1
            except Exception as exc:  # left in place for another try; the rest of the run is merged
                log.warning("%s: could not be recorded (%s: %s)", path, type(exc).__name__, exc)
            finally:
                os.close(fd)
    return done


def _wait_for_go(go_fd: int) -> None:
    ready, _, _ = select.select([go_fd], [], [], GRACE_S)
    if ready:
        with contextlib.suppress(OSError):
            if os.read(go_fd, 1) == b"":  # the relay is gone: a 0-byte read again later says so too
                return


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m promcp.proxy.mcp.stdio_recorder JOURNAL GO_FD\n")
        return 2
    with contextlib.suppress(OSError):
        os.nice(NICE)
    path, go_fd = args[0], int(args[1])
    fd = fj.claim(path, exclusive=False)
    if fd is None:  # recorded by someone else already (the relay died before we got here)
        return 0
    _wait_for_go(go_fd)
    try:
        where = record_journal(path, fd, go_fd)
    except Exception as exc:  # the journal stays for `promcp finalize`
        log.warning("could not record %s (%s: %s)", path, type(exc).__name__, exc)
        return 1
    finally:
        os.close(fd)
    if where is None:
        return 0
    from promcp.stages.link import link_tool_calls
    from promcp.store.parts import finalize_group

    out, run_id = Path(where[0]), where[1]
    try:
        record_orphans(out, run_id)
        finalize_group(out, run_id, link=link_tool_calls)
    except Exception as exc:  # the parts stay for `promcp finalize`
        log.warning("could not merge run %s in %s: %s", run_id, out, exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
