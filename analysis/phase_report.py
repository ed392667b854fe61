"""``promcp report --section phases`` without pandas: the per-task table and the phase statistics computed in DuckDB.

The phase table is small (seven rows per group) but the report behind it is not: a million events are ~125,000
tasks, and the report over pandas (:func:`promcp.analysis.report.report`) loads pandas and builds a frame of them
before it can print anything. Here the per-task query (:func:`promcp.analysis.task_sql.per_task_sql`, the same
one) stays in DuckDB and the statistics, the header counts and the notes are aggregated there; Python sees a few
rows. The rules are those of :func:`promcp.analysis.tables.phase_attribution` (docs/accounting.md): per task, a
phase's value is the sum over its sent events (0 without events; its latency unknown when the task's phase events
carry no latency at all); per group, the mean and sample standard deviation over the tasks whose value is known,
and the share of the group's known sum; ``total`` and ``llm_billed`` are per-task sums of the phases (unknown
when every part is). The notes are :mod:`promcp.analysis.report_notes`'s. ``tests/unit/test_phase_report.py``
checks it gives the same table, header and notes as the report over pandas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from promcp.analysis.engine import (
    IMPLICIT_TASK,
    TASK_KEYS,
    Events,
    as_arrow,
    check_by,
    connect,
    ident,
    select,
)
from promcp.analysis.engine import literal as _literal
from promcp.analysis.report_notes import (
    MODEL_CRASHED,
    NAMED_IN_NOTE,
    TaskFacts,
    task_notes,
    timing_notes,
    unclosed_runs_note,
)
from promcp.analysis.task_sql import BILLED, PHASES, per_task_sql

#: the items of the phase table: the phases, their sum and the LLM-billed part
ITEMS = (*PHASES, "total", "llm_billed")


@dataclass
class PhaseRow:
    """One row of the phase table (the columns of :func:`promcp.analysis.tables.phase_attribution`); the group keys
    are attributes too (``getattr(row, "topology")``)."""

    keys: dict[str, str]
    phase: str
    tokens_mean: float | None
    tokens_std: float | None
    tokens_share: float | None
    latency_ms_mean: float | None
    latency_ms_std: float | None
    latency_ms_share: float | None
    tasks: int
    latency_ms_tasks: int

    def __getattr__(self, name: str) -> str:
        keys = self.__dict__.get("keys", {})
        if name in keys:
            return str(keys[name])
        raise AttributeError(name)


@dataclass
class PhaseReport:
    """What ``promcp report --section phases`` prints: the fields :class:`promcp.analysis.report.Report` has for it
    (``rows`` in place of ``tables["phases"]``, ``excluded`` as records)."""

    events: int = 0
    runs: int = 0
    tasks: int = 0
    complete: int = 0
    by: list[str] = field(default_factory=list)
    include_incomplete: bool = False
    rows: list[PhaseRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    table_notes: dict[str, list[str]] = field(default_factory=dict)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    approximations: dict[str, str] = field(default_factory=dict)


def phase_report(
    data: Events,
    *,
    by: Sequence[str] = ("topology",),
    runs: Sequence[str] | None = None,
    latest: int = 0,
    include_incomplete: bool = False,
) -> PhaseReport:
    """The phase table of ``data`` (a dataset path, run files or Arrow events), its header counts and notes, as
    :func:`promcp.analysis.report.report` with ``sections=["phases"]`` gives them — computed in DuckDB."""
    table = as_arrow(select(data, runs=runs, latest=latest))
    by = check_by(table, by)
    con = connect(table)
    try:
        return _compute(con, data, set(table.column_names), list(by), include_incomplete)
    finally:
        con.close()


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None  # an aggregate without GROUP BY gives one row
    return row


def _known(sql: str) -> str:
    """SQL: a value that pandas would count as missing (NULL or NaN) as NULL."""
    return f"CASE WHEN isnan({sql}) THEN NULL ELSE {sql} END"


def _sum_known(columns: Sequence[str]) -> str:
    """SQL: the sum of ``columns`` skipping unknown ones, unknown when all are (pandas' ``sum(min_count=1)``)."""
    added = " + ".join(f"coalesce({c}, 0)" for c in columns)
    every_unknown = " AND ".join(f"{c} IS NULL" for c in columns)
    return f"CASE WHEN {every_unknown} THEN NULL ELSE {added} END"


def _compute(
    con: duckdb.DuckDBPyConnection, data: Events, names: set[str], by: list[str], include_incomplete: bool
) -> PhaseReport:
    events, runs, overflow, approx = _one(
        con,
        "SELECT count(*), count(DISTINCT run_id), count(*) FILTER (WHERE status = 'context_overflow'), "
        "list(DISTINCT CAST(tokenizer AS VARCHAR)) FILTER (WHERE tokenizer LIKE 'approx:%') FROM ev",
    )
    # the per-task table, as tables.per_task finishes it: a task none of whose phase events has a latency has none
    key_cols = [f"_by_{c}" if c not in TASK_KEYS else c for c in by]
    lat = {
        p: f"CASE WHEN timed_events = 0 THEN NULL ELSE {_known(ident('latency_' + p))} END" for p in PHASES
    }
    con.execute(f"CREATE TEMP TABLE task_rows AS {per_task_sql(names, by)}")
    con.execute(
        "CREATE TEMP VIEW tasks AS SELECT *, "
        + ", ".join(f"{sql} AS {ident('lat_' + p)}" for p, sql in lat.items())
        + f", {_sum_known([ident('lat_' + p) for p in PHASES])} AS lat_total FROM task_rows"
    )
    out = PhaseReport(events=int(events), runs=int(runs), by=by, include_incomplete=include_incomplete)
    tasks, complete, crashed, implicit = _one(
        con,
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'ok'), "
        f"count(*) FILTER (WHERE starts_with(error, {_literal(MODEL_CRASHED + ':')})), "
        f"count(*) FILTER (WHERE task_id = {_literal(IMPLICIT_TASK)}) FROM tasks",
    )
    out.tasks, out.complete = int(tasks), int(complete)
    excluded = con.execute(
        "SELECT run_id, task_id, outcome, error FROM tasks WHERE outcome <> 'ok' "
        "ORDER BY run_id, first_seq, task_id"
    ).fetchall()
    out.excluded = [dict(zip(("run_id", "task_id", "outcome", "error"), r, strict=True)) for r in excluded]
    for label in sorted(str(a) for a in approx or ()):
        from promcp.tokenizers import describe  # loaded only for a dataset counted by an approximation

        out.approximations[label] = describe(label) or label
    facts = TaskFacts(
        tasks=out.tasks,
        incomplete=len(excluded),
        named=[_Named(*r[1:]) for r in excluded[:NAMED_IN_NOTE]],
        crashed=int(crashed),
        implicit=int(implicit),
        events=out.events,
        overflow=int(overflow),
    )
    out.notes += task_notes(facts, include_incomplete)
    unclosed = unclosed_runs_note(data)
    out.notes += [unclosed] if unclosed else []
    out.rows = _phase_rows(con, by, key_cols, include_incomplete)
    counted = "" if include_incomplete else "WHERE outcome = 'ok'"
    overlap, overlap_lat, overlap_wall = _one(
        con,
        "SELECT count(*), coalesce(sum(lat_total), 0), coalesce(sum(wall_ms), 0) FROM tasks "
        f"{counted + ' AND' if counted else 'WHERE'} lat_total > wall_ms * 1.001 + 1.0",
    )
    notes = timing_notes(
        [r for r in out.rows if r.phase in PHASES], by, int(overlap), float(overlap_lat), float(overlap_wall)
    )
    if notes:
        out.table_notes["phases"] = notes
    return out


