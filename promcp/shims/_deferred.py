"""Deferred emission of events to the recorder: run when the caller's task next yields, in the order calls ended.

Waking the recorder's worker while the caller is still returning through the SDK (result validation, its own
code) makes the two threads contend for the GIL on the call's path (~100 µs of caller CPU per call measured in
tests/perf/bench_instrument.py); one loop iteration later the caller is usually waiting on I/O. Every emitter of the
shims (the MCP hooks, the LLM wrappers) calls :func:`drain` before it emits, so the journal order is kept. Only the
scope (a frozen value) is captured, not a copy of the whole context: copying contexts cost ~15 µs per call here.
:func:`drain` (called by ``promcp.flush()`` and ``uninstrument()``) runs whatever is still queued, so nothing is
lost when the loop stops first.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from promcp.recorder import Scope, current_scope, scope
from promcp.shims._patch import guard

_SCOPE_FIELDS = tuple(f.name for f in fields(Scope))
_later: collections.deque[tuple[Scope, Callable[[], Any]]] = collections.deque()
_drain_context = contextvars.Context()  # drain runs here: no per-call context copy on the call's path


def run_later(fn: Callable[[], Any]) -> None:
    """Run ``fn`` when the caller's task next yields to the event loop, under the caller's current scope."""
    _later.append((current_scope(), fn))
    if len(_later) == 1:  # else a drain is already scheduled (or running) and will take this one too
        try:
            asyncio.get_running_loop().call_soon(drain, context=_drain_context)
        except RuntimeError:  # no asyncio loop (trio backend, or called outside a loop): run now
            drain()


def pending() -> bool:
    return bool(_later)


def _in_scope(sc: Scope, fn: Callable[[], Any]) -> None:
    with scope(**{name: getattr(sc, name) for name in _SCOPE_FIELDS}):
        fn()


def drain() -> None:
    """Run every deferred emission now (idempotent, any thread)."""
    while True:
        try:
            sc, fn = _later.popleft()
        except IndexError:
            return
        guard(_in_scope, sc, fn)
