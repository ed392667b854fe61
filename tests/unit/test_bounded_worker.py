"""The one bounded worker every recording source uses (promcp/bounded_worker.py): bounded in items and bytes, a full
queue refuses or waits as the site chose, one failing item is counted and logged and never stops the thread, and a
shutdown that runs out of time returns what it did not handle, counted lost."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from promcp.bounded_worker import BoundedWorker


def test_a_full_queue_refuses_by_items_and_by_bytes_and_an_empty_one_takes_any_item() -> None:
    done: list[int] = []
    worker: BoundedWorker[int] = BoundedWorker(
        done.append, name="t", max_items=2, max_bytes=100, full="refuse", start=False
    )
    assert worker.put(1, 500)  # over max_bytes, but the queue is empty: taken, never refused for ever
    assert not worker.put(2, 1)  # 500 bytes held: no room
    assert worker.backlog_bytes == 500 and worker.stats.refused == 1
    worker.start()
    assert worker.flush(timeout=5)
    assert worker.backlog_bytes == 0  # released once handled
    assert worker.put(5) and worker.put(6)
    assert worker.close(timeout=5) == []
    assert 1 in done and 5 in done and 6 in done and worker.stats.peak_bytes >= 500


def test_a_full_queue_that_blocks_applies_back_pressure_until_there_is_room() -> None:
    gate = threading.Event()
    done: list[int] = []

    def slow(item: int) -> None:
        gate.wait(5)
        done.append(item)

    worker: BoundedWorker[int] = BoundedWorker(slow, name="t", max_items=1, full="block")
    assert worker.put(1)
    assert not worker.put(2, timeout=0.05)  # no room within the timeout: refused, counted
    started = time.monotonic()
    threading.Timer(0.1, gate.set).start()
    assert worker.put(3)  # waits until the worker has taken item 1 off the queue
    assert time.monotonic() - started >= 0.05
    worker.close(timeout=5)
    assert done == [1, 3] and worker.stats.refused == 1


def test_a_failing_item_is_counted_logged_and_reported_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reported: list[tuple[int | None, str]] = []

    def handle(item: int) -> None:
        if item == 2:
            raise ValueError("bad item")
        if item == 3:
            raise MemoryError

    caplog.set_level(logging.WARNING, logger="promcp.bounded_worker")
    worker: BoundedWorker[int] = BoundedWorker(
        handle, name="w", max_items=10, on_error=lambda item, exc: reported.append((item, type(exc).__name__))
    )
    for i in range(1, 5):
        worker.put(i)
    assert worker.close(timeout=5) == []
    assert worker.stats.handled == 2 and worker.stats.failed == 2
    assert reported == [(2, "ValueError"), (3, "MemoryError")]
    assert any("w: could not handle an item: ValueError: bad item" in r.message for r in caplog.records)


def test_close_drains_within_its_deadline_and_returns_what_it_did_not_handle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()
    worker: BoundedWorker[int] = BoundedWorker(lambda _i: gate.wait(5), name="slow", max_items=None)
    for i in range(4):
        worker.put(i, 10)
    time.sleep(0.05)  # the worker holds item 0
    caplog.set_level(logging.WARNING, logger="promcp.bounded_worker")
    left = worker.close(timeout=0.1)
    gate.set()
    assert left == [1, 2, 3] and worker.stats.lost == 3
    assert not worker.put(9)  # closed: refused
    assert any("3 queued item(s) not handled" in r.message for r in caplog.records)


def test_ticks_run_when_quiet_and_after_each_item_and_on_stop_runs_on_the_thread_last() -> None:
    seen: list[str] = []
    worker: BoundedWorker[str] = BoundedWorker(
        seen.append,
        name="tick-worker",
        max_items=None,
        tick_s=0.02,
        on_tick=lambda: seen.append("tick"),
        on_stop=lambda: seen.append("stop in " + threading.current_thread().name),
    )
    time.sleep(0.1)
    worker.put("a")
    worker.close(timeout=5)
    assert seen[-1] == "stop in tick-worker"
    assert "tick" in seen[: seen.index("a")]  # quiet ticks before the item
    assert seen[seen.index("a") + 1] == "tick"  # and one after it


def test_no_source_hand_rolls_a_queue_and_worker_of_its_own() -> None:
    """The recorder, collect and both proxies used to carry four queue + thread pairs with four policies: the one
    bounded worker (a deque under a condition) is the only one left, and no module imports ``queue`` to start another
    (it would come back unbounded and unpoliced)."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    found = []
    for folder in ("promcp", "collectors", "analysis"):
        for path in (repo / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if any(n == "queue" or n.startswith("queue.") for n in names):
                    found.append(str(path.relative_to(repo)))
    assert found == [], found
    collect = (repo / "promcp" / "collect.py").read_text(encoding="utf-8")
    assert "BoundedWorker(" in collect  # collect's spooled batches go through it too


def test_has_room_says_whether_a_put_would_be_taken_now_and_is_false_once_closed() -> None:
    """``promcp collect`` asks before it writes a batch to its spool, so what it spools is queued (or answered 503
    without being written)."""
    worker: BoundedWorker[int] = BoundedWorker(
        lambda _i: None, name="t", max_items=1, full="refuse", start=False
    )
    assert worker.has_room(10**9)  # an empty queue takes any one item
    assert worker.put(1) and not worker.has_room() and not worker.put(2)
    worker.start()
    assert worker.flush(timeout=5) and worker.has_room()
    worker.close(timeout=5)
    assert not worker.has_room() and not worker.put(3)
