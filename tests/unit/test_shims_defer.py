"""Deferred hand-off of tools/call events (promcp.shims._mcp._run_later / drain): run when the caller's task next
yields, under the caller's promcp scope, and never lost when the event loop stops first."""

from __future__ import annotations

import asyncio

from promcp.recorder import current_scope, scope
from promcp.shims import _mcp


def test_runs_after_the_caller_yields_under_its_scope() -> None:
    seen: list[tuple[str | None, str | None]] = []

    def note() -> None:
        sc = current_scope()
        seen.append((sc.task_id, sc.tool_call_id))

    async def caller() -> list[tuple[str | None, str | None]]:
        with scope(task_id="t1", tool_call_id="call_9"):
            _mcp._run_later(note)
            _mcp._run_later(note)  # one drain takes both
        before = list(seen)  # still on the caller's path: nothing ran yet
        await asyncio.sleep(0)
        return before

    assert asyncio.run(caller()) == []
    assert seen == [("t1", "call_9"), ("t1", "call_9")]
    assert current_scope().task_id is None  # the drain did not leak the scope


def test_nothing_lost_when_the_loop_stops_first_and_failures_contained() -> None:
    seen: list[int] = []

    def boom() -> None:
        raise RuntimeError("forced failure inside the hook")

    loop = asyncio.new_event_loop()
    try:

        async def schedule() -> None:
            _mcp._run_later(boom)
            _mcp._run_later(lambda: seen.append(1))

        loop.run_until_complete(schedule())  # completes without giving the scheduled drain an iteration
    finally:
        loop.close()
    _mcp.drain()  # what promcp.shims.flush() and uninstrument() do
    assert seen == [1]
    _mcp.drain()  # idempotent
    assert seen == [1]


def test_outside_an_event_loop_runs_now() -> None:
    seen: list[int] = []
    _mcp._run_later(lambda: seen.append(7))
    assert seen == [7]
