"""Deferred hand-off of tools/call events (promcp.shims._mcp._run_later / drain): run when the caller's task next
yields, in the caller's context, and never lost when the event loop stops first."""

from __future__ import annotations

import asyncio
import contextvars

from promcp.shims import _mcp

_var: contextvars.ContextVar[str] = contextvars.ContextVar("test_defer_var", default="unset")


def test_runs_after_the_caller_yields_in_its_context() -> None:
    seen: list[str] = []

    async def caller() -> list[str]:
        _var.set("caller-scope")
        _mcp._run_later(lambda: seen.append(_var.get()))
        before = list(seen)  # still on the caller's path: nothing ran yet
        await asyncio.sleep(0)
        return before

    assert asyncio.run(caller()) == []
    assert seen == ["caller-scope"]


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
