"""A generator of realistic synthetic promcp events, for table tests and the store/report benchmark.

The shape follows a real agent loop: per server session INIT events; per task rounds of LLM input (S1, then S5)
with input parts by origin (system, every tool schema re-sent, user prompt, history, earlier tool results),
LLM output (S2 with a tool call, or S6 on the last round), and S3/S4 per tool call. Numbers are drawn from a seeded
RNG, so the same arguments always give the same events.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from promcp.events import Event, Origin, Part, Stage, Status, TokenSource, Topology

SERVERS = {
    "fs": ["read_file", "write_file", "list_dir"],
    "mem": ["add", "search"],
    "calc": ["eval", "solve", "stats"],
}


def session_events(run_id: str, topology: Topology, rng: random.Random) -> Iterator[Event]:
    for server, tools in SERVERS.items():
        for phase in ("spawn", "ready", "initialize"):
            yield Event(
                stage=Stage.INIT,
                phase=phase,
                run_id=run_id,
                topology=topology,
                server=server,
                transport="stdio",
                latency_ms=rng.uniform(5, 300),
            )
        per_tool = {t: {"tokens": rng.randint(40, 400), "bytes": rng.randint(200, 2000)} for t in tools}
        yield Event(
            stage=Stage.INIT,
            phase="tools_discovery",
            run_id=run_id,
            topology=topology,
            server=server,
            transport="stdio",
            latency_ms=rng.uniform(1, 30),
            tokenizer="o200k_base",
            token_source=TokenSource.TOKENIZER,
            footprint_tokens=sum(v["tokens"] for v in per_tool.values()),
            footprint_bytes=sum(v["bytes"] for v in per_tool.values()),
            attrs={"n_tools": len(tools), "tools": per_tool},
        )


def _latency(rng: random.Random, low: float, high: float, untimed: float) -> float | None:
    value = rng.uniform(low, high)
    return None if untimed and rng.random() < untimed else value


def task_events(
    run_id: str,
    topology: Topology,
    task_id: str,
    rng: random.Random,
    *,
    max_rounds: int = 4,
    overflow: bool = False,
    fail: bool = False,
    untimed: float = 0.0,
) -> Iterator[Event]:
    """One task's events. ``fail``: its last LLM call fails (input event ``status=error``, no tokens, no output);
    ``untimed``: the probability that an event has no latency (``timing_quality=none``, as imports often have)."""
    common = {
        "run_id": run_id,
        "topology": topology,
        "task_id": task_id,
        "model": f"model-{rng.randint(1, 2)}",
        "tokenizer": "o200k_base",
        "token_source": TokenSource.TOKENIZER,
    }
    server = rng.choice(list(SERVERS))
    schemas = [Part(Origin.SCHEMAS, f"{server}/{t}", 50 + 37 * i) for i, t in enumerate(SERVERS[server])]
    system = Part(Origin.SYSTEM, "system", 120)
    user = Part(Origin.USER, "prompt", rng.randint(10, 80))
    rounds = rng.randint(1, max_rounds)
    history: list[Part] = []
    results: list[Part] = []
    for rnd in range(1, rounds + 1):
        stage_in = Stage.S1 if rnd == 1 else Stage.S5
        parts = [system, *schemas, user, *history, *results]
        status = Status.CONTEXT_OVERFLOW if overflow and rnd == rounds else Status.OK
        if fail and rnd == rounds:
            yield Event(
                stage=stage_in,
                round=rnd,
                status=Status.ERROR,
                error_type="connection",
                resp_preview="cannot reach http://127.0.0.1:9: connection refused",
                latency_ms=rng.uniform(1000, 5000),
                **{k: v for k, v in common.items() if k != "token_source"},
            )
            return
        yield Event(
            stage=stage_in,
            round=rnd,
            parts=parts,
            latency_ms=_latency(rng, 5, 50, untimed),
            status=status,
            **common,
        )
        if status is Status.CONTEXT_OVERFLOW:
            return
        final = rnd == rounds
        out_tokens = rng.randint(20, 200)
        call_id = f"{task_id}-c{rnd}"
        yield Event(
            stage=Stage.S6 if final else Stage.S2,
            round=rnd,
            tokens_out=out_tokens,
            latency_ms=_latency(rng, 200, 4000, untimed),
            tool_call_id=None if final else call_id,
            **common,
        )
        if final:
            return
        tool = rng.choice(SERVERS[server])
        yield Event(
            stage=Stage.S3,
            round=rnd,
            server=server,
            tool=tool,
            tool_call_id=call_id,
            footprint_tokens=rng.randint(5, 60),
            footprint_bytes=rng.randint(40, 600),
            latency_ms=_latency(rng, 0.05, 1, untimed),
            transport="stdio",
            **common,
        )
        result_tokens = rng.randint(20, 3000)
        yield Event(
            stage=Stage.S4,
            round=rnd,
            server=server,
            tool=tool,
            tool_call_id=call_id,
            footprint_tokens=result_tokens,
            footprint_bytes=result_tokens * 4,
            latency_ms=_latency(rng, 1, 800, untimed),
            transport="stdio",
            status=Status.ERROR if rng.random() < 0.05 else Status.OK,
            **common,
        )
        history.append(Part(Origin.HISTORY, f"msg:{len(history) + 1}", out_tokens))
        results.append(Part(Origin.TOOL_RESULTS, call_id, result_tokens))


def events(
    n_tasks: int,
    *,
    seed: int = 7,
    topologies: tuple[Topology, ...] = (Topology.L_CUST, Topology.C_CUST),
    overflow_every: int = 0,
    fail_every: int = 0,
    untimed: float = 0.0,
) -> Iterator[Event]:
    """Events of ``n_tasks`` tasks spread over one run per topology (plus the run's session start-up)."""
    rng = random.Random(seed)
    for ti, topology in enumerate(topologies):
        run_id = f"synth-{topology.value}-{seed}"
        yield from session_events(run_id, topology, rng)
        for i in range(ti, n_tasks, len(topologies)):
            overflow = bool(overflow_every) and i % overflow_every == overflow_every - 1
            fail = bool(fail_every) and i % fail_every == fail_every - 1 and not overflow
            yield from task_events(
                run_id, topology, f"t{i:06d}", rng, overflow=overflow, fail=fail, untimed=untimed
            )
