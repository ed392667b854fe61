"""The seam between sources and the store: a :class:`Recorder` takes events from any source and journals them.

Sources (the ``promcp run`` host, the ``promcp.instrument()`` shims, the importers) build :class:`~promcp.events.Event`
rows and hand them to the active recorder. The recorder

* fills identity columns (run, topology, source, benchmark) and the columns set by the surrounding :func:`scope`
  (task, round, server, tool call, model…) on fields the event left empty,
* assigns ``seq`` (the run's event order),
* truncates and redacts previews,
* hands the event to its :class:`~promcp.sinks.Sink` before returning (or, with :meth:`emit_later`, after the
  recorder's :class:`~promcp.bounded_worker.BoundedWorker` has computed what the hot path should not, such as token
  counts). The sink is the run's journal (:class:`~promcp.sinks.JournalSink`, the default) or, in tests, a list in
  memory (:class:`~promcp.sinks.MemorySink`),
* captures content (schemas, results, prompts, answers) once per hash: ``content="redacted"`` (the default) stores
  it with secrets removed, ``"full"`` verbatim, ``"none"`` not at all; each text is cut at ``max_content_bytes``
  (the cut is recorded with the blob). Token counts are always taken from the original text,
* finalizes the journal into the run's Parquet file on :meth:`close` (also on Ctrl-C/SIGTERM when the CLI runs it).

Importing this module imports neither pyarrow nor pandas (``tests/unit/test_recording_path.py``): a wrapped MCP
server's start-up must not wait for them.

Nothing here knows about MCP or LLMs; nothing in analysis knows about recorders.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, NamedTuple

from promcp._version import __version__
from promcp.bounded_worker import BoundedWorker
from promcp.content import (
    DEFAULT_CONTENT,
    DEFAULT_MAX_CONTENT_BYTES,
    ContentMode,
    content_mode,
    digest_of,
    stored_text,
)
from promcp.errors import PromcpError, StorageError
from promcp.events import Event, Topology
from promcp.redact import DEFAULT_PREVIEW_CHARS, preview, warm_scanner
from promcp.sinks import JournalSink, Sink
from promcp.store.journal import Blob, FsyncPolicy, JournalHeader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scope:
    """Columns that the code around an event knows better than the code that emits it."""

    benchmark: str | None = None
    task_id: str | None = None
    round: int | None = None
    server: str | None = None
    tool: str | None = None
    tool_call_id: str | None = None
    model: str | None = None
    provider: str | None = None
    transport: str | None = None
    trace_id: str | None = None
    parent_span_id: str | None = None


class Later(NamedTuple):
    """One :meth:`Recorder.emit_later` item: its place in the run's order, the scope it was emitted in, the build."""

    seq: int
    scope: Scope
    build: Callable[[], Event | None]


_SCOPE_FIELDS = tuple(f.name for f in fields(Scope))
_EMPTY_SCOPE = Scope()
_scope_var: contextvars.ContextVar[Scope] = contextvars.ContextVar("promcp_scope", default=_EMPTY_SCOPE)
_recorder_var: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "promcp_recorder", default=None
)
_global_recorder: Recorder | None = None


def current_scope() -> Scope:
    return _scope_var.get()


@contextlib.contextmanager
def scope(**values: Any) -> Iterator[Scope]:
    """Set scope columns for every event emitted inside the block (nested scopes override outer ones)."""
    unknown = set(values) - set(_SCOPE_FIELDS)
    if unknown:
        raise TypeError(f"unknown scope fields: {', '.join(sorted(unknown))}")
    new = replace(_scope_var.get(), **values)
    token = _scope_var.set(new)
    try:
        yield new
    finally:
        _scope_var.reset(token)


def current_recorder() -> Recorder | None:
    """The recorder events go to: the one activated in this context, else the process-wide one, else None."""
    return _recorder_var.get() or _global_recorder


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def sdk_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"promcp={__version__}"]
    for dist in ("mcp",):
        with contextlib.suppress(PackageNotFoundError):
            parts.append(f"{dist}={version(dist)}")
    return ";".join(parts)


