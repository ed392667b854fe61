"""Attribution tables over promcp events (pure functions: events in, pandas DataFrame out).

The accounting rules are written down once, in docs/accounting.md, and implemented here:

* only complete tasks count (their last LLM call answered, see :mod:`promcp.analysis.engine`) unless a function is
  called with ``include_incomplete=True``; :func:`promcp.analysis.task_table` lists every task and its outcome;
* every event contributes its tokens and its latency to exactly one phase (:data:`PHASE_TOKENS`);
* a task's phase value is the sum over its events; tables report mean ± std over tasks and each phase's share: its
  sum over the tasks divided by the sum of every known value, so shares add up to 100 % (a value without timing
  is unknown, skipped by the mean and the share, never counted as 0);
* events with ``status = context_overflow`` (never sent) and session start-up events (``INIT``) are left out of
  the phase tables; start-up has its own table (:func:`session_init`).

Every function takes the events as a pandas DataFrame (:func:`promcp.analysis.load`), an Arrow table
(:func:`promcp.analysis.load_table`) or :func:`promcp.analysis.scan`'s run files. The per-event aggregation runs
in DuckDB (zero-copy over Arrow, column-pruned over Parquet, both cores): a million-event report takes about a
second instead of the ten a pandas groupby needed. The per-task statistics are then computed in pandas.
Examples below use ``import promcp.analysis as pa; df = pa.load("examples/default-run")``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd
import pyarrow as pa

from promcp.analysis.engine import (
    INIT,
    MISSING,
    RUN_LEVEL,
    TASK_KEYS,
    Events,
    as_arrow,
    check_by,
    complete,
    ident,
    query,
)
from promcp.analysis.scanned import ParquetEvents
from promcp.analysis.task_sql import (
    BILLED,
    FACT_COLUMNS,
    PHASES,
    SENT_SQL,
    WALL_MS_SQL,
    per_task_sql,
)
from promcp.events import Origin, Phase, Stage

#: The paper's latency segments.
SEGMENTS: Final = ("tool_plan", "tool_execution", "answer_synthesis")
#: Start-up phases of a session.
INIT_PHASES: Final = tuple(
    p.value for p in (Phase.SPAWN, Phase.READY, Phase.INITIALIZE, Phase.TOOLS_DISCOVERY)
)
ORIGINS: Final = tuple(o.value for o in Origin)
#: Origin row of the part of a provider's input total the source could not see (a ``system`` part keyed so).
UNOBSERVED: Final = "unobserved"
#: The "server" of a client's own tools (a schema part keyed by the bare tool name, e.g. Claude Code's Bash or
#: Read): they belong to the client, not to an MCP server.
BUILTIN_SERVER: Final = "client (built-in)"
_SENT = SENT_SQL
_TASK_ROWS = f"task_id IS NOT NULL AND stage <> '{INIT}' AND {_SENT}"
_INPUTS = f"stage IN ('{Stage.S1.value}', '{Stage.S5.value}')"


def _prepare(
    events: Events, by: Sequence[str], include_incomplete: bool
) -> tuple[pa.Table | ParquetEvents, list[str]]:
    table = as_arrow(events)
    by = check_by(table, by)
    return (table if include_incomplete else complete(table)), by


def _task_select(keys: Sequence[str], cols: str, extra: str = "") -> str:
    """``SELECT <keys>, <cols>`` over the task events (``e``-style rows), with task-level group keys.

    A task's group value is its first non-null value of the column among all its events (e.g. ``model`` is set on
    LLM events but not on tool events), so grouping by it never splits a task in two. ``run_id`` and ``task_id``
    come out as text; other keys as text with a visible placeholder for a missing value.
    """
    extra_keys = [c for c in keys if c not in TASK_KEYS and c not in RUN_LEVEL]
    tk_cols = "".join(f", any_value({ident(c)}) AS _k{i}" for i, c in enumerate(extra_keys))
    out_keys = []
    for c in keys:
        if c in TASK_KEYS:
            out_keys.append(f"CAST(b.{ident(c)} AS VARCHAR) AS {ident(c)}")
        elif c in RUN_LEVEL:
            out_keys.append(f"coalesce(CAST(b.{ident(c)} AS VARCHAR), '{MISSING}') AS {ident(c)}")
        else:
            i = extra_keys.index(c)
            out_keys.append(f"coalesce(CAST(tk._k{i} AS VARCHAR), '{MISSING}') AS {ident(c)}")
    if not extra_keys:  # run-level keys only: no per-task lookup needed
        return f"""
        SELECT {", ".join(out_keys)}, {cols}
        FROM (SELECT * FROM ev WHERE {_TASK_ROWS}) b
        {"WHERE " + extra if extra else ""}
    """
    return f"""
        SELECT {", ".join(out_keys)}, {cols}
        FROM (SELECT * FROM ev WHERE {_TASK_ROWS}) b
        JOIN (SELECT run_id AS _r, task_id AS _t{tk_cols} FROM ev WHERE {_TASK_ROWS} GROUP BY run_id, task_id) tk
          ON b.run_id = tk._r AND b.task_id = tk._t
        {"WHERE " + extra if extra else ""}
    """


def _per_item_sql(
    item_col: str, items: Sequence[str], value: str, *, null_when_unknown: bool, prefix: str = ""
) -> str:
    """One column per item: the sum of ``value`` over the group's events of that item.

    No events of the item → 0. Events whose values are all missing → 0 for tokens (``null_when_unknown`` False)
    and NULL (unknown) for latency, so means skip it instead of pretending it took no time.
    """
    cols = []
    for item in items:
        cond = f"{item_col} = '{item}'"
        if null_when_unknown:
            cols.append(
                f"CASE WHEN count(*) FILTER (WHERE {cond}) = 0 THEN 0.0 "
                f"ELSE sum({value}) FILTER (WHERE {cond}) END AS {ident(prefix + item)}"
            )
        else:
            cols.append(f"coalesce(sum({value}) FILTER (WHERE {cond}), 0) AS {ident(prefix + item)}")
    return ", ".join(cols)


def _stats(
    per_task: pd.DataFrame, by: list[str], items: Sequence[str], item_name: str, value: str
) -> pd.DataFrame:
    """mean, std and share for each item column of a per-task frame (and their ``total``).

    The mean skips tasks whose value is unknown (NaN: no timing); the share is the item's sum over the group's
    tasks divided by the sum of all known values, so the items' shares always add up to 100 %. ``tasks`` counts
    the tasks whose value is known.
    """
    rows = []
    groups = per_task.groupby(by, sort=True, dropna=False, observed=True) if by else [((), per_task)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        values = part[list(items)].astype("float64")
        total = values.sum(axis=1, min_count=1)
        known = float(np.nansum(values.to_numpy()))
        for item in (*items, "total"):
            col = total if item == "total" else values[item]
            n = int(col.count())
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    item_name: item,
                    f"{value}_mean": col.mean(),
                    f"{value}_std": col.std(ddof=1) if n > 1 else np.nan,  # undefined for a single task
                    f"{value}_share": 100.0 * float(col.sum()) / known if known else np.nan,
                    "tasks": n,
                }
            )
    return pd.DataFrame(rows)


def per_task(events: Events, by: Sequence[str] = ()) -> pd.DataFrame:
    """One row per task, complete or not, in recording order, from one pass over the events: the ``by`` keys (a
    task's value is its first non-null one), :data:`FACT_COLUMNS` (outcome and error as in
    :mod:`promcp.analysis.engine`; ``tokens`` is the task's token flow, ``latency_ms`` the sum of its events'
    latencies, ``wall_ms`` first start to last end) and ``tokens_<phase>``/``latency_<phase>`` for each phase.
    Overflowed (never sent) events count in no sum. :func:`promcp.analysis.task_table` shows it."""
    table = as_arrow(events)
    by = check_by(table, by)
    out = query(per_task_sql(set(table.column_names), by), table)
    out["rounds"] = out["rounds"].astype("Int64")
    for c in ("llm_calls", "tool_calls", "tool_errors", "sent_events"):
        out[c] = out[c].astype("int64")
    out["tokens"] = out[[f"tokens_{p}" for p in PHASES]].sum(axis=1)
    out["llm_billed"] = out[[f"tokens_{p}" for p in BILLED]].sum(axis=1)
    lat = [f"latency_{p}" for p in PHASES]
    out["timed_events"] = out["timed_events"].astype("int64")
    # a task none of whose phase events has a latency has no latency at all, not 0 ms in its phases without events
    out.loc[out["timed_events"] == 0, lat] = np.nan
    out["latency_ms"] = out[lat].sum(axis=1, min_count=1)
    for c in by:
        if c not in TASK_KEYS:
            out[c] = out.pop(f"_by_{c}")
    phase_cols = [*(f"tokens_{p}" for p in PHASES), *(f"latency_{p}" for p in PHASES)]
    return out[[*dict.fromkeys([*by, *FACT_COLUMNS]), *phase_cols, "sent_events", "timed_events"]]


def wall_ms(events: Events) -> float | None:
    """The events' wall time in ms (:data:`WALL_MS_SQL`: first start to last end); None when none carries a time."""
    value = query(f"SELECT {WALL_MS_SQL} AS wall_ms FROM ev", as_arrow(events))["wall_ms"].iloc[0]
    return None if pd.isna(value) else float(value)


