"""``promcp proxy mcp -- COMMAND ARGS…``: a transparent stdio relay between an MCP client and the server it starts.

The client starts the proxy where it would start the server; the proxy starts the server with the same
environment (less the ``PROMCP_MCP_ENV_*`` values ``promcp record`` passes: promcp/proxy/mcp/env_refs.py) and
working directory and stands in the middle of its stdin and stdout:

* **bytes**: each direction is one thread that reads whatever arrived (``os.read``, up to 64 KiB) and writes it on
  at once, whole — nothing waits for a frame boundary, nothing is changed, reordered or dropped. Only then is the
  chunk cut into newline-delimited JSON-RPC frames (:class:`~.frames.LineFrames`) and handed to the
  :class:`~.observer.McpObserver`; a recording error is reported on stderr once and never touches the traffic.
  The server's stderr is the proxy's own (inherited, not copied).
* **start-up**: the server is spawned first, before the recorder is even imported, and the relay threads start
  at once: the server boots while the proxy loads its recorder (~0.1 s idle), so a wrapped server answers
  ``initialize`` about as soon as it would bare (tests/perf/bench_mcp_startup.py, docs/proxy.md). Frames read
  meanwhile wait in their tap (bounded) with their timestamps and are recorded when it is ready. Neither the CLI
  path nor the recorder imports rich, pyarrow or pandas (its journal part needs none of them). The tokenizer
  (~0.5 s of CPU) loads on a thread as soon as the recorder is ready, while the server boots, so that a session's
  counting is done before the client ends it. Loading it only after the handshake
  (``_Recording.prepare(warm_after=…)``) started a loaded machine's server sooner (+0.72 s vs +1.16 s over the bare
  server, interleaved, tests/perf/bench_mcp_startup.py), but in a Codex end-to-end run under load the tokenizer
  was still loading when Codex ended the session, and ``tools/list``'s count, left to the 0.1 s hand-off window,
  was lost: an event lost is worse than a slower start. When the client closes its end, or a SIGTERM / SIGINT
  comes, what is not counted yet is handed to a detached helper at once — or as soon as the recorder is loaded,
  if the end came first: clients kill their servers shortly after (Claude Code: SIGINT, SIGTERM, SIGKILL within
  0.5 s; Codex SIGKILL 0.1 s after SIGTERM).
* **end**: the client closing stdin closes the server's stdin; a client that stops reading gets the server a
  broken pipe, as it would without the proxy. When the server exits, the proxy drains its stdout, records what
  was still waiting (a crash mid-call), finalizes its journal part and exits with the server's status — the same
  exit code, or the same signal re-raised on itself.
* **signals**: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH are forwarded to the server (its
  own process group, so a signal to the client's group reaches it exactly once, through the proxy). The server is
  killed if the proxy is (``PR_SET_PDEATHSIG``), as a SIGKILL to the group would have killed it.
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
from collections.abc import Callable, Sequence
from typing import Any

from promcp.content import DEFAULT_CONTENT, DEFAULT_MAX_CONTENT_BYTES
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.proxy.mcp.env_refs import without_refs
from promcp.proxy.mcp.frames import DEFAULT_MAX_FRAME, Frame, LineFrames, json_decoder

__all__ = ["FORWARDED_SIGNALS", "StdioOptions", "run_stdio"]

FORWARDED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH")
_CHUNK = 64 * 1024
#: how long the proxy waits for the server's stdout to close once the server exited (a grandchild may hold it)
_DRAIN_S = 2.0
_PR_SET_PDEATHSIG = 1
#: how long the proxy counts tokens itself when the session ends before handing the rest to a helper
_FLUSH_S = 0.15
#: the tokenizer loads once the server has sent this many messages (the answers to initialize and to the first
#: request after it, tools/list as a rule), or after _HANDSHAKE_WAIT_S
_HANDSHAKE_FRAMES = 2
_HANDSHAKE_WAIT_S = 3.0


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
    """What ``promcp proxy mcp`` was asked for (plain values; parsed by the CLI)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str | None = None,
        out: Any = None,
        run_id: str | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
        timeout_s: float | None = None,
        content: str = DEFAULT_CONTENT,
        max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.command = list(command)
        self.name = name or (os.path.basename(self.command[0]) if self.command else "server")
        self.out = out
        self.run_id = run_id
        self.tokenizer = tokenizer
        self.timeout_s = timeout_s
        self.content = content  # full | redacted | none (promcp/content.py)
        self.max_content_bytes = max_content_bytes
        self.max_frame = max_frame


