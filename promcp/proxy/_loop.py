"""The event loop the HTTP proxies run on: uvloop when it is installed (the default on Linux and macOS), else
asyncio's own. ``PROMCP_EVENT_LOOP=asyncio`` chooses asyncio's loop whatever is installed.

A proxy's added latency on a small request is mostly event-loop wake-ups (read, parse, write, twice per hop), and
uvloop's libuv-based loop makes each cheaper; docs/proxy.md, "Overhead", measures both loops.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_name", "new_event_loop", "run"]

T = TypeVar("T")


def _factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    if os.environ.get("PROMCP_EVENT_LOOP", "").strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return "uvloop", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: the loop :func:`run` and :func:`new_event_loop` use."""
    return _factory()[0]


def new_event_loop() -> asyncio.AbstractEventLoop:
    return _factory()[1]()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the chosen loop."""
    with asyncio.Runner(loop_factory=_factory()[1]) as runner:
        return runner.run(main)
