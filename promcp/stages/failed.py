"""A step that failed as a whole, without tokens: one event of its stage carrying the failure.

* a task that never reached its first LLM call (S1 ``task_not_started``), ran past its time (S6 ``task_timeout``) or
  was interrupted (S6 ``interrupted``): the task's start → the failure, no latency (``timed=False``: the interval
  is the task's, not one call's);
* a request the LLM proxy could not read (S1 ``unparsed_request``): forwarded unchanged, timed from its arrival to
  the end of its response.

``status`` / ``error_type`` come from the :class:`~promcp.stages.Failure`, its message is the preview.
"""

from __future__ import annotations

from typing import Any

from promcp.events import Event, Stage, TimingQuality
from promcp.stages._common import Failure, outcome
from promcp.stages.clock import Instant

__all__ = ["failed_step_event"]


def failed_step_event(
    *,
    stage: Stage,
    start: Instant,
    end: Instant,
    failure: Failure,
    timed: bool = True,
    provider: str | None = None,
    attrs: dict[str, Any] | None = None,
) -> Event:
    """The event of a step of ``stage`` that failed as a whole (see the module doc)."""
    return Event(
        stage=stage,
        t_start_ns=start.wall_ns,
        t_end_ns=max(end.wall_ns, start.wall_ns),
        latency_ms=max(start.ms_to(end), 0.0) if timed else None,
        timing_quality=TimingQuality.EXACT if timed else TimingQuality.NONE,
        provider=provider,
        resp_preview=failure.message,
        attrs=attrs,
        **outcome(failure),
    )
