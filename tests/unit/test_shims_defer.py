"""Deferred emission of tools/call events (promcp.shims._deferred.run_later / drain): run when the caller's task next
yields, under the caller's promcp scope, and never lost when the event loop stops first."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from promcp.recorder import current_scope, scope
from promcp.shims import _deferred


def test_runs_after_the_caller_yields_under_its_scope() -> None:
    seen: list[tuple[str | None, str | None]] = []

    def note() -> None:
        sc = current_scope()
        seen.append((sc.task_id, sc.tool_call_id))

    async def caller() -> list[tuple[str | None, str | None]]:
        with scope(task_id="t1", tool_call_id="call_9"):
            _deferred.run_later(note)
            _deferred.run_later(note)  # one drain takes both
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
            _deferred.run_later(boom)
            _deferred.run_later(lambda: seen.append(1))

        loop.run_until_complete(schedule())  # completes without giving the scheduled drain an iteration
    finally:
        loop.close()
    _deferred.drain()  # what promcp.shims.flush() and uninstrument() do
    assert seen == [1]
    _deferred.drain()  # idempotent
    assert seen == [1]


def test_outside_an_event_loop_runs_now() -> None:
    seen: list[int] = []
    _deferred.run_later(lambda: seen.append(7))
    assert seen == [7]


def test_llm_events_after_pending_mcp_events_keep_journal_order(tmp_path: Path) -> None:
    """A host that calls a (sync) LLM right after a tools/call, without yielding: S3/S4 still precede S5/S6."""
    from promcp.recorder import Recorder
    from promcp.shims import _llm

    rec = Recorder(tmp_path / "t", fsync="never")
    order: list[str] = []
    real = rec.emit_later

    def mcp_build() -> None:
        return None

    def spy(build: Any) -> None:
        order.append("mcp" if build is mcp_build else "llm")
        real(build)

    rec.emit_later = spy  # type: ignore[method-assign]

    async def host() -> None:
        with rec.activate():
            _deferred.run_later(lambda: rec.emit_later(mcp_build))  # a tools/call's deferred emission
            _llm.record_chat(
                provider="p", request={"messages": [{"role": "user", "content": "q"}]}, response={}
            )

    asyncio.run(host())
    rec.close()
    assert order == ["mcp", "llm", "llm"]
