"""One bounded queue and one thread: the worker the recording sources hand their slow work to.

The recorder's deferred token counting (:meth:`promcp.recorder.Recorder.emit_later`), the LLM proxy's finished
exchanges, the HTTP MCP proxy's exchange hooks and ``promcp collect``'s spooled batches all go through a
:class:`BoundedWorker` — the shape of opentelemetry-python's ``BatchSpanProcessor``: a queue bounded in items *and*
bytes in front of one thread, with one policy for each of the three things that can go wrong.

**A full queue.** :meth:`BoundedWorker.put` either waits for room (``full="block"``: back-pressure on the caller,
for a caller that may wait) or refuses at once (``full="refuse"``: returns False and counts the item ``refused``;
the caller either answers "try again" (a 503) or reports the item lost). An item larger than
``max_bytes`` is taken when the queue is empty, so one big body is never refused for ever. ``force=True`` skips the
bounds for the few small control items a protocol cannot do without (an exchange's end). :meth:`BoundedWorker.has_room`
asks first, for a caller that must do work before it queues and serializes its own puts (``promcp collect`` writes a
batch to its spool only when the queue will take it).

**A failing item.** An exception from ``handle`` (or ``on_tick``) is counted in ``failed``, logged on
``logging.getLogger("promcp.bounded_worker")`` with the worker's name, and passed to ``on_error`` (the site turns it
into an event, a 503, a summary line); the thread goes on with the next item: it never dies of one item.

**Shutdown.** :meth:`BoundedWorker.close` stops taking items, lets the thread drain the queue and run ``on_stop``,
and waits at most ``timeout`` seconds. What it did not reach by then is taken out of the queue, counted ``lost``,
logged, and returned to the caller, who reports it: nothing queued disappears without a word.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = ["BoundedWorker", "FullPolicy", "WorkerStats"]

log = logging.getLogger(__name__)

T = TypeVar("T")
FullPolicy = Literal["block", "refuse"]


@dataclass
class WorkerStats:
    """What a worker did (read by the sites' summaries and tests)."""

    handled: int = 0  # items whose handler returned
    failed: int = 0  # items (or ticks) whose handler raised: counted, logged, passed to on_error
    refused: int = 0  # put() refused: the queue was full (full="refuse") or closed
    lost: int = 0  # items still queued when close() gave up waiting: returned to the caller, logged
    peak_items: int = 0
    peak_bytes: int = 0


class BoundedWorker(Generic[T]):
    """A queue of at most ``max_items`` items and ``max_bytes`` bytes (``None``: no bound of that kind) in front of
    one daemon thread that calls ``handle(item)`` for each, in order.

    ``tick_s``: also call ``on_tick()`` after ``tick_s`` seconds without an item (and after every item), for work
    that is due by time (timeouts, rotations). ``on_error(item, exc)``: the site's report of a failed item (``item``
    is None for a failed tick). ``on_stop()``: runs on the thread once the queue is drained at :meth:`close`.
    ``start=False``: the thread starts at :meth:`start` (a test fills the queue first).
    """

    def __init__(
        self,
        handle: Callable[[T], None],
        *,
        name: str,
        max_items: int | None,
        max_bytes: int | None = None,
        full: FullPolicy = "block",
        tick_s: float | None = None,
        on_tick: Callable[[], None] | None = None,
        on_error: Callable[[T | None, BaseException], None] | None = None,
        on_stop: Callable[[], None] | None = None,
        start: bool = True,
    ) -> None:
        self.name = name
        self.max_items, self.max_bytes, self.full = max_items, max_bytes, full
        self.tick_s = tick_s
        self._handle, self._on_tick, self._on_error, self._on_stop = handle, on_tick, on_error, on_stop
        self.stats = WorkerStats()
        self._items: deque[tuple[T, int]] = deque()
        self._bytes = 0  # queued, plus the item being handled (released once handled)
        self._busy = 0  # items taken by the thread and not done yet (0 or 1)
        self._cond = threading.Condition()
        self._closing = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False
        if start:
            self.start()

    def start(self) -> BoundedWorker[T]:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    # -- the callers' side ------------------------------------------------------------------------------------------

    @property
    def backlog_items(self) -> int:
        """Items queued or being handled."""
        with self._cond:
            return len(self._items) + self._busy

    @property
    def backlog_bytes(self) -> int:
        """Bytes of the items queued or being handled (as their ``put`` said)."""
        with self._cond:
            return self._bytes

    def _room(self, size: int) -> bool:
        if not self._items and not self._busy:
            return True  # an empty queue takes any one item: a body over max_bytes is not refused for ever
        if self.max_items is not None and len(self._items) + self._busy >= self.max_items:
            return False
        return self.max_bytes is None or self._bytes + size <= self.max_bytes

    def has_room(self, size: int = 0) -> bool:
        """Whether :meth:`put` would take an item of ``size`` bytes now without waiting (False once closed). Only a
        check: it stays true until the put only when the caller's puts are serialized (the thread only frees room)."""
        with self._cond:
            return not self._closing and self._room(size)

    def put(self, item: T, size: int = 0, *, force: bool = False, timeout: float | None = None) -> bool:
        """Queue ``item`` (``size``: its bytes, held until it is handled). False: refused, the queue is full
        (``full="refuse"``, or ``timeout`` passed while blocking) or closed; the caller reports it."""
        with self._cond:
            if not force and not self._closing and not self._room(size):
                if self.full == "refuse":
                    self.stats.refused += 1
                    return False
                deadline = None if timeout is None else time.monotonic() + timeout
                while not self._closing and not self._room(size):
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        self.stats.refused += 1
                        return False
                    self._cond.wait(left)
            if self._closing:
                self.stats.refused += 1
                return False
            self._items.append((item, size))
            self._bytes += size
            self.stats.peak_items = max(self.stats.peak_items, len(self._items) + self._busy)
            self.stats.peak_bytes = max(self.stats.peak_bytes, self._bytes)
            self._cond.notify_all()
            return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every item queued so far is handled (False: ``timeout`` passed first)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._items or self._busy:
                if not self._thread.is_alive():
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is not None else 0.5)
            return True

    def close(self, timeout: float | None = None) -> list[T]:
        """Stop taking items, drain the queue (then ``on_stop``) within ``timeout`` seconds, and return the items not
        handled by then — counted ``lost`` and logged: the caller reports them."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._started:
            self._stopped.wait(timeout)
        with self._cond:
            left = [item for item, _ in self._items]
            self._items.clear()
            self._cond.notify_all()
        if left:
            self.stats.lost += len(left)
            log.warning(
                "%s: %d queued item(s) not handled before the shutdown deadline", self.name, len(left)
            )
        return left

    @property
    def closed(self) -> bool:
        return self._closing

    # -- the thread -------------------------------------------------------------------------------------------------

    def _failed(self, item: T | None, exc: BaseException) -> None:
        self.stats.failed += 1
        log.warning("%s: could not handle an item: %s: %s", self.name, type(exc).__name__, exc)
        if self._on_error is not None:
            try:
                self._on_error(item, exc)
            except Exception as again:  # the report failed too: logged, the thread goes on
                log.warning("%s: could not report it either: %s: %s", self.name, type(again).__name__, again)

    def _tick(self) -> None:
        if self._on_tick is None:
            return
        try:
            self._on_tick()
        except Exception as exc:
            self._failed(None, exc)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._items and not self._closing:
                        if not self._cond.wait(self.tick_s):
                            break  # quiet for tick_s: a tick
                    if not self._items:
                        if self._closing:
                            break
                        item = None
                    else:
                        item, size = self._items.popleft()
                        self._busy = 1
                if item is None:
                    self._tick()
                    continue
                try:
                    self._handle(item)
                    self.stats.handled += 1
                except BaseException as exc:  # one item never kills the thread (MemoryError included)
                    self._failed(item, exc)
                finally:
                    del item
                    with self._cond:
                        self._busy = 0
                        self._bytes -= size
                        self._cond.notify_all()
                self._tick()
            if self._on_stop is not None:
                try:
                    self._on_stop()
                except Exception as exc:
                    self._failed(None, exc)
        finally:
            with self._cond:
                self._stopped.set()
                self._cond.notify_all()
