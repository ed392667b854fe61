"""Take a run's MCP server processes down with the run, however it ends — SIGKILL of ``promcp run`` included.

Every server the host starts (stdio servers and the ``start`` commands of HTTP/SSE servers) runs in its own process
group (``start_new_session``), so one ``killpg`` reaches its children too (``npx`` → ``node``). The host stops
each group itself on every orderly exit (end of run, Ctrl-C, SIGTERM, a crash of the run). For the exit it cannot
handle — being SIGKILLed, or the OOM killer — a watchdog process (this file, run as a script: stdlib only, ~20 ms
to start) holds the read end of a pipe whose write end only the host has. The host tells it ``+PGID`` when a group
starts and ``-PGID`` when it has stopped it. When the pipe reaches end of file — the kernel closes it when the host
dies, whatever killed it — the watchdog sends SIGTERM to every group still listed, waits up to
:data:`GRACE_S`, then SIGKILLs what is left, and exits. It ignores Ctrl-C (the host handles that and then closes
the pipe) and runs in its own session, so a terminal's signals reach it only through the host.

The window between a server's ``fork`` and the host writing ``+PGID`` (microseconds) is the only time a SIGKILL
of the host can still orphan a server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

#: seconds between SIGTERM and SIGKILL
GRACE_S = 3.0


class Reaper:
    """The host side: starts the watchdog and keeps it informed (a closed reaper ignores calls)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        self._pipe: IO[bytes] | None = self._proc.stdin

    def _send(self, line: str) -> None:
        if self._pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):  # the watchdog died: nothing more to guard with
            self._pipe.write(line.encode() + b"\n")
            self._pipe.flush()

    def watch(self, pgid: int) -> None:
        """Kill this process group if the host dies before it calls :meth:`forget`."""
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def close(self, timeout: float = GRACE_S + 2) -> None:
        """Close the pipe (the watchdog stops any group still listed) and wait for the watchdog to exit."""
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still exists (only ESRCH proves it gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_groups(groups: set[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM every group, wait up to ``grace_s`` for them to disappear, then SIGKILL the rest."""
    for pgid in list(groups):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            groups.discard(pgid)
        except PermissionError:
            pass
    deadline = time.monotonic() + grace_s
    while groups and time.monotonic() < deadline:
        groups.difference_update([g for g in groups if not group_alive(g)])
        time.sleep(0.02)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _watch(stdin: IO[bytes]) -> None:
    groups: set[int] = set()
    try:
        for raw in stdin:
            line = raw.strip()
            if line[:1] in (b"+", b"-") and line[1:].isdigit():
                pgid = int(line[1:])
                if pgid > 1:
                    (groups.add if line[:1] == b"+" else groups.discard)(pgid)
    finally:  # end of file (the host exited or died), or SIGTERM to the watchdog itself
        kill_groups(groups)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminate)
    _watch(sys.stdin.buffer)
