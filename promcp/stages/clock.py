"""One clock for every source: an :class:`Instant` is a reading of the wall clock and the monotonic clock at once.

Events store wall-clock times (``t_start_ns`` / ``t_end_ns``, comparable across processes and machines) and
latencies from the monotonic clock (``latency_ms``, immune to clock steps). A source reads ``clock.now()`` at each
point it measures and hands the instants to a stage builder; ``Instant.ms_to`` is the only way a latency is made.

:class:`FakeClock` is the injectable stand-in for tests (the idea of pyinstrument's ``fake_time_util``): time stands
still until the test moves it, so a test asserts exact latencies without sleeping.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["SYSTEM_CLOCK", "Clock", "FakeClock", "Instant"]


@dataclass(slots=True)
class Instant:
    """A point in time on both clocks (nanoseconds)."""

    wall_ns: int
    mono_ns: int

    def ms_to(self, later: Instant) -> float:
        """Milliseconds from this instant to ``later`` on the monotonic clock."""
        return (later.mono_ns - self.mono_ns) / 1e6

    def plus_ms(self, ms: float) -> Instant:
        """The instant ``ms`` milliseconds later (on both clocks)."""
        step = int(ms * 1e6)
        return Instant(self.wall_ns + step, self.mono_ns + step)


class Clock:
    """Reads the system clocks (``time.time_ns`` and ``time.perf_counter_ns``)."""

    def now(self) -> Instant:
        return Instant(time.time_ns(), time.perf_counter_ns())

    def at_mono(self, mono_ns: int) -> Instant:
        """The instant of an earlier ``time.perf_counter_ns()`` reading (its wall time derived from now)."""
        now = self.now()
        return Instant(now.wall_ns - (now.mono_ns - mono_ns), mono_ns)


#: The clock every source uses unless a test injects another.
SYSTEM_CLOCK = Clock()


class FakeClock(Clock):
    """A clock that moves only when told: ``advance(ms)``, or by ``step_ms`` after every reading."""

    def __init__(
        self, wall_ns: int = 1_767_225_600_000_000_000, mono_ns: int = 1_000_000_000, *, step_ms: float = 0.0
    ) -> None:
        self.wall_ns, self.mono_ns = wall_ns, mono_ns
        self.step_ms = step_ms
        self.readings = 0

    def now(self) -> Instant:
        instant = Instant(self.wall_ns, self.mono_ns)
        self.readings += 1
        if self.step_ms:
            self.advance(self.step_ms)
        return instant

    def at_mono(self, mono_ns: int) -> Instant:
        return Instant(self.wall_ns - (self.mono_ns - mono_ns), mono_ns)

    def advance(self, ms: float) -> None:
        step = int(ms * 1e6)
        self.wall_ns += step
        self.mono_ns += step