class _Tap:
    """One direction's frames on their way to the observer (held until the observer is attached)."""

    def __init__(self, origin: str, max_frame: int) -> None:
        self.origin = origin
        self.frames = LineFrames(max_frame)
        self._lock = threading.Lock()
        self._held: list[Frame] = []
        self._held_bytes = 0
        self._deliver: Callable[[str, Frame], None] | None = None
        self.first_read_ns: int | None = None
        self.dropped = 0
        self.frames_seen = 0
        self.seen_enough: tuple[int, threading.Event] | None = None  # (n, event set once n frames passed)

    def feed(self, chunk: bytes, read_ns: int, forwarded_ns: int) -> None:
        if self.first_read_ns is None:
            self.first_read_ns = read_ns
        for frame in self.frames.feed(chunk, read_ns, forwarded_ns):
            self._hand(frame)

    def close(self, now_ns: int) -> None:
        for frame in self.frames.close(now_ns, now_ns):
            self._hand(frame)

    def _hand(self, frame: Frame) -> None:
        self.frames_seen += 1
        if self.seen_enough is not None and self.frames_seen >= self.seen_enough[0]:
            self.seen_enough[1].set()
        deliver = self._deliver
        if deliver is None:
            with self._lock:
                deliver = self._deliver
                if deliver is None:  # the observer is still loading: hold a bounded amount
                    if self._held_bytes + frame.size <= 256 * 1024 * 1024:
                        self._held.append(frame)
                        self._held_bytes += frame.size
                    else:
                        self.dropped += 1
                    return
        deliver(self.origin, frame)


def attach_taps(taps: Sequence[_Tap], deliver: Callable[[str, Frame], None]) -> None:
    """Hand every tap's held frames to ``deliver`` in the order their bytes arrived, then deliver live. The taps
    are attached together: one tap's held frames replayed after the other's would give the observer a
    ``tools/list`` answer before its request (it held both while the recorder loaded)."""
    with contextlib.ExitStack() as locks:
        for tap in taps:
            locks.enter_context(tap._lock)
        held = [(frame.last_ns, i, tap.origin, frame) for tap in taps for i, frame in enumerate(tap._held)]
        for tap in taps:
            tap._held, tap._held_bytes = [], 0
        # a request's last byte arrives before its answer's first: the read instants order the two directions
        for _last, _i, origin, frame in sorted(held, key=lambda item: (item[0], item[1])):
            deliver(origin, frame)
        for tap in taps:
            tap._deliver = deliver


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Pump(threading.Thread):
    """Copies one pipe to another as bytes arrive, then lets the tap read them."""

    def __init__(self, src: int, dst: int, tap: _Tap, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.src, self.dst, self.tap = src, dst, tap
        self.dst_broken = False
        self.busy = False  # reading a message it already relayed (a 50 MB result takes a while)
        self.eof = threading.Event()
        self.on_eof: Callable[[], None] | None = None
        self.on_broken: Callable[[], None] | None = None

    def run(self) -> None:
        clock = time.perf_counter_ns
        try:
            while True:
                try:
                    chunk = os.read(self.src, _CHUNK)
                except OSError:
                    break
                if not chunk:
                    break
                read_ns = clock()
                try:
                    _write_all(self.dst, chunk)
                except OSError:
                    self.dst_broken = True
                    if self.on_broken is not None:
                        self.on_broken()
                    break
                forwarded_ns = clock()
                self.busy = True
                try:
                    self.tap.feed(chunk, read_ns, forwarded_ns)
                except Exception as exc:  # the recording side must never stop the relay
                    _say(f"recording error ({type(exc).__name__}: {exc}); traffic is still relayed")
                finally:
                    self.busy = False
        finally:
            with contextlib.suppress(Exception):
                self.tap.close(clock())
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


def run_stdio(opts: StdioOptions) -> int:
    """Relay and record one stdio server session; returns the exit status the proxy should exit with."""
    handshake = threading.Event()  # the server answered initialize and the request after it
    # the server first, the recorder while it boots: its start-up overlaps ours (tests/perf/bench_mcp_startup.py)
    spawn_start = time.perf_counter_ns()
    try:
        child = _spawn(opts.command)
    except OSError as exc:
        spawn_end = time.perf_counter_ns()
        code = 127 if exc.errno == errno.ENOENT else 126
        _say(f"cannot start {opts.command[0]!r}: {exc.strerror or exc}")
        failed = _Recording.prepare(opts)
        if failed is not None:
            failed.spawn_failed(spawn_start, spawn_end, exc)
        return code
    spawn_end = time.perf_counter_ns()
    assert child.stdin is not None and child.stdout is not None
    to_server, to_client = _Tap("client", opts.max_frame), _Tap("server", opts.max_frame)
    server_in, server_out = child.stdin.fileno(), child.stdout.fileno()
    up = _Pump(0, server_in, to_server, "promcp-proxy-client->server")
    down = _Pump(server_out, 1, to_client, "promcp-proxy-server->client")
    client_closed = threading.Event()
    ready: list[_Recording] = []  # the recorder, once loaded (the taps hold frames until then)
    handed = threading.Lock()  # a hand-off asked for before the recorder existed runs once it does

    def close_server_stdin() -> None:  # the client closed its end: so does the proxy, to the server
        client_closed.set()
        with contextlib.suppress(OSError):
            child.stdin.close()  # type: ignore[union-attr]
        with handed:
            if ready:  # a client ending its session kills its servers soon: hand unfinished work off
                ready[0].hand_off()

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

    to_client.seen_enough = (_HANDSHAKE_FRAMES, handshake)
    up.on_eof = close_server_stdin
    up.on_broken = stop_reading_client
    down.on_broken = stop_reading_server
    forwarded: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        forwarded.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signum)
        if ready and signum in (signal.SIGINT, signal.SIGTERM):  # a kill may follow
            ready[0].hand_off(signalled=True)

    for name in FORWARDED_SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread (tests)
            signal.signal(getattr(signal, name), forward)
    up.start()  # bytes flow from here on; their frames wait in the taps for the recorder
    down.start()
    session = _Recording.prepare(opts)
    if session is not None:
        session.spawned(spawn_start, spawn_end, child.pid)
        session.attach(to_server, to_client)
        with handed:
            ready.append(session)
            if client_closed.is_set() or any(s in (signal.SIGINT, signal.SIGTERM) for s in forwarded):
                session.hand_off(signalled=bool(forwarded))  # the end came while the recorder loaded
    ticker = session.start_ticker() if session is not None else None
    returncode = child.wait()
    exit_ns = time.perf_counter_ns()
    drain_until = time.monotonic() + _DRAIN_S
    while not down.eof.wait(0.05):  # the last answers may still be read; a grandchild may hold the pipe open
        if time.monotonic() > drain_until and not down.busy:
            break
    if ticker is not None:
        ticker.set()
    if session is not None:
        session.finish(
            returncode,
            exit_ns,
            first_output_ns=to_client.first_read_ns,
            client_closed=client_closed.is_set(),
            signalled=bool(forwarded),
            dropped=to_server.dropped + to_client.dropped,
        )
    return returncode


