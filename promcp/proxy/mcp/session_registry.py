"""The HTTP MCP proxy's sessions: which session an exchange belongs to, and the run each session writes.

A session is found by the ``Mcp-Session-Id`` header (streamable HTTP), by the ``sessionId`` / ``session_id`` query
parameter a legacy SSE server named in its ``endpoint`` event, or, for a request that names none (the
``initialize`` that opens a session, a ``server/discover`` probe, a stateless server), it is the session being
opened: a response that names a new ``Mcp-Session-Id`` binds that session to it (:mod:`.http_exchanges` decides
when). Each session has its :class:`~promcp.proxy.mcp.observer.McpObserver` and writes its own run (one run per
session), unless a run id was given: then every session writes one part of that run.

A session ends with a ``DELETE``, with its legacy SSE stream, with a 404 for its id (the server forgot it), when more
than ``MAX_SESSIONS`` are open (the least recently used one), or when the proxy stops; its run is then finalized.
An exchange that names a session after it ended (a ``notifications/cancelled`` the client sent as it gave up,
arriving after its DELETE) writes one more part of that session's run, merged into its run file when the exchange
ends — never a run of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.events import Status, Topology, Transport
from promcp.proxy.mcp.observer import McpObserver
from promcp.recorder import Recorder, new_run_id
from promcp.stages import Failure, Instant
from promcp.tokenizers import CachedTokenizer

__all__ = ["ENDED_KEPT", "MAX_SESSIONS", "SOURCE", "Session", "SessionRegistry", "digest"]

log = logging.getLogger(__name__)


def problem(text: str) -> None:
    """A recording problem of the HTTP MCP proxy, on the one logging channel (``promcp proxy mcp`` prints it as a
    ``warning:`` line)."""
    log.warning("promcp proxy: %s", text)


SOURCE = "proxy:mcp"
#: sessions kept open at once; past it the least recently used one is ended (bounds memory)
MAX_SESSIONS = 256
#: ended sessions whose run a late message (a notifications/cancelled sent after the session ended) still finds
ENDED_KEPT = 1024


def digest(session_id: str) -> str:
    """What is recorded of a session id (a credential of sorts: whoever has it can use the session)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:12]


@dataclass
class Session:
    observer: McpObserver
    recorder: Recorder
    own_recorder: bool
    key: tuple[str, str] | None = None
    first_request: Instant | None = None
    born_here: bool = True  # the proxy saw it start (else: first seen by an id it did not hand out)
    initializing: bool = False
    ended: bool = False
    used: float = field(default_factory=time.monotonic)
    #: an exchange naming a session that had ended: written into that session's run, then ended
    late: bool = False


