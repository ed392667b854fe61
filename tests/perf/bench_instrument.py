"""Overhead of promcp.instrument() on a stdio tools/call round trip, measured in one run as a ratio.

Two sessions to promcp's own ``echo`` server (``python -m promcp.servers.echo``, stdio) are opened while
instrumented, then instrumentation is switched off. Calls run in triples — bare, instrumented, inline count, taking
all six orders in turn — alternating between the two server processes, so neither the load swings of a shared machine nor
the placement of one server process favours a mode (comparing separate blocks minutes apart measured anything from
0.9x to 1.6x here). For an instrumented call ``promcp.instrument()`` is switched on just before it and off after it
(outside the timed region; the first call after switching on pays any cold-cache cost, a bias against promcp).
Every call echoes a different text, so the tokenizer's content-hash cache never hides the counting cost.

* ``bare``         — the mcp SDK untouched (nothing patched): the reference;
* ``instrumented`` — clocks and span attributes inline; the S3/S4 events are handed to the recorder when the
                     caller's task next yields, and their tokens and byte counts are computed on the recorder's
                     worker thread (``Recorder.emit_later``). ``promcp.shims.flush()`` drains that work after each
                     instrumented call *outside* the timed region, so it is not charged to the next call; its CPU
                     per call is reported separately ("worker CPU"): the work moved off the call's path;
* ``inline count`` — the bare call plus an inline tiktoken count of the arguments and the result text (the
                     design to avoid).

Reported per result size (1 KB, 10 KB): median wall µs, p90, ratio of medians, *paired* ratio (median over triples
of mode / bare within the same triple: calls ~10 ms apart, which cancels slower load drift), median CPU µs of the
calling thread (``time.thread_time_ns``, insensitive to other processes) and its ratio. Target: ≤ 1.05×.

    .venv/bin/python tests/perf/bench_instrument.py [--calls 300] [--fsync group|never]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

import promcp
from promcp import shims, tokenizers
from promcp.events import Event
from promcp.recorder import Recorder
from promcp.wire.mcp import arguments_text, result_text

SIZES = {"1 KB": 1024, "10 KB": 10 * 1024}
MODES = ("bare", "instrumented", "inline count")
#: every order of the three modes in turn: each mode is preceded equally often by each other mode (a call after
#: an inline count or a worker drain runs with caches the tokenizer just evicted)
ORDERS = tuple(itertools.permutations(MODES))
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dogs",
    "while",
    "tokens",
    "flow",
    "through",
    "schemas",
    "results",
    "and",
    "prompts",
]


def payloads(n: int, size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [f"{seed}-{i:06d}"]
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(_WORDS) + str(rng.randrange(1000)))
        out.append(" ".join(words)[:size])
    return out


class WorkerClock:
    """Wraps Recorder.emit_later so each builder's CPU time on the worker thread is summed."""

    def __init__(self, rec: Recorder) -> None:
        self.ns = 0
        inner = rec.emit_later

        def emit_later(build: Callable[[], Event | None]) -> None:
            def timed() -> Event | None:
                c0 = time.thread_time_ns()
                try:
                    return build()
                finally:
                    self.ns += time.thread_time_ns() - c0

            inner(timed)

        rec.emit_later = emit_later  # type: ignore[method-assign]


async def timed(
    session: ClientSession, text: str, inline: Callable[[str], int] | None = None
) -> tuple[float, float]:
    """(wall µs, calling-thread CPU µs) of one call."""
    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    result = await session.call_tool("echo", {"text": text})
    if inline is not None:
        inline(arguments_text({"text": text}))
        inline(result_text(result))
    return (time.perf_counter_ns() - t0) / 1e3, (time.thread_time_ns() - c0) / 1e3


async def main(calls: int, fsync: str) -> int:
    params = StdioServerParameters(command=sys.executable, args=["-m", "promcp.servers.echo"])
    rec = Recorder(
        Path(tempfile.mkdtemp(prefix="promcp-bench-instrument-")),
        benchmark="bench_instrument",
        fsync=fsync,  # type: ignore[arg-type]
    )
    worker = WorkerClock(rec)
    tok = tokenizers.get("o200k_base")
    tok.count("warm up")
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    worker_us: dict[str, float] = {}
    promcp.instrument(
        recorder=rec, llm=False
    )  # both sessions open instrumented (their dispatchers are tagged)
    try:
        async with (
            stdio_client(params) as (r1, w1),
            ClientSession(r1, w1) as one,
            stdio_client(params) as (r2, w2),
            ClientSession(r2, w2) as two,
        ):
            for session in (one, two):
                await session.initialize()
                await session.list_tools()
            promcp.uninstrument()
            for text in payloads(30, 1024, 999):  # warm both servers and code paths
                await timed(one, text)
                await timed(two, text)
            for seed, (label, size) in enumerate(SIZES.items()):
                texts = payloads(calls * len(MODES), size, seed)
                worker.ns = 0
                for i in range(calls):
                    session = (one, two)[i % 2]  # each mode runs on both server processes alike
                    for k in range(len(MODES)):
                        mode = ORDERS[i % len(ORDERS)][k]
                        text = texts[i * len(MODES) + k]
                        if mode == "instrumented":
                            promcp.instrument(recorder=rec, llm=False)
                            us = await timed(session, text)
                            shims.flush()
                            promcp.uninstrument()
                        else:
                            us = await timed(
                                session, text, tok.count_uncached if mode == "inline count" else None
                            )
                        wall.setdefault((label, mode), []).append(us[0])
                        cpu.setdefault((label, mode), []).append(us[1])
                worker_us[label] = worker.ns / 1e3 / calls
    finally:
        promcp.uninstrument()
    path = rec.close()

    print(f"stdio tools/call round trip, echo server, {calls} interleaved calls per mode and size")
    head = (
        "| result | mode | wall median µs | p90 µs | wall ratio | paired ratio | caller CPU µs | CPU ratio |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    print(head)
    for label in SIZES:
        base = statistics.median(wall[(label, "bare")])
        cbase = statistics.median(cpu[(label, "bare")])
        for mode in MODES:
            xs = sorted(wall[(label, mode)])
            med, p90 = statistics.median(xs), xs[int(len(xs) * 0.9)]
            cmed = statistics.median(cpu[(label, mode)])
            # the same triple's calls run ~10 ms apart: their ratio cancels the slow load swings of the machine
            paired = statistics.median(
                m / b for m, b in zip(wall[(label, mode)], wall[(label, "bare")], strict=True)
            )
            print(
                f"| {label} | {mode} | {med:,.0f} | {p90:,.0f} | {med / base:.3f}x | {paired:.3f}x"
                f" | {cmed:,.0f} | {cmed / cbase:.3f}x |"
            )
    for label, us in worker_us.items():
        print(
            f"worker CPU per instrumented call ({label}): {us:,.0f} µs (tokens, events, journal; off the call's path)"
        )
    print(f"events journaled: {rec.events}, worker errors: {len(rec.worker_errors)} -> {path}")
    return 1 if rec.worker_errors else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=300, help="calls per mode and size (default 300)")
    ap.add_argument(
        "--fsync", default="group", help="the recorder's fsync policy (default group, as in real runs)"
    )
    a = ap.parse_args()
    raise SystemExit(asyncio.run(main(a.calls, a.fsync)))
