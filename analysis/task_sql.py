"""The per-task aggregation as SQL (no pandas): the phases, the stages and token column each one counts, and the
query that gives one row per task with its outcome, facts and phase sums.

:func:`promcp.analysis.tables.per_task` runs it into a pandas frame; ``promcp report --section phases``
(:mod:`promcp.analysis.phase_report`) keeps it in DuckDB and aggregates it there, so that command starts without
pandas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from promcp.analysis.engine import MISSING, TASK_KEYS, ident, task_sql
from promcp.events import Phase, Stage, Status

#: The paper's phases (Tables 1 and 2), in display order.
PHASES: Final = tuple(
    p.value for p in (Phase.CONTEXT, Phase.LLM_PLAN, Phase.TOOL_CALL, Phase.TOOL_RESULT, Phase.FINAL_ANSWER)
)
#: SQL over ``ev``: a group of events' wall time in ms — its first event's start to its last event's end. The one rule
#: for a task's and a run's wall time: the task table, the HTML report's Runs table and ``promcp run``'s summary line.
WALL_MS_SQL: Final = "(max(t_end_ns) - min(t_start_ns)) / 1e6"

#: phase -> (stages that carry it, token column counted for it)
PHASE_TOKENS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    Phase.CONTEXT.value: ((Stage.S1.value, Stage.S5.value), "tokens_in"),
    Phase.LLM_PLAN.value: ((Stage.S2.value,), "tokens_out"),
    Phase.TOOL_CALL.value: ((Stage.S3.value,), "footprint_tokens"),
    Phase.TOOL_RESULT.value: ((Stage.S4.value,), "footprint_tokens"),
    Phase.FINAL_ANSWER.value: ((Stage.S6.value,), "tokens_out"),
}
#: The phases an LLM provider bills (``llm_billed`` = their sum).
BILLED: Final = (Phase.CONTEXT.value, Phase.LLM_PLAN.value, Phase.FINAL_ANSWER.value)

PHASE_SQL: Final = (
    "CASE "
    + " ".join(
        f"WHEN stage IN ({', '.join(repr(s) for s in stages)}) THEN '{phase}'"
        for phase, (stages, _) in PHASE_TOKENS.items()
    )
    + " END"
)
TOKENS_SQL: Final = (
    "CASE "
    + " ".join(
        f"WHEN stage IN ({', '.join(repr(s) for s in stages)}) THEN {col}"
        for stages, col in PHASE_TOKENS.values()
    )
    + " END"
)
#: SQL over ``ev``: the event was sent (an overflowed LLM call was not: it counts in no sum)
SENT_SQL: Final = f"coalesce(CAST(status AS VARCHAR), 'ok') <> '{Status.CONTEXT_OVERFLOW.value}'"

#: Facts of every task (:func:`promcp.analysis.tables.per_task`), besides its group keys and its phase sums.
FACT_COLUMNS: Final = (
    "run_id",
    "task_id",
    "topology",
    "model",
    "outcome",
    "rounds",
    "llm_calls",
    "tool_calls",
    "tool_errors",
    "tokens",
    "llm_billed",
    "latency_ms",
    "wall_ms",
    "error",
)


def text_column(column: str, names: set[str]) -> str:
    """SQL: ``column`` as text, or NULL when the input has no such column."""
    return f"CAST({column} AS VARCHAR)" if column in names else "NULL"


def per_task_sql(names: set[str], by: Sequence[str]) -> str:
    """SQL over ``ev`` (whose columns are ``names``): one row per task, complete or not, in recording order — the
    ``_by_<key>`` group keys (a task's value is its first non-null one, ``—`` when none), ``run_id, task_id,
    outcome, error`` (:func:`promcp.analysis.engine.task_sql`), ``tokens_<phase>`` and ``latency_<phase>`` (the
    sums over the task's sent events of that phase: a phase without events is 0, one whose events carry no latency
    NULL), ``topology, model, rounds, llm_calls, tool_calls, tool_errors, wall_ms``, ``sent_events``,
    ``timed_events`` (sent phase events with a latency) and ``first_seq``."""
    s1, s5, s3, s4 = Stage.S1.value, Stage.S5.value, Stage.S3.value, Stage.S4.value
    ok = f"coalesce(CAST(status AS VARCHAR), 'ok') = '{Status.OK.value}'"
    parts = [
        f"coalesce(CAST(any_value({ident(c)}) AS VARCHAR), '{MISSING}') AS {ident('_by_' + c)}"
        for c in by
        if c not in TASK_KEYS
    ]
    for phase, (stages, col) in PHASE_TOKENS.items():
        cond = f"stage IN ({', '.join(repr(st) for st in stages)}) AND {SENT_SQL}"
        parts.append(
            f"coalesce(sum(CAST({col} AS DOUBLE)) FILTER (WHERE {cond}), 0) AS {ident('tokens_' + phase)}"
        )
        parts.append(
            f"CASE WHEN count(*) FILTER (WHERE {cond}) = 0 THEN 0.0 "
            f"ELSE sum(latency_ms) FILTER (WHERE {cond}) END AS {ident('latency_' + phase)}"
        )
    parts += [
        f"any_value({text_column('topology', names)}) AS topology",
        f"any_value({text_column('model', names)}) AS model",
        'max("round") AS rounds',
        f"count(*) FILTER (WHERE stage IN ('{s1}', '{s5}')) AS llm_calls",
        f"count(*) FILTER (WHERE stage = '{s3}') AS tool_calls",
        f"count(*) FILTER (WHERE stage IN ('{s3}', '{s4}') AND NOT {ok}) AS tool_errors",
        f"{WALL_MS_SQL} AS wall_ms",
        f"count(*) FILTER (WHERE {SENT_SQL}) AS sent_events",
        f"count(latency_ms) FILTER (WHERE {PHASE_SQL} IS NOT NULL AND {SENT_SQL}) AS timed_events",
        "min(seq) AS first_seq",
    ]
    return f"{task_sql(', '.join(parts))} ORDER BY run_id, first_seq, task_id"
