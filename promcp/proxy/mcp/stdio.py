"""``promcp proxy mcp -- COMMAND ARGS…``: a transparent stdio relay between an MCP client and the server it starts.

The client starts the proxy where it would start the server. Two processes do the work:

* **the relay** (this module, standard library only — the ``promcp`` script reaches it without loading the rest
  of the command line, :func:`fast_main`): it starts the server with the same environment (less the
  ``PROMCP_MCP_ENV_*`` values ``promcp record`` passes: promcp/proxy/mcp/env_refs.py) and working directory and
  stands in the middle of its stdin and stdout. Each direction is one thread that reads whatever arrived
  (``os.read``, up to 64 KiB) and writes it on at once, whole — nothing waits for a frame boundary, nothing is
  changed, reordered or dropped — after appending it to the session's **frame journal** (:mod:`.frame_journal`:
  one write per chunk, owner-only, in the run's parts folder; the middle of a frame longer than ``--max-frame`` only
  counted), so a kill at any moment leaves every byte the relay passed on in the journal. The relay keeps no frame:
  its memory is a chunk per direction. The server's stderr is the proxy's own (inherited).
* **the recorder** (:mod:`.stdio_recorder`), a second Python process in its own session (the client's kill of the
  proxy's group does not reach it) at a lower priority. The relay starts it once the server has answered
  ``initialize`` and the request after it (or after :data:`GRACE_S`, at a SIGTERM / SIGINT, the client's close or
  the server's exit) — not beside the booting server, whose start it would slow — and it then loads the recorder, the stage builders and the tokenizer, reads the journal as it grows, cuts the chunks into
  newline-delimited JSON-RPC frames (:class:`~.frames.LineFrames`, with the instants the relay read), builds the
  same events the observer always did (:class:`~.observer.McpObserver`), and once the relay is gone and the journal is
  read, closes its journal part, removes the frame journal and merges the run.

So the server boots while nothing heavier than a line copier runs beside it (tests/perf/bench_mcp_startup.py,
docs/proxy.md), and a client that kills the proxy — Claude Code: SIGINT, SIGTERM, SIGKILL within 0.5 s; Codex:
SIGKILL 0.1 s after SIGTERM — kills only the relay, whose every relayed frame is already in the journal.

* **end**: the client closing stdin closes the server's stdin; a client that stops reading gets the server a
  broken pipe, as it would without the proxy. When the server exits, the relay drains its stdout, journals the
  exit and exits with the server's status — the same exit code, or the same signal re-raised on itself.
* **signals**: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH are forwarded to the server (its
  own process group, so a signal to the client's group reaches it exactly once, through the proxy). The server is
  killed if the relay is (``PR_SET_PDEATHSIG``), as a SIGKILL to the group would have killed it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time

from promcp.proxy._group import resolve_target
from promcp.proxy.mcp import frame_journal as fj
from promcp.proxy.mcp.env_refs import without_refs
from promcp.proxy.mcp.frames import DEFAULT_MAX_FRAME, EDGE

TYPE_CHECKING = False  # no ``typing`` at run time (docs/proxy.md "Start-up")
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["FORWARDED_SIGNALS", "StdioOptions", "fast_main", "main_exit", "run_stdio"]

FORWARDED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH")
_CHUNK = 64 * 1024
#: how long the relay waits for the server's stdout to close once the server exited (a grandchild may hold it)
_DRAIN_S = 2.0
_PR_SET_PDEATHSIG = 1
#: the recorder starts loading once the server has sent this many messages (the answers to initialize and to the
#: first request after it, tools/list as a rule); it waits at most its grace period (.stdio_recorder)
_HANDSHAKE_FRAMES = 2
#: the recorder starts at the latest this long after the server (a server that never answers is recorded too)
GRACE_S = 3.0
_CONTENT_MODES = ("redacted", "full", "none")  # promcp/content.py's modes; the recorder checks them again


def _say(text: str) -> None:
    """A line on the proxy's stderr (never stdout: that is the protocol channel)."""
    with contextlib.suppress(OSError):
        os.write(2, f"promcp proxy: {text}\n".encode(errors="replace"))


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the server still ends on stdin EOF
        pass