def _reason(exc: StorageError) -> str:
    """The OS's reason inside a StorageError message (what follows the path, up to the first semicolon)."""
    text = str(exc)
    if exc.path and text.startswith(f"{exc.path}: "):
        text = text[len(exc.path) + 2 :]
    return text.split(";", 1)[0]


class Recorder:
    """Journals one run's events into the dataset directory ``out``.

    Use as a context manager (the run is finalized to Parquet on exit, whatever the exit), or call :meth:`close`.
    """

    def __init__(
        self,
        out: str | Path | None = None,
        *,
        topology: Topology | str = Topology.L_CUST,
        source: str = "live",
        run_id: str | None = None,
        benchmark: str | None = None,
        meta: dict[str, Any] | None = None,
        fsync: FsyncPolicy = "group",
        content: str = DEFAULT_CONTENT,
        max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
        capture_content: bool | None = None,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        part: str | None = None,
        sink: Sink | None = None,
    ) -> None:
        if out is None and sink is None:
            raise TypeError("Recorder needs a dataset folder (out) or a sink")
        self.out = Path(out) if out is not None else Path()
        self.topology = Topology(topology)
        self.source = source
        self.run_id = run_id or new_run_id()
        self.benchmark = benchmark
        self.meta: dict[str, Any] = dict(meta or {})
        #: ``full``, ``redacted`` or ``none`` (``capture_content=False``, the older spelling, means ``none``)
        self.content: ContentMode = "none" if capture_content is False else content_mode(content)
        self.max_content_bytes = max_content_bytes or None
        self.preview_chars = preview_chars
        self.sdk_versions = sdk_versions()
        #: ``part``: this process writes one part of a run that several processes record (promcp/store/parts.py)
        self.part = part
        header = JournalHeader(
            run_id=self.run_id,
            topology=self.topology.value,
            source=source,
            benchmark=benchmark,
            created_ns=time.time_ns(),
            promcp_version=__version__,
            meta=dict(meta or {}),
            content=self.content,
            max_content_bytes=self.max_content_bytes,
        )
        #: where the rows go: the run's journal (default) or any :class:`~promcp.sinks.Sink` (a MemorySink in tests)
        self.sink: Sink = sink if sink is not None else JournalSink(self.out, fsync=fsync, part=part)
        self.sink.open(header)
        self._seq = itertools.count()
        self._seq_lock = threading.Lock()
        self._blobs: set[str] = set()
        self._later: BoundedWorker[Later] | None = None
        self._later_lock = threading.Lock()
        self._worker_errors: list[BaseException] = []
        self._drain = threading.Event()
        self._last_activity = 0.0
        self._pid = os.getpid()
        self.events = 0
        #: ``emit_later`` events that were never journaled (still queued when close() gave up waiting)
        self.lost = 0
        self._listener: Callable[[Event], None] | None = None
        self.result_path: Path | None = None
        self._closed = False
        # previews are redacted: the secret scanner loads meanwhile (promcp/redact.py)
        if self.content != "none":
            warm_scanner()

    @property
    def journal_path(self) -> Path:
        """Where the sink writes (the run's journal file, or its part)."""
        return self.sink.path

    # -- emitting -----------------------------------------------------------------------------------------------

    def next_seq(self) -> int:
        with self._seq_lock:
            return next(self._seq)

    def _complete(self, event: Event, sc: Scope, seq: int | None) -> Event:
        changes: dict[str, Any] = {
            "run_id": self.run_id,
            "topology": self.topology,
            "source": event.source if event.source != "live" else self.source,
            "seq": self.next_seq() if seq is None else seq,
        }
        if event.benchmark is None:
            changes["benchmark"] = sc.benchmark or self.benchmark
        for name in _SCOPE_FIELDS:
            if name == "benchmark":
                continue
            value = getattr(sc, name)
            if value is not None and getattr(event, name) is None:
                changes[name] = value
        if event.sdk_versions is None and self.source == "live":
            changes["sdk_versions"] = self.sdk_versions
        if self.content == "none":  # no text at all: the previews are conversation text too
            changes["req_preview"] = changes["resp_preview"] = None
        else:
            if event.req_preview is not None:
                changes["req_preview"] = preview(event.req_preview, self.preview_chars)
            if event.resp_preview is not None:
                changes["resp_preview"] = preview(event.resp_preview, self.preview_chars)
        return event.replace(**changes)

    def _check_open(self) -> None:
        if self._closed:
            raise PromcpError(f"recorder for run {self.run_id} is closed")

    def emit(self, event: Event) -> Event:
        """Complete ``event`` from the recorder and the current scope, journal it, and return the stored row."""
        self._check_open()
        final = self._complete(event, current_scope(), None)
        self._journal([final])
        return final

    def emit_many(self, events: Sequence[Event]) -> list[Event]:
        """:meth:`emit` for a batch, journaled with one write (a receiver's request, say)."""
        self._check_open()
        sc = current_scope()
        rows = [self._complete(e, sc, None) for e in events]
        self._journal(rows)
        return rows

    def append(self, rows: Sequence[Event]) -> None:
        """Journal rows that are already complete, as they are (another recorder's rows, carried over OTLP:
        their run id, ``seq`` and every column stay). The caller makes sure they belong to this run."""
        self._check_open()
        self._journal(rows)

    def settle(self, rows: Sequence[Event]) -> None:
        """``rows`` (returned by :meth:`emit` earlier: a call's request row written while it was in flight) are
        superseded by rows emitted since: readers drop them. Written after the new rows, so a kill in between
        leaves both rather than neither."""
        self._check_open()
        if rows:
            self.sink.settle([row.seq for row in rows])
            self.events -= len(rows)

    def on_journal(self, listener: Callable[[Event], None] | None) -> None:
        """Call ``listener`` with every row once it is journaled (None removes it). promcp's span exporter uses
        it to carry the rows to ``promcp collect``; a listener must be quick and must not raise."""
        self._listener = listener

    def _journal(self, rows: Sequence[Event]) -> None:
        self.sink.append(rows)
        self.events += len(rows)
        listener = self._listener
        if listener is not None:
            for row in rows:
                listener(row)

    #: ``emit_later`` work waits until the recording side has been quiet this long…
    LATER_IDLE_S = 0.05
    #: …or until this many events are waiting (bounds memory and what a SIGKILL can lose)
    LATER_BACKLOG = 1000
    #: the most ``emit_later`` events queued at once: past it ``emit_later`` waits (back-pressure on the source)
    LATER_MAX = 10_000
    #: how long :meth:`close` waits for queued ``emit_later`` work before it reports the rest lost
    CLOSE_TIMEOUT_S = 60.0

    def emit_later(self, build: Callable[[], Event | None]) -> None:
        """Journal the event ``build()`` returns, computed on a worker thread, off the caller's hot path.

        The scope and the event order are taken now, so the row looks as if it had been emitted here. The worker
        builds events when the recording side has been idle for :attr:`LATER_IDLE_S` (an agent waiting for its LLM,
        say), when :attr:`LATER_BACKLOG` events are waiting, or on :meth:`flush` / :meth:`close`: counting tokens
        of a 10 KB result while a tight loop of tool calls runs would otherwise compete with it for the CPU and the
        GIL. A SIGKILL can therefore lose the events of the current burst (at most the backlog), never finished
        ones that were journaled. The queue holds at most :attr:`LATER_MAX` events; past it the caller waits.
        """
        self._check_open()
        self._last_activity = time.monotonic()
        item = Later(self.next_seq(), current_scope(), build)
        self._later_worker().put(item)

    def _later_worker(self) -> BoundedWorker[Later]:
        with self._later_lock:
            if self._later is None:
                self._later = BoundedWorker(
                    self._build_later,
                    name=f"promcp-recorder-{self.run_id}",
                    max_items=self.LATER_MAX,
                    full="block",
                    on_error=self._later_failed,
                )
            return self._later

    def _wait_for_quiet(self) -> None:
        worker = self._later
        while not self._drain.is_set() and (worker is None or worker.backlog_items < self.LATER_BACKLOG):
            quiet = time.monotonic() - self._last_activity
            if quiet >= self.LATER_IDLE_S:
                return
            self._drain.wait(self.LATER_IDLE_S - quiet)

    def _build_later(self, item: Later) -> None:
        self._wait_for_quiet()
        event = item.build()
        if event is not None:
            self._journal([self._complete(event, item.scope, item.seq)])

    def _later_failed(self, _item: Later | None, exc: BaseException) -> None:
        """A broken builder: counted (``worker_errors``) and logged by the worker, which goes on."""
        self._worker_errors.append(exc)

    def flush(self) -> None:
        """Wait until every :meth:`emit_later` event is journaled (building them now, without waiting for quiet)."""
        if self._later is not None:
            self._drain.set()
            try:
                self._later.flush()
            finally:
                self._drain.clear()

    @property
    def capture_content(self) -> bool:
        return self.content != "none"

    def put_text(self, kind: str, text: str) -> str:
        """Capture ``text`` once per run under the hash of the original (as :attr:`content` says); return the hash."""
        digest, size = digest_of(text)
        if self.content != "none" and digest not in self._blobs:
            self._blobs.add(digest)
            self.sink.append_blob(self._blob(digest, kind, text, size))
        return digest

    def _blob(self, digest: str, kind: str, text: str, size: int) -> Blob:
        stored, truncated = stored_text(text, size, self.content, self.max_content_bytes)
        return Blob(
            blob=digest, kind=kind, text=stored, mode=self.content, original_bytes=size, truncated=truncated
        )

    # -- lifecycle ----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def activate(self) -> Iterator[Recorder]:
        """Make this the recorder for events emitted in this context (and its child tasks)."""
        token = _recorder_var.set(self)
        try:
            yield self
        finally:
            _recorder_var.reset(token)

    def install_global(self) -> None:
        """Make this the process-wide recorder (used by ``promcp.instrument()``, whose hooks run in any thread)."""
        global _global_recorder
        _global_recorder = self

    def close(self, *, finalize_run: bool = True) -> Path | None:
        """Stop accepting events, flush the worker, close the journal and (by default) finalize it to Parquet."""
        global _global_recorder
        if self._closed:
            return self.result_path
        if os.getpid() != self._pid:  # a forked child must not finalize its parent's journal
            return None
        if self._later is not None:
            self._drain.set()
            left = self._later.close(timeout=self.CLOSE_TIMEOUT_S)
            if left:
                self.lost += len(left)
                log.warning(
                    "run %s: %d event(s) still being computed at close were not recorded",
                    self.run_id,
                    len(left),
                )
        self._closed = True
        self.sink.close()
        if _global_recorder is self:
            _global_recorder = None
        if finalize_run:
            stopped = self.sink.error
            try:
                self.result_path = self.sink.finalize()
            except StorageError as exc:
                if stopped is None:
                    raise
                raise StorageError(
                    f"recording stopped: {_reason(stopped)}; the {self.events} event(s) recorded before are kept "
                    f"in the journal, which could not be finalized either ({_reason(exc)}); make room, then run "
                    f"`promcp finalize {self.out}`",
                    path=self.journal_path,
                    errno=stopped.errno,
                ) from None
            if stopped is not None:
                raise StorageError(
                    f"recording stopped: {_reason(stopped)}; the {self.events} event(s) recorded before were "
                    f"finalized into {self.result_path}",
                    path=self.journal_path,
                    errno=stopped.errno,
                )
        return self.result_path

    def discard(self) -> None:
        """Close without finalizing and remove the journal: for a run that recorded no event (no empty file)."""
        self.close(finalize_run=False)
        self.sink.discard()

    @property
    def worker_errors(self) -> list[BaseException]:
        return list(self._worker_errors)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