@dataclass
class _Named:
    task_id: str
    outcome: str
    error: str | None


def _phase_rows(
    con: duckdb.DuckDBPyConnection, by: list[str], key_cols: list[str], include_incomplete: bool
) -> list[PhaseRow]:
    """The phase statistics per group (groups in key order, items in :data:`ITEMS` order)."""
    where = "sent_events > 0" + ("" if include_incomplete else " AND outcome = 'ok'")
    values = {
        "tokens": {
            **{p: ident(f"tokens_{p}") for p in PHASES},
            "total": " + ".join(ident(f"tokens_{p}") for p in PHASES),
            "llm_billed": " + ".join(ident(f"tokens_{p}") for p in BILLED),
        },
        "latency_ms": {
            **{p: ident(f"lat_{p}") for p in PHASES},
            "total": "lat_total",
            "llm_billed": _sum_known([ident(f"lat_{p}") for p in BILLED]),
        },
    }
    aggs = []
    for items in values.values():
        for sql in items.values():
            aggs += [f"avg({sql})", f"stddev_samp({sql})", f"coalesce(sum({sql}), 0)", f"count({sql})"]
    keys = ", ".join(ident(c) for c in key_cols)
    group = f" GROUP BY {keys} ORDER BY {keys}" if key_cols else ""
    sql = f"SELECT {keys + ', ' if keys else ''}count(*), {', '.join(aggs)} FROM tasks WHERE {where}{group}"
    rows: list[PhaseRow] = []
    for record in con.execute(sql).fetchall():
        key = dict(zip(by, map(str, record[: len(by)]), strict=True))
        n, stats = record[len(by)], record[len(by) + 1 :]
        if not n:  # no task to count (no GROUP BY gives one row even then)
            continue
        per_kind = len(ITEMS) * 4
        tok, lat = stats[:per_kind], stats[per_kind:]
        known_tok = sum(float(tok[i * 4 + 2]) for i in range(len(PHASES)))
        known_lat = sum(float(lat[i * 4 + 2]) for i in range(len(PHASES)))
        for i, item in enumerate(ITEMS):
            t_mean, t_std, t_sum, t_n = tok[i * 4 : i * 4 + 4]
            l_mean, l_std, l_sum, l_n = lat[i * 4 : i * 4 + 4]
            rows.append(
                PhaseRow(
                    key,
                    item,
                    t_mean,
                    t_std,
                    100.0 * float(t_sum) / known_tok if known_tok else None,
                    l_mean,
                    l_std,
                    100.0 * float(l_sum) / known_lat if known_lat else None,
                    int(t_n),
                    int(l_n),
                )
            )
    return rows