class SessionRegistry:
    """The open sessions by key, the one being opened, the ended ones' runs; and the recorders they write to."""

    def __init__(
        self,
        *,
        out: Path,
        name: str,
        run_id: str | None,
        tokenizer: Callable[[], CachedTokenizer],
        content: str,
        max_content_bytes: int | None,
        timeout_s: float | None,
        meta: Mapping[str, Any],
    ) -> None:
        self.out, self.name, self.run_id = out, name, run_id
        self.tokenizer, self.content, self.timeout_s = tokenizer, content, timeout_s
        self.max_content_bytes = max_content_bytes
        self.meta = dict(meta)
        self.sessions_seen = 0
        self.runs: list[str] = []
        self.bound: dict[tuple[str, str], Session] = {}
        self.live: list[Session] = []
        self._unbound: Session | None = None
        self._shared: Recorder | None = None
        self._ended: OrderedDict[tuple[str, str], str] = OrderedDict()  # an ended session's key → its own run

    def find(self, key: tuple[str, str], transport: Transport) -> Session:
        """The session an exchange names: open, ended (:meth:`late`), or first seen now."""
        return self.bound.get(key) or self.late(key, transport) or self.new(transport, key, born_here=False)

    def check_timeouts(self) -> None:
        for session in self.live:
            with contextlib.suppress(Exception):
                session.observer.check_timeouts()

    def _recorder(self) -> tuple[Recorder, bool]:
        """The recorder a new session writes to: its own run, or (a run id was given) one part of that run."""
        if self.run_id is not None:
            if self._shared is None:
                self._shared = self._open(self.run_id)
            return self._shared, False
        return self._open(new_run_id()), True

    def _open(self, run_id: str, *, new_run: bool = True) -> Recorder:
        """A recorder writing one part of ``run_id`` (``new_run``: a run this proxy counts as its own)."""
        if new_run:
            self.runs.append(run_id)
        return Recorder(
            self.out,
            topology=Topology.C_OTS,
            source=SOURCE,
            run_id=run_id,
            part=f"mcp-{self.name}",
            content=self.content,
            max_content_bytes=self.max_content_bytes,
            meta=self.meta,
        )

    def _observer(self, recorder: Recorder, transport: Transport) -> McpObserver:
        observer = McpObserver(
            recorder,
            server=self.name,
            transport=transport,
            tokenizer=self.tokenizer,
            timeout_s=self.timeout_s,
            relay_ms=False,
        )
        # the observer's one line (recording stopped, a tokenizer fallback) goes to the logging channel
        observer.on_error = problem
        return observer

    def new(self, transport: Transport, key: tuple[str, str] | None, *, born_here: bool = True) -> Session:
        recorder, own = self._recorder()
        observer = self._observer(recorder, transport)
        session = Session(observer, recorder, own, born_here=born_here)
        self.sessions_seen += 1
        self.live.append(session)
        if key is not None:
            self.bind(session, key)
        if len(self.live) > MAX_SESSIONS:
            oldest = min(self.live, key=lambda s: s.used)
            self.finish(
                oldest,
                observer.clock.now(),
                Failure(Status.CANCELLED, "session_evicted", "the proxy had too many sessions open"),
            )
        return session

    def late(self, key: tuple[str, str], transport: Transport) -> Session | None:
        """A session for one exchange that names a session which already ended in its own run (a client's
        ``notifications/cancelled`` that comes after the DELETE): it writes one more part of that run (merged into
        its run file when the exchange ends) instead of opening a run of its own."""
        run_id = self._ended.get(key)
        if run_id is None:
            return None
        recorder = self._open(run_id, new_run=False)
        observer = self._observer(recorder, transport)
        session = Session(observer, recorder, True, key=key, born_here=False, late=True)
        self.live.append(session)
        return session

    def bind(self, session: Session, key: tuple[str, str]) -> None:
        session.key = key
        self.bound[key] = session
        if self._unbound is session:
            self._unbound = None

    def opening(self, initializes: bool) -> Session:
        """The session a request that names none belongs to: the one being opened (a fresh one for a second
        ``initialize`` while the first is still unanswered: two clients starting at once)."""
        current = self._unbound
        if current is None or current.ended or (initializes and current.initializing):
            current = self.new(Transport.STREAMABLE_HTTP, None)
            self._unbound = current
        if initializes:
            current.initializing = True
        return current

    def finish(self, session: Session, at: Instant, failure: Failure) -> None:
        """End a session: what it still waits for gets ``failure``; its own run is finalized."""
        if session.ended:
            return
        session.ended = True
        with contextlib.suppress(ValueError):
            self.live.remove(session)
        if session.key is not None and self.bound.get(session.key) is session:
            del self.bound[session.key]
        if self._unbound is session:
            self._unbound = None
        session.observer.ended(at, failure)
        if session.own_recorder and session.key is not None and not session.late:
            self._ended[session.key] = session.recorder.run_id
            while len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
        if session.own_recorder:
            try:
                session.recorder.close()
            except Exception as exc:
                problem(f"could not finish run {session.recorder.run_id} ({type(exc).__name__}: {exc})")

    def stop(self, at: Instant) -> None:
        gone = Failure(Status.CANCELLED, "proxy_stopped", "the proxy stopped before the answer")
        for session in list(self.live):
            self.finish(session, at, gone)
        if self._shared is not None:
            self._shared.close()