class StdioOptions:
    """What ``promcp proxy mcp`` was asked for (plain values, checked by whoever parsed them). ``None`` for the
    tokenizer and the content options: the recorder's defaults (promcp/defaults.py, promcp/content.py)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str | None = None,
        out: Any = None,
        run_id: str | None = None,
        tokenizer: str | None = None,
        timeout_s: float | None = None,
        content: str | None = None,
        max_content_bytes: int | None = -1,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.command = list(command)
        self.name = name or (os.path.basename(self.command[0]) if self.command else "server")
        self.out = out
        self.run_id = run_id
        self.tokenizer = tokenizer
        self.timeout_s = timeout_s
        self.content = content  # full | redacted | none (promcp/content.py)
        self.max_content_bytes = max_content_bytes  # -1: the default; None or 0: no cap
        self.max_frame = max_frame


# -- the console script's fast path ---------------------------------------------------------------------------

_VALUED = {
    "--name": "name",
    "--out": "out",
    "--run-id": "run_id",
    "--tokenizer": "tokenizer",
    "--timeout": "timeout",
    "--content": "content",
    "--max-content-bytes": "max_content_bytes",
    "--max-frame": "max_frame",
}


def parse_fast(argv: Sequence[str]) -> StdioOptions | None:
    """The options of ``promcp proxy mcp [OPTIONS] -- COMMAND…`` (``argv`` after ``proxy mcp``) when every one is
    a well-formed stdio option; None for anything else (HTTP, ``--help``, a typo, a bad value), which the full
    command line then handles and explains."""
    args = list(argv)
    values: dict[str, str] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        key, eq, value = word.partition("=")
        if key not in _VALUED:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        values[_VALUED[key]] = value
        i += 1
    command = args[i + 1 :]
    if i >= len(args) or not command or not command[0]:
        return None
    try:
        timeout = float(values["timeout"]) if "timeout" in values else None
        max_frame = int(values["max_frame"]) if "max_frame" in values else DEFAULT_MAX_FRAME
        max_content = int(values["max_content_bytes"]) if "max_content_bytes" in values else -1
    except ValueError:
        return None
    if (
        (timeout is not None and not timeout > 0)
        or max_frame <= 0
        or ("max_content_bytes" in values and max_content < 0)
    ):
        return None
    if values.get("content", "redacted") not in _CONTENT_MODES:
        return None
    out = values.get("out")
    if out is not None and not out:
        return None
    return StdioOptions(
        command,
        name=values.get("name"),
        out=out,
        run_id=values.get("run_id"),
        tokenizer=values.get("tokenizer"),
        timeout_s=timeout,
        content=values.get("content"),
        max_content_bytes=(max_content or None) if max_content >= 0 else -1,
        max_frame=max_frame,
    )


def fast_main(argv: Sequence[str]) -> None:
    """``promcp proxy mcp …`` straight from the console script: relay and exit when the arguments are a plain stdio
    invocation (never returns then); return to let the full command line handle anything else."""
    opts = parse_fast(argv)
    if opts is None:
        return
    if opts.run_id is not None:
        from promcp.proxy._group import check_run_id

        try:
            check_run_id(opts.run_id)
        except ValueError:
            return  # the full command line says what is wrong with it
    main_exit(opts)


# -- the relay --------------------------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Pump(threading.Thread):
    """Copies one pipe to another as bytes arrive, journaling each chunk before it is forwarded (and the instant
    the forward ended, after): a kill at any point leaves every byte it passed on in the journal."""

    def __init__(
        self, src: int, dst: int, origin: int, journal: fj.JournalWriter | None, max_frame: int, name: str
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.src, self.dst, self.origin, self.journal = src, dst, origin, journal
        #: bytes of an unfinished frame past which its middle is not journaled (counted; the frame is oversize)
        self.limit = max(max_frame, EDGE)
        self.first_read_ns: int | None = None
        self.frames_seen = 0  # newlines passed on
        self.busy = False  # journaling or forwarding a chunk it read
        self.eof = threading.Event()
        self.on_eof: Callable[[], None] | None = None
        self.on_broken: Callable[[], None] | None = None
        self.on_frames: Callable[[int], None] | None = None

    def run(self) -> None:
        clock = time.perf_counter_ns
        journal, origin = self.journal, self.origin
        pending = 0  # bytes since the last newline
        try:
            while True:
                try:
                    chunk = os.read(self.src, _CHUNK)
                except OSError:
                    break
                if not chunk:
                    break
                read_ns = clock()
                self.busy = True
                if self.first_read_ns is None:
                    self.first_read_ns = read_ns
                newline = chunk.rfind(b"\n")
                if journal is not None:
                    if (
                        newline < 0 and pending > self.limit
                    ):  # inside an oversize frame: its size and last bytes
                        journal.skipped(origin, read_ns, len(chunk), chunk[-EDGE:])
                    else:
                        journal.chunk(origin, read_ns, chunk)
                pending = pending + len(chunk) if newline < 0 else len(chunk) - newline - 1
                try:
                    _write_all(self.dst, chunk)
                except OSError:
                    if self.on_broken is not None:
                        self.on_broken()
                    break
                finally:
                    self.busy = False
                if journal is not None:
                    journal.forwarded(origin, clock())
                if newline >= 0 and self.on_frames is not None:
                    self.frames_seen += chunk.count(b"\n")
                    self.on_frames(self.frames_seen)
        finally:
            if journal is not None:
                journal.eof(origin, clock())
            self.eof.set()
            if self.on_eof is not None:
                self.on_eof()


def _spawn(command: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # the user's own server command, no shell
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        bufsize=0,
        close_fds=True,
        env=without_refs(os.environ),  # not the other servers' secrets (promcp/proxy/mcp/env_refs.py)
        process_group=0,
        preexec_fn=_die_with_parent,  # before any thread of ours exists
    )


def _exit_like(returncode: int) -> int:
    """Exit the way the server did: its exit code, or its fatal signal raised again on this process."""
    if returncode >= 0:
        return returncode
    sig = -returncode
    with contextlib.suppress(OSError, ValueError):
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(0.5)
    return 128 + sig


class _Recording:
    """The relay's end of the recording: the frame journal and the recorder process it starts."""

    def __init__(self, opts: StdioOptions) -> None:
        import json

        target = resolve_target(opts.out, opts.run_id)
        out = os.path.abspath(os.fspath(target.out))
        folder = os.path.join(out, "_journal", f"{target.run_id}.parts")  # promcp.store.parts.parts_dir
        self.journal = fj.JournalWriter(folder, f"mcp-{opts.name}")
        header = {
            "out": out,
            "run_id": target.run_id,
            "chosen_by": target.chosen_by,
            "name": opts.name,
            "command": opts.command[0],
            "tokenizer": opts.tokenizer,
            "timeout_s": opts.timeout_s,
            "content": opts.content,
            "max_content_bytes": opts.max_content_bytes,
            "max_frame": opts.max_frame,
            "proxy_pid": os.getpid(),
        }
        self.journal.record(fj.HEADER, payload=json.dumps(header).encode())
        self._go_r, self._go_w = os.pipe()
        self._went = False
        self._go_lock = threading.RLock()  # go() runs in a signal handler too (the main thread may hold it)
        self.recorder: subprocess.Popen[bytes] | None = None

    def start_recorder(self) -> None:
        """The recorder process: its own session, stdio to /dev/null (a client waiting for the proxy's stderr to
        close must not wait for it), the go pipe's read end (its EOF: the relay is gone)."""
        try:
            self.recorder = subprocess.Popen(  # no shell; this interpreter and promcp
                [sys.executable, "-m", "promcp.proxy.mcp.stdio_recorder", self.journal.path, str(self._go_r)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
                pass_fds=(self._go_r,),
            )
        except OSError as exc:  # the journal stays for `promcp finalize` / the run's merge
            _say(f"could not start the recorder ({exc}); the session is recorded when the run is finalized")
        with contextlib.suppress(OSError):
            os.close(self._go_r)

    def go(self) -> None:
        """Start the recorder and tell it to load (once; never waits for it)."""
        with self._go_lock:
            if self._went:
                return
            self._went = True
            self.start_recorder()
            with contextlib.suppress(OSError):
                os.set_blocking(self._go_w, False)
                os.write(self._go_w, b"g")

    def spawned(self, start_ns: int, end_ns: int, pid: int) -> None:
        self.journal.record(fj.SPAWNED, (start_ns, end_ns, pid, time.time_ns()))

    def spawn_failed(self, start_ns: int, end_ns: int, exc: OSError) -> None:
        numbers = (start_ns, end_ns, exc.errno or 0, time.time_ns())
        self.journal.record(fj.SPAWN_FAILED, numbers, str(exc.strerror or exc).encode(errors="replace"))

    def exited(
        self, returncode: int, exit_ns: int, first_output_ns: int | None, client_closed: bool, signalled: bool
    ) -> None:
        flags = (fj.CLIENT_CLOSED if client_closed else 0) | (fj.SIGNALLED if signalled else 0)
        first = -1 if first_output_ns is None else first_output_ns
        dropped = self.journal.dropped
        self.journal.record(fj.EXITED, (returncode, exit_ns, first, dropped, time.time_ns()), flags=flags)
        if self.journal.error is not None:
            _say(
                f"recording stopped ({self.journal.error}); {dropped} frame(s) were relayed but not recorded"
            )

    def close(self) -> None:
        """The relay is done: the journal closed, the recorder told (EOF on its pipe)."""
        self.journal.close()
        self.go()
        with contextlib.suppress(OSError):
            os.close(self._go_w)


def _recording(opts: StdioOptions) -> _Recording | None:
    try:
        return _Recording(opts)
    except Exception as exc:  # a dataset folder we cannot write, a bad run id: relay anyway, say so once
        _say(f"not recording ({type(exc).__name__}: {exc}); the server is relayed unchanged")
        return None


def run_stdio(opts: StdioOptions) -> int:
    """Relay one stdio server session into its frame journal; returns the exit status the proxy should exit with."""
    # the server first: its start-up overlaps everything else (tests/perf/bench_mcp_startup.py)
    spawn_start = time.perf_counter_ns()
    try:
        child = _spawn(opts.command)
    except OSError as exc:
        spawn_end = time.perf_counter_ns()
        code = 127 if exc.errno == errno.ENOENT else 126
        _say(f"cannot start {opts.command[0]!r}: {exc.strerror or exc}")
        failed = _recording(opts)
        if failed is not None:
            failed.spawn_failed(spawn_start, spawn_end, exc)
            failed.close()
        return code
    spawn_end = time.perf_counter_ns()
    assert child.stdin is not None and child.stdout is not None
    rec = _recording(opts)
    journal = rec.journal if rec is not None else None
    if rec is not None:
        rec.spawned(spawn_start, spawn_end, child.pid)
    server_in, server_out = child.stdin.fileno(), child.stdout.fileno()
    up = _Pump(0, server_in, 0, journal, opts.max_frame, "promcp-proxy-client->server")
    down = _Pump(server_out, 1, 1, journal, opts.max_frame, "promcp-proxy-server->client")
    client_closed = threading.Event()

    def close_server_stdin() -> None:  # the client closed its end: so does the proxy, to the server
        client_closed.set()
        with contextlib.suppress(OSError):
            child.stdin.close()  # type: ignore[union-attr]
        if rec is not None:  # a client ending its session kills its servers soon: the recorder starts now
            rec.go()

    def stop_reading_client() -> (
        None
    ):  # the server's stdin is gone: the client's next write fails, as it would
        with contextlib.suppress(OSError):
            os.close(0)

    def stop_reading_server() -> (
        None
    ):  # the client stopped reading: the server's next write fails, as it would
        with contextlib.suppress(OSError):
            child.stdout.close()  # type: ignore[union-attr]

    def handshake(seen: int) -> None:
        if seen >= _HANDSHAKE_FRAMES and rec is not None:
            rec.go()

    up.on_eof = close_server_stdin
    up.on_broken = stop_reading_client
    down.on_broken = stop_reading_server
    down.on_frames = handshake
    forwarded: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        forwarded.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signum)
        if rec is not None and signum in (signal.SIGINT, signal.SIGTERM):  # a kill may follow
            rec.go()

    for name in FORWARDED_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread (tests)
            signal.signal(getattr(signal, name), forward)
    up.start()  # bytes flow from here on
    down.start()
    # the recorder starts at the handshake (or a signal, the client's close, the grace period), not beside the server
    if rec is not None:
        grace = threading.Timer(GRACE_S, rec.go)
        grace.daemon = True
        grace.start()
    returncode = child.wait()
    exit_ns = time.perf_counter_ns()
    drain_until = time.monotonic() + _DRAIN_S
    while not down.eof.wait(0.05):  # the last answers may still be read; a grandchild may hold the pipe open
        if time.monotonic() > drain_until and not down.busy:
            break
    if rec is not None:
        rec.exited(returncode, exit_ns, down.first_read_ns, client_closed.is_set(), bool(forwarded))
        rec.close()
    return returncode


def main_exit(opts: StdioOptions) -> None:
    """Run the relay and leave the process the way the server left (used by the CLI)."""
    code = run_stdio(opts)
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(_exit_like(code)) if code < 0 else os._exit(code)
