"""Cost of the LLM client wrappers (promcp.shims._llm) on the caller's path, measured in one run as a ratio.

The real OpenAI Python SDK calls a stub OpenAI-compatible server on 127.0.0.1 (an instant reply: the harshest case,
a real model takes 10^2-10^4 times longer). Two clients, one bare and one wrapped with ``wrap_openai``, alternate call
by call; every request carries a system prompt, a growing history and N tool definitions. Reported: median µs per
call and the ratio wrapped / bare, plus the calling thread's CPU per call. Token counting runs on the recorder's
worker thread, drained after each wrapped call outside the timed region.

    .venv/bin/python tests/perf/bench_llm_wrappers.py [--calls 200] [--tools 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import openai

from promcp.recorder import Recorder
from promcp.shims import _llm
from tests.stubs.llm_http import Reply, StubServer, openai_text


def tools(n: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": f"Tool number {i}: does one precise thing with its two arguments.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                    "required": ["path"],
                },
            },
        }
        for i in range(n)
    ]


def main(calls: int, n_tools: int) -> int:
    defs = tools(n_tools)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant. " * 20},
        {"role": "user", "content": "Summarize the repository layout. " * 10},
    ]
    for i in range(6):
        messages.append({"role": "assistant", "content": f"step {i}: " + "analysis text " * 30})
        messages.append({"role": "user", "content": f"continue {i}"})
    wall: dict[str, list[float]] = {"bare": [], "wrapped": []}
    cpu: dict[str, list[float]] = {"bare": [], "wrapped": []}
    rec = Recorder(Path(tempfile.mkdtemp(prefix="promcp-bench-llm-")), topology="c-cust", fsync="group")
    with StubServer(lambda _req: Reply(200, openai_text("ok"))) as stub, rec.activate():
        bare = openai.OpenAI(base_url=stub.url + "/v1", api_key="k", max_retries=0)
        wrapped = _llm.wrap_openai(openai.OpenAI(base_url=stub.url + "/v1", api_key="k", max_retries=0))
        for client in (bare, wrapped):  # warm up connections and caches
            for _ in range(10):
                client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=defs)
        rec.flush()
        for i in range(calls):
            order = ("bare", "wrapped") if i % 2 == 0 else ("wrapped", "bare")
            for mode in order:
                client = bare if mode == "bare" else wrapped
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=defs)
                wall[mode].append((time.perf_counter_ns() - t0) / 1e3)
                cpu[mode].append((time.thread_time_ns() - c0) / 1e3)
                if mode == "wrapped":
                    rec.flush()
    rec.close()
    b, cb = statistics.median(wall["bare"]), statistics.median(cpu["bare"])
    print(
        f"OpenAI SDK chat.completions.create against a loopback stub, {calls} calls per mode, {n_tools} tools"
    )
    print(f"{'mode':<8} | {'wall median µs':>14} | {'ratio':>6} | {'CPU µs':>7} | {'ratio':>6}")
    for mode in ("bare", "wrapped"):
        w, c = statistics.median(wall[mode]), statistics.median(cpu[mode])
        print(f"{mode:<8} | {w:>14.0f} | {w / b:>5.2f}x | {c:>7.0f} | {c / cb:>5.2f}x")
    print(f"events journaled: {rec.events}; worker errors: {len(rec.worker_errors)}")
    return 1 if rec.worker_errors else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--tools", type=int, default=50)
    a = ap.parse_args()
    raise SystemExit(main(a.calls, a.tools))
