"""The query engine under every table: event inputs, run and task selection, task outcomes, DuckDB.

Every table function takes the events as a dataset path, a pandas DataFrame (:func:`promcp.analysis.load`), an
Arrow table (:func:`promcp.analysis.load_table`) or :class:`ParquetEvents` (:func:`promcp.analysis.scan`: the run
files, read by DuckDB column by column; what a path becomes). Queries see them through one normalized view ``ev``:

* ``run_id`` and ``task_id`` as text; the LLM and tool events of a run that carry no task id (an instrumented
  host that never called ``promcp.scope(task_id=…)``) belong to one implicit task per run, :data:`IMPLICIT_TASK`;
* **session events** belong to no task and keep a null ``task_id``: start-up (``INIT``), and, when they carry no
  task id, MCP protocol traffic (stage ``MCP``: notifications, ``resources/list``, pings) and every event of an MCP
  proxy (:data:`SESSION_SOURCES`: a client's health check, a tool call no LLM call asked for). They never form a
  task, so they never enter a task count or a per-task mean (:data:`SESSION_SQL` tells them apart in ``ev``);
* only the selected runs and tasks (:func:`select`) and, for the attribution tables, only complete tasks
  (:func:`complete`); session events always stay.

A task's **outcome** is decided by its last LLM event (docs/accounting.md): ``ok`` when it is an answer (S6),
``no_answer`` when the task stopped after a tool-calling plan (max rounds), ``error`` / ``timeout`` /
``context_overflow`` when that call failed, ``interrupted`` when a call has no output or an event was cancelled.
A task without LLM events (MCP-only instrumentation) is ``ok`` unless something was cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import duckdb
import pyarrow as pa

from promcp.analysis.scanned import ParquetEvents, RunRef
from promcp.errors import ConfigError
from promcp.events import LEGACY_ERROR_TYPES, LLM_INPUT_STAGES, LLM_OUTPUT_STAGES, Stage, Status

TASK_KEYS: Final = ("run_id", "task_id")
#: Columns the recorder sets on every event of a run: grouping by them needs no per-task lookup.
RUN_LEVEL: Final = frozenset({"run_id", "topology", "source"})
#: How a missing group key (e.g. no model) is shown.
MISSING: Final = "—"
#: The task id of a run's events that carry none (one implicit task per run).
IMPLICIT_TASK: Final = "(no task id)"
#: Sources whose events belong to a task only when they carry its id (an MCP proxy sees no task: the LLM side,
#: or the link after the fact, gives its tool calls one).
SESSION_SOURCES: Final = ("proxy:mcp",)
#: Task outcomes; only ``ok`` tasks enter the attribution tables unless incomplete tasks are asked for.
OUTCOMES: Final = ("ok", "no_answer", "error", "timeout", "context_overflow", "interrupted")


def _raw_sql(table: ParquetEvents) -> str:
    """SQL: the rows of the run files (only the selected runs' rows of a pack)."""
    files = ", ".join(_literal(str(f)) for f in table.files)
    sql = f"SELECT * FROM read_parquet([{files}], union_by_name = true, hive_partitioning = false)"
    if table.run_ids is not None:
        ids = ", ".join(_literal(r) for r in table.run_ids) or "NULL"
        sql += f" WHERE CAST(run_id AS VARCHAR) IN ({ids})"
    return sql


if TYPE_CHECKING:  # pandas is imported where a frame is made (``promcp report --section phases`` never does)
    import pandas as pd

Events: TypeAlias = "pd.DataFrame | pa.Table | ParquetEvents | str | Path"

_LLM = tuple(s.value for s in (*sorted(LLM_INPUT_STAGES), *sorted(LLM_OUTPUT_STAGES)))
LLM_SQL: Final = "(" + ", ".join(f"'{s}'" for s in _LLM) + ")"
_INPUT_SQL = "(" + ", ".join(f"'{s.value}'" for s in sorted(LLM_INPUT_STAGES)) + ")"
INIT: Final = Stage.INIT.value
#: SQL over ``ev``: the event belongs to no task (start-up, or an untasked protocol / MCP-proxy event).
SESSION_SQL: Final = f"(CAST(stage AS VARCHAR) = '{INIT}' OR task_id IS NULL)"
#: SQL over ``ev``: the event belongs to a task.
TASK_EVENT_SQL: Final = f"NOT {SESSION_SQL}"


def as_arrow(events: Events) -> pa.Table | ParquetEvents:
    """Any accepted input as Arrow or run files (a dataset path is scanned, not loaded)."""
    if isinstance(events, pa.Table | ParquetEvents):
        return events
    if isinstance(events, str | Path):
        from promcp.analysis.load import scan

        return scan(events)
    return pa.Table.from_pandas(events, preserve_index=False)


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def check_by(table: pa.Table | ParquetEvents, by: Sequence[str]) -> list[str]:
    missing = [c for c in by if c not in table.column_names]
    if missing:
        raise ConfigError(f"cannot group by {', '.join(missing)}: not an event column", source="--by")
    return list(by)


def literal(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


_literal = literal


_SESSION_STAGES = (INIT, Stage.MCP.value)


def _untasked_sql(names: Sequence[str]) -> str:
    """SQL over the raw events: the event has no task id and forms the run's implicit task (not a session event)."""
    stages = ", ".join(_literal(s) for s in _SESSION_STAGES)
    sql = f"task_id IS NULL AND CAST(stage AS VARCHAR) NOT IN ({stages})"
    if "source" in names:
        sources = ", ".join(_literal(s) for s in SESSION_SOURCES)
        sql += f" AND coalesce(CAST(source AS VARCHAR), '') NOT IN ({sources})"
    return sql


def _task_of_sql(names: Sequence[str]) -> str:
    """SQL over the raw events: the task id ``ev`` gives the event (NULL for a session event)."""
    return (
        f"(CASE WHEN {_untasked_sql(names)} THEN {_literal(IMPLICIT_TASK)} "
        f"WHEN CAST(stage AS VARCHAR) = '{INIT}' THEN NULL ELSE CAST(task_id AS VARCHAR) END)"
    )


def _untasked(table: pa.Table | ParquetEvents) -> bool:
    """Whether some event forms an implicit task (then ``ev`` gives it the implicit task id)."""
    if isinstance(table, ParquetEvents):
        if table.untasked is not None:
            return table.untasked
        con = duckdb.connect()
        try:
            sql = f"SELECT count(*) FROM ({_raw_sql(table)}) r WHERE {_untasked_sql(table.column_names)}"
            row = con.execute(sql).fetchone()
            return bool(row and row[0])
        finally:
            con.close()
    names = table.column_names
    if "task_id" not in names or "stage" not in names:
        return False
    import pyarrow.compute as pc

    stage = pc.cast(table.column("stage"), pa.string())
    missing = pc.and_(
        pc.is_null(table.column("task_id")),
        pc.invert(pc.is_in(stage, value_set=pa.array(_SESSION_STAGES, pa.string()))),
    )
    if "source" in names:
        source = pc.fill_null(pc.cast(table.column("source"), pa.string()), "")
        missing = pc.and_(
            missing, pc.invert(pc.is_in(source, value_set=pa.array(SESSION_SOURCES, pa.string())))
        )
    return bool(pc.any(missing).as_py())


def _view_sql(table: pa.Table | ParquetEvents) -> str:
    """``ev``: the normalized, selected events (see the module doc)."""
    names = set(table.column_names)
    replaced = []
    if "run_id" in names and not isinstance(table, ParquetEvents):  # Parquet gives text already
        replaced.append("CAST(run_id AS VARCHAR) AS run_id")
    if "task_id" in names and _untasked(table):
        replaced.append(
            f"CASE WHEN {_untasked_sql(table.column_names)} THEN {_literal(IMPLICIT_TASK)} "
            "ELSE CAST(task_id AS VARCHAR) END AS task_id"
        )
    elif "task_id" in names and not isinstance(table, ParquetEvents):
        replaced.append("CAST(task_id AS VARCHAR) AS task_id")
    select = f"SELECT * REPLACE ({', '.join(replaced)}) FROM raw_ev" if replaced else "SELECT * FROM raw_ev"
    where = []
    if isinstance(table, ParquetEvents):
        if table.task_ids is not None:
            ids = ", ".join(_literal(t) for t in table.task_ids) or "NULL"
            where.append(f"({SESSION_SQL} OR task_id IN ({ids}))")
        if table.dropped is not None:
            where.append(
                f"({SESSION_SQL} OR (run_id, task_id) NOT IN (SELECT (run_id, task_id) FROM dropped_tasks))"
            )
    body = f"SELECT * FROM ({select}) n" + (f" WHERE {' AND '.join(where)}" if where else "")
    return f"CREATE VIEW ev AS {body}"


def connect(table: pa.Table | ParquetEvents) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection whose view ``ev`` holds ``table``'s normalized, selected events (the caller closes it)."""
    con = duckdb.connect()
    try:
        if isinstance(table, ParquetEvents):
            con.execute(f"CREATE VIEW raw_ev AS {_raw_sql(table)}")
            if table.dropped is not None:
                con.register("dropped_tasks", table.dropped)
        else:
            con.register("raw_ev", table)
        con.execute(_view_sql(table))
    except BaseException:
        con.close()
        raise
    return con


def query(sql: str, table: pa.Table | ParquetEvents) -> pd.DataFrame:
    """Run ``sql`` (over the view ``ev``) and return a pandas frame."""
    con = connect(table)
    try:
        return con.execute(sql).df()
    finally:
        con.close()


def _narrow(table: pa.Table, sql: str, extra: dict[str, Any] | None = None) -> pa.Table:
    con = duckdb.connect()
    try:
        con.register("raw_ev", table)
        for name, value in (extra or {}).items():
            con.register(name, value)
        out: pa.Table = con.sql(sql).to_arrow_table()
        return out
    finally:
        con.close()


# -- task outcomes ---------------------------------------------------------------------------------------------

#: Orders a task's LLM events: round, then seq, then input before output (for events without a seq).
_ORDER = (
    f'(coalesce("round", 0) * 1099511627776 + (seq + 1) * 2 + '
    f"CASE WHEN CAST(stage AS VARCHAR) IN {_INPUT_SQL} THEN 0 ELSE 1 END)"
)
_STATUS = "coalesce(CAST(status AS VARCHAR), 'ok')"


def error_type_sql(column: str = "error_type") -> str:
    """SQL: ``column`` as text, a legacy value (``promcp.events.LEGACY_ERROR_TYPES``) read as its name today."""
    text = f"CAST({column} AS VARCHAR)"
    cases = " ".join(f"WHEN {_literal(old)} THEN {_literal(new)}" for old, new in LEGACY_ERROR_TYPES.items())
    return f"CASE {text} {cases} ELSE {text} END"


#: What an error message is made of, packed for the few events that did not end ok.
_FIELDS = (
    f"struct_pack(status := {_STATUS}, error_type := {error_type_sql()}, preview := resp_preview, "
    "tokens_in := tokens_in, ctx_window := context_window)"
)


def _message(e: str) -> str:
    """SQL: the error message of packed event ``e`` (``error_type: message``; overflow: what did not fit)."""
    return (
        f"CASE WHEN {e}.status = '{Status.CONTEXT_OVERFLOW.value}' THEN "
        f"'prompt of ' || coalesce(CAST({e}.tokens_in AS VARCHAR), '?') || ' tokens does not fit ' || "
        f"coalesce(CAST({e}.ctx_window AS VARCHAR), 'the window') "
        f"WHEN {e}.preview IS NULL OR {e}.preview = '' THEN {e}.error_type "
        f"WHEN {e}.error_type IS NULL THEN {e}.preview "
        f"ELSE {e}.error_type || ': ' || {e}.preview END"
    )


def task_sql(extra: str = "") -> str:
    """SQL: one row per task (``run_id, task_id, outcome, error`` and the ``extra`` aggregates over its events), in
    one pass over ``ev`` (plus a lookup of the few failed events for the messages). The rule is the module doc's."""
    extra = f", {extra}" if extra else ""
    cancelled = f"{_STATUS} = '{Status.CANCELLED.value}'"
    return f"""
    WITH t AS (
        SELECT run_id, task_id,
            arg_max(struct_pack(stage := CAST(stage AS VARCHAR), status := {_STATUS}, seq := seq), {_ORDER})
                FILTER (WHERE stage IN {LLM_SQL}) AS last,
            bool_or({cancelled}) AS cancelled,
            max(seq) FILTER (WHERE {cancelled}) AS cancel_seq
            {extra}
        FROM ev WHERE {TASK_EVENT_SQL} GROUP BY run_id, task_id
    ), bad AS (
        SELECT run_id, task_id, seq, {_FIELDS} AS f FROM ev WHERE {TASK_EVENT_SQL} AND {_STATUS} <> 'ok'
    )
    SELECT t.* EXCLUDE (last, cancelled, cancel_seq),
        CASE
            WHEN last IS NULL THEN CASE WHEN cancelled THEN 'interrupted' ELSE 'ok' END
            WHEN last.status = '{Status.CONTEXT_OVERFLOW.value}' THEN 'context_overflow'
            WHEN last.status = '{Status.TIMEOUT.value}' THEN 'timeout'
            WHEN last.status = '{Status.ERROR.value}' THEN 'error'
            WHEN last.status = '{Status.CANCELLED.value}' THEN 'interrupted'
            WHEN last.stage = '{Stage.S6.value}' THEN 'ok'
            WHEN last.stage = '{Stage.S2.value}' THEN CASE WHEN cancelled THEN 'interrupted' ELSE 'no_answer' END
            ELSE 'interrupted'
        END AS outcome,
        CASE
            WHEN last.status <> 'ok' THEN {_message("lb.f")}
            WHEN cancelled THEN {_message("cb.f")}
        END AS error
    FROM t
    LEFT JOIN bad lb ON lb.run_id = t.run_id AND lb.task_id = t.task_id AND lb.seq = t.last.seq
    LEFT JOIN bad cb ON cb.run_id = t.run_id AND cb.task_id = t.task_id AND cb.seq = t.cancel_seq
"""


OUTCOME_SQL: Final = task_sql()


def outcomes(events: Events) -> pd.DataFrame:
    """One row per task: ``run_id, task_id, outcome, error`` (the failing call's ``error_type: message``)."""
    table = as_arrow(events)
    if "resp_preview" not in table.column_names or "seq" not in table.column_names:
        raise ConfigError("task outcomes need the seq and resp_preview columns (load the full events)")
    return query(OUTCOME_SQL + " ORDER BY run_id, task_id", table)


def complete(events: Events, task_outcomes: pd.DataFrame | None = None) -> pa.Table | ParquetEvents:
    """The events of complete (``ok``) tasks, plus every session start-up event (``task_outcomes``: the
    :func:`outcomes` of ``events``, when already computed). Incomplete tasks are few: they are what is left out."""
    table = as_arrow(events)
    done = outcomes(table) if task_outcomes is None else task_outcomes
    drop = done.loc[done["outcome"] != "ok", ["run_id", "task_id"]].astype(str)
    if drop.empty:
        return table
    keys = pa.Table.from_pandas(drop, preserve_index=False)
    if isinstance(table, ParquetEvents):
        return replace(table, dropped=keys)
    con_sql = (
        f"SELECT r.* EXCLUDE (_task) FROM (SELECT *, {_task_of_sql(table.column_names)} AS _task FROM raw_ev) r "
        "WHERE NOT EXISTS (SELECT 1 FROM dropped_tasks k WHERE k.run_id = CAST(r.run_id AS VARCHAR) "
        "AND k.task_id = r._task)"
    )
    return _narrow(table, con_sql, {"dropped_tasks": keys})


# -- run and task selection ------------------------------------------------------------------------------------


def runs_of(events: Events, *, dry: bool = True) -> list[RunRef]:
    """The runs of an input, oldest first (by recording start when known, else by run id); ``dry=False`` leaves
    out dry runs (``promcp run --dry-run``: start-up only, known from the run header of a Parquet run)."""
    table = as_arrow(events)
    if isinstance(table, ParquetEvents) and table.runs:
        refs = list(table.runs)
    else:
        frame = query(
            "SELECT run_id, min(t_start_ns) AS created_ns, any_value(CAST(topology AS VARCHAR)) AS topology "
            "FROM ev GROUP BY run_id",
            table,
        )
        import pandas as pd

        refs = [
            RunRef(str(r.run_id), Path(), None if pd.isna(r.created_ns) else int(r.created_ns), r.topology)
            for r in frame.itertuples()
        ]
    if not dry:
        refs = [r for r in refs if not r.dry_run]
    return sorted(refs, key=lambda r: (r.created_ns or 0, r.run_id))


def resolve_runs(refs: Sequence[RunRef], wanted: Sequence[str]) -> list[RunRef]:
    """Runs named by id, unique id prefix, or the random suffix after the id's ``-``."""
    out: list[RunRef] = []
    for name in wanted:
        hits = [r for r in refs if r.run_id == name]
        hits = hits or [r for r in refs if r.run_id.startswith(name) or r.run_id.rsplit("-", 1)[-1] == name]
        if not hits:
            known = ", ".join(r.run_id for r in refs[-10:])
            raise ConfigError(f"no run {name!r} here; runs (latest last): {known}", source="--run")
        if len({r.run_id for r in hits}) > 1:
            raise ConfigError(
                f"{name!r} matches {len(hits)} runs: {', '.join(r.run_id for r in hits[:5])}", source="--run"
            )
        out += [r for r in hits if r not in out]
    return out


def select(
    events: Events,
    *,
    runs: Sequence[str] | None = None,
    latest: int = 0,
    tasks: Sequence[str] | None = None,
) -> pa.Table | ParquetEvents:
    """Narrow events to some runs (``runs`` ids/prefixes, or the ``latest`` N runs) and some task ids."""
    table = as_arrow(events)
    chosen: list[RunRef] | None = None
    if runs or latest:
        refs = runs_of(table)
        chosen = resolve_runs(refs, runs) if runs else []
        if latest:  # the latest N runs that ran tasks: a dry run is not one
            real = [r for r in refs if not r.dry_run]
            chosen += [r for r in real[-latest:] if r not in chosen]
    if isinstance(table, ParquetEvents):
        if chosen is not None:
            ids = {r.run_id for r in chosen}
            kept = tuple(r for r in table.runs if r.run_id in ids)
            files = tuple(dict.fromkeys(r.path for r in kept))
            shared = any(r.path in files and r.run_id not in ids for r in table.runs)  # a pack's other runs
            table = replace(
                table,
                files=files,
                runs=kept,
                run_ids=tuple(sorted(ids)) if shared else table.run_ids,
            )
        if tasks:
            table = replace(table, task_ids=tuple(tasks))
        return replace(table, untasked=_untasked(table))
    where = []
    if chosen is not None:
        where.append(f"CAST(run_id AS VARCHAR) IN ({', '.join(_literal(r.run_id) for r in chosen)})")
    if tasks:
        task_list = ", ".join(_literal(t) for t in tasks)
        task = _task_of_sql(table.column_names)
        where.append(f"({task} IS NULL OR {task} IN ({task_list}))")
    if not where:
        return table
    return _narrow(table, f"SELECT * FROM raw_ev WHERE {' AND '.join(where)}")
