"""Per-task facts: every task with its outcome, every failed event with its reason, every context overflow.

These tables cover all tasks, complete or not: they are where a failure's reason reaches the user
(``promcp report --section tasks``, ``promcp report --errors``), while the attribution tables
(:mod:`promcp.analysis.tables`) count complete tasks only.
"""

from __future__ import annotations

from typing import Final

import pandas as pd

from promcp.analysis.engine import INIT, Events, as_arrow, error_type_sql, query
from promcp.analysis.tables import per_task
from promcp.analysis.task_sql import FACT_COLUMNS
from promcp.analysis.task_sql import text_column as _text
from promcp.events import Status

#: The columns of :func:`task_table`.
TASK_COLUMNS: Final = FACT_COLUMNS
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

_OK = f"coalesce(CAST(status AS VARCHAR), 'ok') = '{Status.OK.value}'"


def task_table(events: Events) -> pd.DataFrame:
    """One row per task (complete or not), in recording order.

    Columns: ``run_id, task_id, topology, model, outcome, rounds, llm_calls, tool_calls, tool_errors, tokens``
    (the task's token flow, as the phase table counts it), ``llm_billed``, ``latency_ms`` (sum of its events'
    latencies), ``wall_ms`` (first event start to last event end), ``error`` (why it is not complete:
    ``error_type: message`` of the failing call). Outcomes: see :mod:`promcp.analysis.engine`.

    >>> tasks = pa.task_table(df)
    >>> tasks[tasks["outcome"] != "ok"][["task_id", "outcome", "error"]]
    """
    return per_task(events)[list(TASK_COLUMNS)]


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
            f"{error_type_sql() if 'error_type' in names else 'NULL'} AS error_type",
            f"{_text('resp_preview', names)} AS message",
        ]
    )
    return query(f"SELECT {cols} FROM ev WHERE NOT {_OK} ORDER BY run_id, seq", table)[list(ERROR_COLUMNS)]


def overflows(events: Events) -> pd.DataFrame:
    """LLM calls that did not fit the model's context window (recorded with their counted prompt, never sent).
    ``overflow_by`` is ``tokens_in - context_window``: a prompt fits when one token to generate fits after it, so
    0 is an overflow too.

    >>> pa.overflows(df)   # tokens_in counted, context_window, overflow_by
    """
    table = as_arrow(events)
    names = set(table.column_names)
    # the prompt's tokens minus the window, from the columns (older files stored it plus one in attrs.overflow_by)
    over = "CAST(tokens_in AS BIGINT) - CAST(context_window AS BIGINT)"
    sql = f"""
        SELECT run_id, task_id, "round", {_text("model", names)} AS model, tokens_in, context_window,
               {over} AS overflow_by
        FROM ev WHERE CAST(status AS VARCHAR) = '{Status.CONTEXT_OVERFLOW.value}' ORDER BY run_id, seq
    """
    out = query(sql, table)
    for c in ("round", "tokens_in", "context_window", "overflow_by"):
        out[c] = out[c].astype("Int64")
    return out[list(OVERFLOW_COLUMNS)]
