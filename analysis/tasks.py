"""Per-task facts: every task with its outcome, every failed event with its reason, every context overflow.

These tables cover all tasks, complete or not: they are where a failure's reason reaches the user
(``promcp report --section tasks``, ``promcp report --errors``), while the attribution tables
(:mod:`promcp.analysis.tables`) count complete tasks only.
"""

from __future__ import annotations

from typing import Final

import pandas as pd

from promcp.analysis.engine import INIT, OUTCOME_SQL, Events, as_arrow, query
from promcp.analysis.tables import BILLED, PHASE_TOKENS, TOKENS_SQL
from promcp.events import Stage, Status

TASK_COLUMNS: Final = (
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
ERROR_COLUMNS: Final = (
    "run_id",
    "task_id",
    "seq",
    "stage",
    "phase",
    "server",
    "tool",
    "status",
    "error_type",
    "message",
)
OVERFLOW_COLUMNS: Final = (
    "run_id",
    "task_id",
    "round",
    "model",
    "tokens_in",
    "context_window",
    "overflow_by",
)

_SENT = f"coalesce(CAST(status AS VARCHAR), 'ok') <> '{Status.CONTEXT_OVERFLOW.value}'"
_OK = f"coalesce(CAST(status AS VARCHAR), 'ok') = '{Status.OK.value}'"
_BILLED_STAGES = ", ".join(f"'{s}'" for p in BILLED for s in PHASE_TOKENS[p][0])


def _text(column: str, names: set[str]) -> str:
    return f"CAST({column} AS VARCHAR)" if column in names else "NULL"


def task_table(events: Events) -> pd.DataFrame:
    """One row per task (complete or not), in recording order.

    Columns: ``run_id, task_id, topology, model, outcome, rounds, llm_calls, tool_calls, tool_errors, tokens``
    (the task's token flow, as the phase table counts it), ``llm_billed``, ``latency_ms`` (sum of its events'
    latencies), ``wall_ms`` (first event start to last event end), ``error`` (why it is not complete:
    ``error_type: message`` of the failing call). Outcomes: see :mod:`promcp.analysis.engine`.

    >>> tasks = pa.task_table(df)
    >>> tasks[tasks["outcome"] != "ok"][["task_id", "outcome", "error"]]
    """
    table = as_arrow(events)
    names = set(table.column_names)
    s1, s5, s3, s4 = Stage.S1.value, Stage.S5.value, Stage.S3.value, Stage.S4.value
    sql = f"""
        WITH o AS ({OUTCOME_SQL}),
        t AS (
            SELECT run_id, task_id,
                any_value({_text("topology", names)}) AS topology,
                any_value({_text("model", names)}) AS model,
                max("round") AS rounds,
                count(*) FILTER (WHERE stage IN ('{s1}', '{s5}')) AS llm_calls,
                count(*) FILTER (WHERE stage = '{s3}') AS tool_calls,
                count(*) FILTER (WHERE stage IN ('{s3}', '{s4}') AND NOT {_OK}) AS tool_errors,
                coalesce(sum(CAST({TOKENS_SQL} AS DOUBLE)) FILTER (WHERE {_SENT}), 0) AS tokens,
                coalesce(sum(CAST({TOKENS_SQL} AS DOUBLE))
                    FILTER (WHERE {_SENT} AND stage IN ({_BILLED_STAGES})), 0) AS llm_billed,
                sum(latency_ms) FILTER (WHERE {_SENT}) AS latency_ms,
                (max(t_end_ns) - min(t_start_ns)) / 1e6 AS wall_ms,
                min(seq) AS first_seq
            FROM ev WHERE stage <> '{INIT}' GROUP BY run_id, task_id
        )
        SELECT t.*, o.outcome, o.error FROM t JOIN o USING (run_id, task_id) ORDER BY run_id, first_seq, task_id
    """
    out = query(sql, table)
    out["rounds"] = out["rounds"].astype("Int64")
    for c in ("llm_calls", "tool_calls", "tool_errors"):
        out[c] = out[c].astype("int64")
    return out[list(TASK_COLUMNS)]


def errors(events: Events) -> pd.DataFrame:
    """Every event that did not end ``ok``, in recording order: where (run, task, stage, server, tool), its status,
    ``error_type`` and message (the error text the source recorded; for a failed tool call, the result the model
    was given). Start-up failures have no task.

    >>> pa.errors(df)[["task_id", "stage", "error_type", "message"]]
    """
    table = as_arrow(events)
    names = set(table.column_names)
    cols = ", ".join(
        [
            "run_id",
            f"CASE WHEN stage = '{INIT}' THEN NULL ELSE task_id END AS task_id",
            "seq",
            "CAST(stage AS VARCHAR) AS stage",
            f"{_text('phase', names)} AS phase",
            f"{_text('server', names)} AS server",
            f"{_text('tool', names)} AS tool",
            "CAST(status AS VARCHAR) AS status",
            f"{_text('error_type', names)} AS error_type",
            f"{_text('resp_preview', names)} AS message",
        ]
    )
    return query(f"SELECT {cols} FROM ev WHERE NOT {_OK} ORDER BY run_id, seq", table)[list(ERROR_COLUMNS)]


def overflows(events: Events) -> pd.DataFrame:
    """LLM calls that did not fit the model's context window (recorded with their counted prompt, never sent).

    >>> pa.overflows(df)   # tokens_in counted, context_window, overflow_by
    """
    table = as_arrow(events)
    names = set(table.column_names)
    over = (
        "CASE WHEN json_valid(attrs) THEN TRY_CAST(json_extract_string(attrs, '$.overflow_by') AS BIGINT) END"
        if "attrs" in names
        else "NULL"
    )
    sql = f"""
        SELECT run_id, task_id, "round", {_text("model", names)} AS model, tokens_in, context_window,
               {over} AS overflow_by
        FROM ev WHERE CAST(status AS VARCHAR) = '{Status.CONTEXT_OVERFLOW.value}' ORDER BY run_id, seq
    """
    out = query(sql, table)
    for c in ("round", "tokens_in", "context_window", "overflow_by"):
        out[c] = out[c].astype("Int64")
    return out[list(OVERFLOW_COLUMNS)]