class _Recording:
    """The recording half, loaded after the server was spawned (imports the recorder, the stage builders and
    the observer: ~0.1 s idle, that neither the server nor the relay threads wait for)."""

    def __init__(self, opts: StdioOptions, observer: Any, recorder: Any, clock: Any) -> None:
        self.opts, self.observer, self.recorder, self.clock = opts, observer, recorder, clock

    @classmethod
    def prepare(cls, opts: StdioOptions, warm_after: threading.Event | None = None) -> _Recording | None:
        try:
            from promcp.events import Topology, Transport
            from promcp.proxy._group import resolve_target
            from promcp.proxy.mcp import handoff  # noqa: F401  (imported now: a hand-off may have 0.1 s to happen)
            from promcp.proxy.mcp.observer import McpObserver
            from promcp.recorder import Recorder
            from promcp.stages import SYSTEM_CLOCK

            target = resolve_target(opts.out, opts.run_id)
            recorder = Recorder(
                target.out,
                topology=Topology.C_OTS,
                source="proxy:mcp",
                run_id=target.run_id,
                part=f"mcp-{opts.name}",
                content=opts.content,
                max_content_bytes=opts.max_content_bytes,
                meta={
                    "server": opts.name,
                    "transport": "stdio",
                    "command": opts.command[0],
                    "proxy_pid": os.getpid(),
                    "run_chosen_by": target.chosen_by,
                },
            )
            observer = McpObserver(
                recorder,
                server=opts.name,
                transport=Transport.STDIO,
                tokenizer=opts.tokenizer,
                timeout_s=opts.timeout_s,
            )
            observer.on_error = _say
            # the tokenizer takes ~0.5 s to load: load it while the server starts, not at the first tools/list
            threading.Thread(
                target=cls._warm, args=(observer, warm_after), name="promcp-proxy-tokenizer", daemon=True
            ).start()
            return cls(opts, observer, recorder, SYSTEM_CLOCK)
        except Exception as exc:  # a dataset folder we cannot write: relay anyway, say so once
            _say(f"not recording ({type(exc).__name__}: {exc}); the server is relayed unchanged")
            return None

    @staticmethod
    def _warm(observer: Any, after: threading.Event | None = None) -> None:
        if after is not None:
            after.wait(_HANDSHAKE_WAIT_S)
        try:
            observer.tokenizer()
        except Exception as exc:
            _say(f"tokenizer unavailable ({exc}); events are recorded without token counts")

    def spawned(self, start_ns: int, end_ns: int, pid: int) -> None:
        self.observer.spawned(self.at(start_ns), self.at(end_ns), attrs={"pid": pid})

    def spawn_failed(self, start_ns: int, end_ns: int, exc: OSError) -> None:
        from promcp.stages import Failure

        command = self.opts.command[0]
        failure = Failure.of(
            "spawn_failed", f"cannot start {command!r}: {exc.strerror or exc}", errno=exc.errno
        )
        try:
            self.observer.spawned(self.at(start_ns), self.at(end_ns), failure=failure)
            self.recorder.close(finalize_run=False)
            from promcp.proxy._group import finalize_later

            finalize_later(self.recorder.out, self.recorder.run_id)
        except Exception as err:
            _say(f"could not record the failed start ({type(err).__name__}: {err})")

    def hand_off(self, *, signalled: bool = False) -> None:
        """Unfinished token counting goes to a detached helper (:mod:`.handoff`): the client may kill us soon.
        ``signalled``: a SIGTERM / SIGINT came, a SIGKILL may follow within 0.1 s (Codex): hand off at once."""
        try:
            from promcp.proxy.mcp.handoff import hand_off

            # most sessions end with little left to count: finish it here if it takes a moment
            if not signalled:
                flusher = threading.Thread(target=self.recorder.flush, name="promcp-proxy-flush", daemon=True)
                flusher.start()
                flusher.join(_FLUSH_S)
            hand_off(self.recorder)
        except Exception as exc:
            _say(f"could not hand off the remaining events ({type(exc).__name__}: {exc})")

    def at(self, mono_ns: int) -> Any:
        return self.clock.at_mono(mono_ns)

    def attach(self, *taps: _Tap) -> None:
        from promcp.proxy.mcp.observer import Seen

        observer = self.observer
        decode = json_decoder()
        first_output: list[bool] = []

        def deliver(origin: str, frame: Frame) -> None:
            seen = Seen(
                frame.size, self.at(frame.first_ns), self.at(frame.last_ns), self.at(frame.forwarded_ns)
            )
            if origin == "server" and not first_output:
                first_output.append(True)
                observer.first_output(seen.first)
            if frame.data is None:
                observer.oversize(origin, seen, frame.edges, self.opts.max_frame)
                return
            line = frame.data.rstrip(b"\r\n")
            if not line.strip():
                return
            try:
                message = decode(line)
            except ValueError as exc:
                observer.unparsable(origin, seen, "invalid_json", f"not JSON ({exc}): {line[:80]!r}")
                return
            observer.message(origin, message, seen)

        attach_taps(taps, deliver)

    def start_ticker(self) -> threading.Event | None:
        """Close requests that passed ``--timeout`` while nothing else happens (a hung server)."""
        timeout = self.opts.timeout_s
        if timeout is None:
            return None
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(min(max(timeout / 4, 0.05), 1.0)):
                with contextlib.suppress(Exception):
                    self.observer.check_timeouts()

        threading.Thread(target=tick, name="promcp-proxy-timeouts", daemon=True).start()
        return stop

    def finish(
        self,
        returncode: int,
        exit_ns: int,
        *,
        first_output_ns: int | None,
        client_closed: bool,
        signalled: bool,
        dropped: int,
    ) -> None:
        from promcp.events import Status
        from promcp.stages import Failure

        observer = self.observer
        at = self.at(exit_ns)
        status = f"signal {-returncode}" if returncode < 0 else f"code {returncode}"
        try:
            if first_output_ns is None:
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
                    at,
                    Failure.of("server_exited", f"the server exited ({status})"),
                    {"exit_code": returncode},
                )
            if dropped:
                _say(f"{dropped} frame(s) could not be held for the recorder and were not recorded")
            self.hand_off()
            self.recorder.close(finalize_run=False)  # every event is in the journal part (or handed off) now
            from promcp.proxy._group import finalize_later

            finalize_later(self.recorder.out, self.recorder.run_id)
        except Exception as exc:
            _say(f"could not finish the recording ({type(exc).__name__}: {exc})")


def main_exit(opts: StdioOptions) -> None:
    """Run the relay and leave the process the way the server left (used by the CLI)."""
    code = run_stdio(opts)
    sys.stderr.flush()
    os._exit(_exit_like(code)) if code < 0 else os._exit(code)