def task_phase_totals(
    events: Events, by: Sequence[str] = ("topology",), *, include_incomplete: bool = False
) -> pd.DataFrame:
    """One row per task: tokens and latency per phase (columns ``tokens_<phase>``, ``latency_<phase>``).

    Complete tasks only unless ``include_incomplete`` (see :func:`promcp.analysis.task_table`).

    >>> per_task = pa.task_phase_totals(df, by=["topology", "model"])
    >>> per_task.groupby("model")["tokens_context"].describe()
    """
    return _phase_rows(per_task(events, by), list(by), include_incomplete)


def _phase_rows(tasks: pd.DataFrame, by: list[str], include_incomplete: bool) -> pd.DataFrame:
    keep = tasks["sent_events"] > 0
    if not include_incomplete:
        keep &= tasks["outcome"] == "ok"
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    cols = [*keys, *(f"tokens_{p}" for p in PHASES), *(f"latency_{p}" for p in PHASES)]
    return tasks.loc[keep, cols].reset_index(drop=True)


def phase_attribution(
    events: Events,
    by: Sequence[str] = ("topology",),
    *,
    include_incomplete: bool = False,
    tasks: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Tokens and latency per phase (the paper's Tables 1 and 2): mean ± std over tasks and % share per group.

    Columns: ``*by, phase, tokens_mean, tokens_std, tokens_share, latency_ms_mean, latency_ms_std,
    latency_ms_share, tasks, latency_ms_tasks``. ``phase`` runs over :data:`PHASES`, ``total`` (the token flow) and
    ``llm_billed`` (what an LLM provider bills: ``context + llm_plan + final_answer``; its latency is the time spent
    in LLM calls), whose share is of the total. ``latency_ms_tasks`` counts the tasks whose latency of that phase
    is known (a phase without timing, e.g. prefill of an import, is skipped by its mean and its share is of the
    measured time). Only complete tasks count unless ``include_incomplete``. ``tasks``: a :func:`per_task` frame
    with the same ``by`` already computed (the report passes it; ``events`` is then not read).

    >>> pa.phase_attribution(df, by=["topology", "model"])
    """
    columns = [
        "phase",
        "tokens_mean",
        "tokens_std",
        "tokens_share",
        "latency_ms_mean",
        "latency_ms_std",
        "latency_ms_share",
        "tasks",
        "latency_ms_tasks",
    ]
    by = list(by)
    rows = _phase_rows(tasks if tasks is not None else per_task(events, by), by, include_incomplete)
    if rows.empty:
        return pd.DataFrame(columns=[*by, *columns])
    tok = rows.rename(columns={f"tokens_{p}": p for p in PHASES})
    lat = rows.rename(columns={f"latency_{p}": p for p in PHASES})
    t = _stats(tok, by, PHASES, "phase", "tokens")
    lt = _stats(lat, by, PHASES, "phase", "latency_ms").rename(columns={"tasks": "latency_ms_tasks"})
    out = t.merge(lt, on=[*by, "phase"], how="left")
    billed = [_billed_row(tok, lat, by, key) for key, _ in _groups(tok, by)]
    out = pd.concat([out, pd.DataFrame(billed)], ignore_index=True)
    order = {p: i for i, p in enumerate([*PHASES, "total", "llm_billed"])}
    out = out.sort_values(
        [*by, "phase"], key=lambda c: c.map(order) if c.name == "phase" else c, kind="stable"
    )
    return out.reset_index(drop=True)[[*by, *columns]]


def _groups(frame: pd.DataFrame, by: list[str]) -> list[tuple[tuple[object, ...], pd.DataFrame]]:
    if not by:
        return [((), frame)]
    return [
        (key if isinstance(key, tuple) else (key,), part)
        for key, part in frame.groupby(by, sort=True, dropna=False, observed=True)
    ]


def _billed_row(
    tok: pd.DataFrame, lat: pd.DataFrame, by: list[str], key: tuple[object, ...]
) -> dict[str, object]:
    """The LLM-billed part of a group's tasks (context + llm_plan + final_answer); its share is the sum of theirs."""
    mask = pd.Series(True, index=tok.index)
    for col, value in zip(by, key, strict=True):
        mask &= tok[col] == value
    row: dict[str, object] = {**dict(zip(by, key, strict=True)), "phase": "llm_billed"}
    for name, frame in (("tokens", tok), ("latency_ms", lat)):
        part = frame.loc[mask, list(PHASES)].astype("float64")
        billed = part[list(BILLED)].sum(axis=1, min_count=1)
        known = float(np.nansum(part.to_numpy()))
        n = int(billed.count())
        row[f"{name}_mean"] = billed.mean()
        row[f"{name}_std"] = billed.std(ddof=1) if n > 1 else np.nan
        row[f"{name}_share"] = 100.0 * float(billed.sum()) / known if known else np.nan
        row["tasks" if name == "tokens" else "latency_ms_tasks"] = n
    return row


def latency_segments(
    events: Events, by: Sequence[str] = ("topology",), *, include_incomplete: bool = False
) -> pd.DataFrame:
    """The paper's three latency segments per task: tool-plan (S1–S2), tool-execution (S3–S4),
    answer-synthesis (S5–S6); mean ± std over tasks and share (shares of the measured time, adding to 100 %).

    An LLM call (the input event S1/S5 and the output event S2/S6 of one round) belongs to tool-plan when its output
    is a tool call (S2) and to answer-synthesis when its output is the answer (S6); a call without an output event
    (it failed) counts as tool-plan. Tool execution is every S3 and S4 latency.

    >>> pa.latency_segments(df, by=["topology"])
    """
    table, by = _prepare(events, by, include_incomplete)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    key_list = ", ".join(map(ident, keys))
    seg_cols = _per_item_sql("segment", SEGMENTS, "latency_ms", null_when_unknown=True)
    s3, s4, s6 = Stage.S3.value, Stage.S4.value, Stage.S6.value
    sql = f"""
        WITH e AS (
            {_task_select(keys, '"round", CAST(stage AS VARCHAR) AS stage, latency_ms')}
        ), answers AS (SELECT DISTINCT run_id, task_id, "round" FROM e WHERE stage = '{s6}'),
        s AS (
            SELECT e.*, CASE WHEN e.stage IN ('{s3}', '{s4}') THEN 'tool_execution'
                             WHEN answers."round" IS NOT NULL THEN 'answer_synthesis'
                             ELSE 'tool_plan' END AS segment
            FROM e LEFT JOIN answers ON e.run_id = answers.run_id AND e.task_id = answers.task_id
                                     AND e."round" = answers."round"
        )
        SELECT {key_list}, {seg_cols}, count(latency_ms) AS _timed FROM s GROUP BY ALL
    """
    per_task = query(sql, table)
    if per_task.empty:
        return pd.DataFrame(
            columns=[*by, "segment", "latency_ms_mean", "latency_ms_std", "latency_ms_share", "tasks"]
        )
    # a task without any recorded latency has none, not 0 ms in the segments it has no events of
    per_task.loc[per_task.pop("_timed") == 0, list(SEGMENTS)] = np.nan
    return _stats(per_task, by, SEGMENTS, "segment", "latency_ms")


def session_init(events: Events, by: Sequence[str] = ("topology", "server", "transport")) -> pd.DataFrame:
    """Session start-up per server and transport: spawn, ready, initialize and tools-discovery latency (mean, std),
    tools listed, and the schema footprint of ``tools/list`` (tokens under ``tokenizer``, bytes). ``failures``
    counts failed start-up phases; a ``server/discover`` the server refused (phase ``probe``) is counted in
    ``probes`` instead: the client falls back to ``initialize``, nothing failed.

    >>> pa.session_init(df, ["server", "transport"])[["server", "ready_ms_mean", "schema_tokens"]]
    """
    table = as_arrow(events)
    by = check_by(table, by)
    cols = list(
        dict.fromkeys(
            [
                *by,
                "phase",
                "latency_ms",
                "footprint_tokens",
                "footprint_bytes",
                "tokenizer",
                "status",
                "attrs",
            ]
        )
    )
    present = [c for c in cols if c in table.column_names]
    init = query(f"SELECT {', '.join(map(ident, present))} FROM ev WHERE stage = '{INIT}'", table)
    if init.empty:
        return pd.DataFrame(columns=[*by, "sessions"])
    frame = pd.DataFrame({k: init[k].astype(object).where(init[k].notna(), MISSING).astype(str) for k in by})
    frame["phase"] = init["phase"].astype(str).to_numpy()
    frame["latency"] = init["latency_ms"].to_numpy(dtype="float64", na_value=np.nan)
    frame["tokens"] = init["footprint_tokens"].to_numpy(dtype="float64", na_value=np.nan)
    frame["bytes"] = init["footprint_bytes"].to_numpy(dtype="float64", na_value=np.nan)
    frame["tokenizer"] = (
        init["tokenizer"].astype(object).where(init["tokenizer"].notna(), MISSING).astype(str)
    )
    # a refused server/discover (phase probe) is the client asking for a newer protocol, not a failed start-up
    frame["failed"] = (
        (init["status"].astype(str) != "ok") & (frame["phase"] != Phase.PROBE.value)
    ).to_numpy()
    frame["tools"] = [_n_tools(a) for a in init["attrs"]] if "attrs" in init else np.nan
    rows = []
    for key, part in frame.groupby(by, sort=True, dropna=False, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, object] = dict(zip(by, key, strict=True))
        sessions = part[part["phase"] == Phase.INITIALIZE.value]
        discovery = part["phase"].eq(Phase.TOOLS_DISCOVERY.value)
        row["sessions"] = len(sessions) if len(sessions) else int(discovery.sum())
        row["failures"] = int(part["failed"].sum())
        row["probes"] = int(part["phase"].eq(Phase.PROBE.value).sum())
        for p in INIT_PHASES:
            lat = part.loc[part["phase"] == p, "latency"]
            row[f"{p}_ms_mean"] = lat.mean()
            row[f"{p}_ms_std"] = lat.std(ddof=1) if lat.count() > 1 else np.nan
        disc = part[discovery]
        row["tools"] = disc["tools"].mean() if len(disc) else np.nan
        row["schema_tokens"] = disc["tokens"].mean() if len(disc) else np.nan
        row["schema_bytes"] = disc["bytes"].mean() if len(disc) else np.nan
        row["tokenizer"] = ",".join(sorted(set(disc["tokenizer"]) - {MISSING})) or MISSING
        rows.append(row)
    return pd.DataFrame(rows)


def _n_tools(attrs: object) -> float:
    if not isinstance(attrs, str) or "n_tools" not in attrs:
        return np.nan
    try:
        value = json.loads(attrs).get("n_tools")
    except (ValueError, AttributeError):
        return np.nan
    return float(value) if isinstance(value, int | float) else np.nan


def partial_sql(columns: Sequence[str]) -> str:
    """SQL: whether an event's source marks some origin as not observable (imports: ``attrs.<origin>_observable``).

    Only such sources can have an unobserved part, so the attrs JSON and the parts list are read only for their
    calls; the rest costs one LIKE per call."""
    return "attrs LIKE '%_observable%'" if "attrs" in columns else "false"


def unobserved_sql(columns: Sequence[str], *, partial: str | None = None) -> str:
    """SQL: the input tokens of an LLM call that its source could not attribute to an origin (the ``system`` part
    keyed :data:`UNOBSERVED`; counted inside ``in_system``), 0 for sources that observe every origin.
    ``partial``: an already computed :func:`partial_sql` column."""
    if "parts" not in columns:
        return "0"
    return (
        f"CASE WHEN {partial or partial_sql(columns)} THEN coalesce(list_sum(list_transform(list_filter(parts, "
        f"lambda p: p.origin = 'system' AND p.\"key\" = '{UNOBSERVED}'), lambda p: p.tokens)), 0) ELSE 0 END"
    )


def input_origins(
    events: Events, by: Sequence[str] = ("topology",), *, include_incomplete: bool = False
) -> pd.DataFrame:
    """Input tokens of LLM calls by origin (system, schemas, user, history, tool results): mean per call, mean per
    task, and share of all input tokens.

    Where a source cannot see an origin (exports hold no tool definitions: ``attrs.<origin>_observable`` false, e.g.
    ``schemas_observable``, on every call of the group), that row has ``observable`` False and no numbers instead of
    a 0. The part of a
    provider's input total that the source could not attribute (a ``system`` part keyed ``unobserved``) is its own
    :data:`UNOBSERVED` row, not counted as ``system``; shares still add up to 100 %.

    >>> pa.input_origins(df, by=["topology"])
    """
    table, by = _prepare(events, by, include_incomplete)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    by_list = ", ".join(map(ident, by)) if by else "NULL AS _all"
    group = "GROUP BY ALL" if by else ""
    origins = (*ORIGINS, UNOBSERVED)
    partial = partial_sql(table.column_names)
    unobserved = unobserved_sql(table.column_names, partial="partial_")
    seen_cols = ", ".join(
        "CASE WHEN partial_ AND json_valid(attrs) THEN coalesce(TRY_CAST(json_extract_string(attrs, "
        f"'$.{o}_observable') AS BOOLEAN), true) ELSE true END AS seen_{o}"
        for o in ORIGINS
    )
    values = ", ".join(
        [
            f"{partial} AS partial_",
            f"in_system - {unobserved} AS o_system",
            *(f"in_{o} AS o_{o}" for o in ORIGINS if o != "system"),
            f"{unobserved} AS o_{UNOBSERVED}",
            seen_cols,
        ]
    )
    per_call = ", ".join(
        f"avg(o_{o}) AS call_{o}, count(o_{o}) AS n_{o}, sum(o_{o}) AS sum_{o}" for o in origins
    )
    per_task = ", ".join(f"avg(task_{o}) AS task_{o}" for o in origins)
    sql = f"""
        WITH e AS (
            {_task_select(keys, f"tokens_in, {values}", _INPUTS)}
        ), calls AS (
            SELECT {by_list}, {per_call}, sum(tokens_in) AS total,
                   {", ".join(f"count(*) FILTER (WHERE seen_{o}) AS seen_{o}" for o in ORIGINS)},
                   count(*) FILTER (WHERE o_{UNOBSERVED} > 0) AS unobserved_calls
            FROM e {group}
        ), tasks AS (
            SELECT {", ".join(map(ident, keys))}, {", ".join(f"sum(o_{o}) AS task_{o}" for o in origins)}
            FROM e GROUP BY ALL
        ), task_means AS (SELECT {by_list}, {per_task} FROM tasks {group})
        SELECT * FROM calls {"JOIN task_means USING (" + by_list + ")" if by else ", task_means"} ORDER BY ALL
    """
    wide = query(sql, table)
    rows = []
    for _, r in wide.iterrows():
        total = r["total"]
        for o in origins:
            if o == UNOBSERVED and not r["unobserved_calls"]:
                continue
            seen = o == UNOBSERVED or r[f"seen_{o}"] > 0
            rows.append(
                {
                    **{k: r[k] for k in by},
                    "origin": o,
                    "per_call_mean": r[f"call_{o}"] if seen else np.nan,
                    "per_task_mean": r[f"task_{o}"] if seen else np.nan,
                    "share": 100.0 * r[f"sum_{o}"] / total
                    if seen and total and not pd.isna(total)
                    else np.nan,
                    "calls": int(r[f"n_{o}"]),
                    "observable": seen,
                }
            )
    return pd.DataFrame(
        rows, columns=[*by, "origin", "per_call_mean", "per_task_mean", "share", "calls", "observable"]
    )


def resend_cost(
    events: Events, by: Sequence[str] = ("topology",), *, include_incomplete: bool = False
) -> pd.DataFrame:
    """Cumulative re-send cost: for every schema, tool result and other input part, how many LLM calls of its task
    carried it and how many tokens were paid again after the first send.

    Columns: ``*by, origin, server, tool, sends, tokens_first, tokens_resent, tokens_total, resent_share``.
    ``schemas`` rows are keyed by the tool whose schema was sent (part key ``<server>/<tool>``); ``tool_results``
    rows by the tool that produced the result (joined through the tool-call id of the S4 event); the unattributed
    part of a provider total is origin :data:`UNOBSERVED`; other origins have no server/tool.

    >>> pa.resend_cost(df).head(10)
    """
    table, by = _prepare(events, by, include_incomplete)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    key_list = ", ".join(map(ident, keys))
    by_cols = ", ".join(map(ident, by)) + "," if by else ""
    sql = f"""
        WITH calls AS (
            {_task_select(keys, "seq, unnest(parts) AS p", f"{_INPUTS} AND parts IS NOT NULL")}
        ), per_key AS (
            SELECT {key_list},
                   CASE WHEN p.origin = 'system' AND p."key" = '{UNOBSERVED}' THEN '{UNOBSERVED}'
                        ELSE p.origin END AS origin,
                   p."key" AS "key", count(*) AS sends,
                   arg_min(p.tokens, seq) AS tokens_first, sum(p.tokens) AS tokens_total
            FROM calls GROUP BY ALL
        ), owners AS (
            SELECT run_id, task_id, tool_call_id,
                   any_value(CAST(server AS VARCHAR)) AS server, any_value(CAST(tool AS VARCHAR)) AS tool
            FROM ev WHERE stage = '{Stage.S4.value}' AND tool_call_id IS NOT NULL GROUP BY ALL
        ), named AS (
            SELECT k.*,
                CASE WHEN k.origin = 'schemas' AND strpos(k."key", '/') = 0 THEN '{BUILTIN_SERVER}'
                     WHEN k.origin = 'schemas' THEN split_part(k."key", '/', 1)
                     WHEN k.origin = 'tool_results' THEN o.server END AS server,
                CASE WHEN k.origin = 'schemas' AND strpos(k."key", '/') > 0
                          THEN substr(k."key", strpos(k."key", '/') + 1)
                     WHEN k.origin = 'schemas' THEN k."key"
                     WHEN k.origin = 'tool_results' THEN o.tool END AS tool
            FROM per_key k LEFT JOIN owners o
              ON k.origin = 'tool_results' AND k.run_id = o.run_id AND k.task_id = o.task_id
                 AND k."key" = o.tool_call_id
        )
        SELECT {by_cols} origin,
               coalesce(server, '{MISSING}') AS server, coalesce(tool, '{MISSING}') AS tool,
               sum(sends) AS sends, sum(tokens_first) AS tokens_first,
               sum(tokens_total) - sum(tokens_first) AS tokens_resent, sum(tokens_total) AS tokens_total
        FROM named GROUP BY ALL
        ORDER BY {by_cols} tokens_resent DESC, origin, server, tool
    """
    out = query(sql, table)
    cols = [
        *by,
        "origin",
        "server",
        "tool",
        "sends",
        "tokens_first",
        "tokens_resent",
        "tokens_total",
        "resent_share",
    ]
    if out.empty:
        return pd.DataFrame(columns=cols)
    for c in ("sends", "tokens_first", "tokens_resent", "tokens_total"):
        out[c] = out[c].astype("int64")
    out["resent_share"] = np.where(
        out["tokens_total"] > 0, 100.0 * out["tokens_resent"] / out["tokens_total"], np.nan
    )
    return out[cols]
