"""Attribution tables over promcp events (pure functions: events in, pandas DataFrame out).

The accounting rules are written down once, in docs/accounting.md, and implemented here:

* every event contributes its tokens and its latency to exactly one phase (:data:`PHASE_TOKENS`);
* a task's phase value is the sum over its events; tables report mean ± std over tasks and each phase's share of
  the mean total (ratio of means);
* events with ``status = context_overflow`` (never sent) and events outside a task (``task_id`` null: session
  start-up) are left out of the phase tables; start-up has its own table (:func:`session_init`).

Every function takes the events as a pandas DataFrame (:func:`promcp.analysis.load`) or an Arrow table
(:func:`promcp.analysis.load_table`). The per-event aggregation runs in DuckDB over the Arrow data (zero-copy,
vectorized, both cores): a million-event report takes about a second instead of the ten a pandas groupby needed.
The per-task statistics (a few thousand rows) are then computed in pandas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from promcp.events import Origin, Phase, Stage

#: The paper's phases (Tables 1 and 2), in display order.
PHASES: Final = tuple(
    p.value for p in (Phase.CONTEXT, Phase.LLM_PLAN, Phase.TOOL_CALL, Phase.TOOL_RESULT, Phase.FINAL_ANSWER)
)
#: The paper's latency segments.
SEGMENTS: Final = ("tool_plan", "tool_execution", "answer_synthesis")
#: Start-up phases of a session.
INIT_PHASES: Final = tuple(
    p.value for p in (Phase.SPAWN, Phase.READY, Phase.INITIALIZE, Phase.TOOLS_DISCOVERY)
)
ORIGINS: Final = tuple(o.value for o in Origin)

#: phase -> (stages that carry it, token column counted for it)
PHASE_TOKENS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    Phase.CONTEXT.value: ((Stage.S1.value, Stage.S5.value), "tokens_in"),
    Phase.LLM_PLAN.value: ((Stage.S2.value,), "tokens_out"),
    Phase.TOOL_CALL.value: ((Stage.S3.value,), "footprint_tokens"),
    Phase.TOOL_RESULT.value: ((Stage.S4.value,), "footprint_tokens"),
    Phase.FINAL_ANSWER.value: ((Stage.S6.value,), "tokens_out"),
}
TASK_KEYS: Final = ("run_id", "task_id")
#: Columns the recorder sets on every event of a run: grouping by them needs no per-task lookup.
RUN_LEVEL: Final = frozenset({"run_id", "topology", "source"})
#: How a missing group key (e.g. no model) is shown.
MISSING: Final = "—"


@dataclass(frozen=True)
class ParquetEvents:
    """Events left on disk: the run files of a dataset, scanned by DuckDB column by column as a query needs them.

    Made by :func:`promcp.analysis.scan`; the fastest input for the tables (nothing is loaded up front).
    """

    files: tuple[Path, ...]
    column_names: tuple[str, ...]


Events: TypeAlias = pd.DataFrame | pa.Table | ParquetEvents

_PHASE_SQL = (
    "CASE "
    + " ".join(
        f"WHEN stage IN ({', '.join(repr(s) for s in stages)}) THEN '{phase}'"
        for phase, (stages, _) in PHASE_TOKENS.items()
    )
    + " END"
)
_TOKENS_SQL = (
    "CASE "
    + " ".join(
        f"WHEN stage IN ({', '.join(repr(s) for s in stages)}) THEN {col}"
        for stages, col in PHASE_TOKENS.values()
    )
    + " END"
)
_TASK_ROWS = "task_id IS NOT NULL AND stage <> 'INIT' AND coalesce(status, 'ok') <> 'context_overflow'"


def _arrow(events: Events) -> pa.Table | ParquetEvents:
    if isinstance(events, pa.Table | ParquetEvents):
        return events
    return pa.Table.from_pandas(events, preserve_index=False)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _check_by(table: pa.Table | ParquetEvents, by: Sequence[str]) -> list[str]:
    missing = [c for c in by if c not in table.column_names]
    if missing:
        raise KeyError(f"cannot group by {', '.join(missing)}: not an event column")
    return list(by)


def _task_select(keys: Sequence[str], cols: str, extra: str = "") -> str:
    """``SELECT <keys>, <cols>`` over the task events (``e``-style rows), with task-level group keys.

    A task's group value is its first non-null value of the column among all its events (e.g. ``model`` is set on
    LLM events but not on tool events), so grouping by it never splits a task in two. ``run_id`` and ``task_id``
    come out as text; other keys as text with a visible placeholder for a missing value.
    """
    extra_keys = [c for c in keys if c not in TASK_KEYS and c not in RUN_LEVEL]
    tk_cols = "".join(f", any_value({_ident(c)}) AS _k{i}" for i, c in enumerate(extra_keys))
    out_keys = []
    for c in keys:
        if c in TASK_KEYS:
            out_keys.append(f"CAST(b.{_ident(c)} AS VARCHAR) AS {_ident(c)}")
        elif c in RUN_LEVEL:
            out_keys.append(f"coalesce(CAST(b.{_ident(c)} AS VARCHAR), '{MISSING}') AS {_ident(c)}")
        else:
            i = extra_keys.index(c)
            out_keys.append(f"coalesce(CAST(tk._k{i} AS VARCHAR), '{MISSING}') AS {_ident(c)}")
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


def _query(sql: str, table: pa.Table | ParquetEvents) -> pd.DataFrame:
    con = duckdb.connect()
    try:
        if isinstance(table, ParquetEvents):
            files = ", ".join("'" + str(f).replace("'", "''") + "'" for f in table.files)
            con.execute(
                f"CREATE VIEW ev AS SELECT * FROM read_parquet([{files}], union_by_name = true, "
                "hive_partitioning = false)"
            )
        else:
            con.register("ev", table)
        return con.execute(sql).df()
    finally:
        con.close()


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
                f"ELSE sum({value}) FILTER (WHERE {cond}) END AS {_ident(prefix + item)}"
            )
        else:
            cols.append(f"coalesce(sum({value}) FILTER (WHERE {cond}), 0) AS {_ident(prefix + item)}")
    return ", ".join(cols)


def _stats(
    per_task: pd.DataFrame, by: list[str], items: Sequence[str], item_name: str, value: str
) -> pd.DataFrame:
    """mean, std and share of mean total for each item column of a per-task frame."""
    rows = []
    groups = per_task.groupby(by, sort=True, dropna=False, observed=True) if by else [((), per_task)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        values = part[list(items)].astype("float64")
        total = values.sum(axis=1, min_count=1)
        total_mean = total.mean()
        for item in (*items, "total"):
            col = total if item == "total" else values[item]
            mean = col.mean()
            n = int(col.count())
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    item_name: item,
                    f"{value}_mean": mean,
                    f"{value}_std": col.std(ddof=1) if n > 1 else np.nan,  # undefined for a single task
                    f"{value}_share": (100.0 * mean / total_mean)
                    if total_mean and not np.isnan(total_mean)
                    else np.nan,
                    "tasks": n,
                }
            )
    return pd.DataFrame(rows)


def task_phase_totals(events: Events, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """One row per task: tokens and latency per phase (columns ``tokens_<phase>``, ``latency_<phase>``)."""
    table = _arrow(events)
    by = _check_by(table, by)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    tok_cols = _per_item_sql("phase_", PHASES, "tokens", null_when_unknown=False, prefix="tokens_")
    lat_cols = _per_item_sql("phase_", PHASES, "latency_ms", null_when_unknown=True, prefix="latency_")
    sql = f"""
        WITH e AS (
            {_task_select(keys, f"{_PHASE_SQL} AS phase_, CAST({_TOKENS_SQL} AS DOUBLE) AS tokens, latency_ms")}
        )
        SELECT {", ".join(map(_ident, keys))}, {tok_cols}, {lat_cols} FROM e GROUP BY ALL
    """
    out = _query(sql, table)
    return out[[*keys, *(f"tokens_{p}" for p in PHASES), *(f"latency_{p}" for p in PHASES)]]


def phase_attribution(events: Events, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """Tokens and latency per phase (the paper's Tables 1 and 2): mean ± std over tasks and % share per group.

    Columns: ``*by, phase, tokens_mean, tokens_std, tokens_share, latency_ms_mean, latency_ms_std,
    latency_ms_share, tasks``. ``phase`` runs over :data:`PHASES`, ``total`` (the token flow) and ``llm_billed``
    (what an LLM provider bills: ``context + llm_plan + final_answer``; its latency is the time spent in LLM calls),
    whose share is of the total.
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
    ]
    per_task = task_phase_totals(events, by)
    by = list(by)
    if per_task.empty:
        return pd.DataFrame(columns=[*by, *columns])
    tok = per_task.rename(columns={f"tokens_{p}": p for p in PHASES})
    lat = per_task.rename(columns={f"latency_{p}": p for p in PHASES})
    t = _stats(tok, by, PHASES, "phase", "tokens")
    lt = _stats(lat, by, PHASES, "phase", "latency_ms").drop(columns=["tasks"])
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
    """The LLM-billed tokens of a group's tasks (context + llm_plan + final_answer), share of the token flow."""
    mask = pd.Series(True, index=tok.index)
    for col, value in zip(by, key, strict=True):
        mask &= tok[col] == value
    billed_cols = [Phase.CONTEXT.value, Phase.LLM_PLAN.value, Phase.FINAL_ANSWER.value]
    row: dict[str, object] = {**dict(zip(by, key, strict=True)), "phase": "llm_billed"}
    for name, frame in (("tokens", tok), ("latency_ms", lat)):
        part = frame.loc[mask, list(PHASES)].astype("float64")
        billed = part[billed_cols].sum(axis=1, min_count=1)
        total_mean = part.sum(axis=1, min_count=1).mean()
        n = int(billed.count())
        row[f"{name}_mean"] = billed.mean()
        row[f"{name}_std"] = billed.std(ddof=1) if n > 1 else np.nan
        row[f"{name}_share"] = 100.0 * billed.mean() / total_mean if total_mean else np.nan
        if name == "tokens":
            row["tasks"] = n
    return row


def latency_segments(events: Events, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """The paper's three latency segments per task: tool-plan (S1–S2), tool-execution (S3–S4),
    answer-synthesis (S5–S6); mean ± std over tasks and share.

    An LLM call (the input event S1/S5 and the output event S2/S6 of one round) belongs to tool-plan when its output
    is a tool call (S2) and to answer-synthesis when its output is the answer (S6); a call without an output event
    (it failed) counts as tool-plan. Tool execution is every S3 and S4 latency.
    """
    table = _arrow(events)
    by = _check_by(table, by)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    key_list = ", ".join(map(_ident, keys))
    seg_cols = _per_item_sql("segment", SEGMENTS, "latency_ms", null_when_unknown=True)
    sql = f"""
        WITH e AS (
            {_task_select(keys, '"round", CAST(stage AS VARCHAR) AS stage, latency_ms')}
        ), answers AS (SELECT DISTINCT run_id, task_id, "round" FROM e WHERE stage = 'S6'),
        s AS (
            SELECT e.*, CASE WHEN e.stage IN ('S3', 'S4') THEN 'tool_execution'
                             WHEN answers."round" IS NOT NULL THEN 'answer_synthesis'
                             ELSE 'tool_plan' END AS segment
            FROM e LEFT JOIN answers ON e.run_id = answers.run_id AND e.task_id = answers.task_id
                                     AND e."round" = answers."round"
        )
        SELECT {key_list}, {seg_cols} FROM s GROUP BY ALL
    """
    per_task = _query(sql, table)
    if per_task.empty:
        return pd.DataFrame(
            columns=[*by, "segment", "latency_ms_mean", "latency_ms_std", "latency_ms_share", "tasks"]
        )
    return _stats(per_task, by, SEGMENTS, "segment", "latency_ms")


def session_init(events: Events, by: Sequence[str] = ("topology", "server", "transport")) -> pd.DataFrame:
    """Session start-up per server and transport: spawn, ready, initialize and tools-discovery latency (mean, std),
    tools listed, and the schema footprint of ``tools/list`` (tokens under ``tokenizer``, bytes). ``failures``
    counts failed start-up phases; a ``server/discover`` the server refused (phase ``probe``) is counted in
    ``probes`` instead: the client falls back to ``initialize``, nothing failed."""
    table = _arrow(events)
    by = _check_by(table, by)
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
    init = _query(f"SELECT {', '.join(map(_ident, present))} FROM ev WHERE stage = 'INIT'", table)
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


def input_origins(events: Events, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """Input tokens of LLM calls by origin (system, schemas, user, history, tool results): mean per call, mean per
    task, and share of all input tokens."""
    table = _arrow(events)
    by = _check_by(table, by)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    by_list = ", ".join(map(_ident, by)) if by else "NULL AS _all"
    group = "GROUP BY ALL" if by else ""
    per_call = ", ".join(
        f"avg(in_{o}) AS call_{o}, count(in_{o}) AS n_{o}, sum(in_{o}) AS sum_{o}" for o in ORIGINS
    )
    per_task = ", ".join(f"avg(task_{o}) AS task_{o}" for o in ORIGINS)
    sql = f"""
        WITH e AS (
            {_task_select(keys, "tokens_in, " + ", ".join(f"in_{o}" for o in ORIGINS), "stage IN ('S1', 'S5')")}
        ), calls AS (SELECT {by_list}, {per_call}, sum(tokens_in) AS total FROM e {group}),
        tasks AS (
            SELECT {", ".join(map(_ident, keys))}, {", ".join(f"sum(in_{o}) AS task_{o}" for o in ORIGINS)}
            FROM e GROUP BY ALL
        ), task_means AS (SELECT {by_list}, {per_task} FROM tasks {group})
        SELECT * FROM calls {"JOIN task_means USING (" + by_list + ")" if by else ", task_means"} ORDER BY ALL
    """
    wide = _query(sql, table)
    rows = []
    for _, r in wide.iterrows():
        total = r["total"]
        for o in ORIGINS:
            rows.append(
                {
                    **{k: r[k] for k in by},
                    "origin": o,
                    "per_call_mean": r[f"call_{o}"],
                    "per_task_mean": r[f"task_{o}"],
                    "share": 100.0 * r[f"sum_{o}"] / total if total and not pd.isna(total) else np.nan,
                    "calls": int(r[f"n_{o}"]),
                }
            )
    return pd.DataFrame(rows, columns=[*by, "origin", "per_call_mean", "per_task_mean", "share", "calls"])


def resend_cost(events: Events, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """Cumulative re-send cost: for every schema, tool result and other input part, how many LLM calls of its task
    carried it and how many tokens were paid again after the first send.

    Columns: ``*by, origin, server, tool, sends, tokens_first, tokens_resent, tokens_total, resent_share``.
    ``schemas`` rows are keyed by the tool whose schema was sent (part key ``<server>/<tool>``); ``tool_results``
    rows by the tool that produced the result (joined through the tool-call id of the S4 event); other origins have
    no server/tool.
    """
    table = _arrow(events)
    by = _check_by(table, by)
    keys = list(dict.fromkeys([*by, *TASK_KEYS]))
    key_list = ", ".join(map(_ident, keys))
    by_list = ", ".join(f"k.{_ident(c)}" for c in by)
    sql = f"""
        WITH calls AS (
            {_task_select(keys, "seq, unnest(parts) AS p", "stage IN ('S1', 'S5') AND parts IS NOT NULL")}
        ), per_key AS (
            SELECT {key_list}, p.origin AS origin, p."key" AS "key", count(*) AS sends,
                   arg_min(p.tokens, seq) AS tokens_first, sum(p.tokens) AS tokens_total
            FROM calls GROUP BY ALL
        ), owners AS (
            SELECT CAST(run_id AS VARCHAR) AS run_id, CAST(task_id AS VARCHAR) AS task_id, tool_call_id,
                   any_value(CAST(server AS VARCHAR)) AS server, any_value(CAST(tool AS VARCHAR)) AS tool
            FROM ev WHERE stage = 'S4' AND tool_call_id IS NOT NULL GROUP BY ALL
        ), named AS (
            SELECT k.*,
                CASE WHEN k.origin = 'schemas' THEN split_part(k."key", '/', 1)
                     WHEN k.origin = 'tool_results' THEN o.server END AS server,
                CASE WHEN k.origin = 'schemas' AND strpos(k."key", '/') > 0
                          THEN substr(k."key", strpos(k."key", '/') + 1)
                     WHEN k.origin = 'tool_results' THEN o.tool END AS tool
            FROM per_key k LEFT JOIN owners o
              ON k.origin = 'tool_results' AND k.run_id = o.run_id AND k.task_id = o.task_id
                 AND k."key" = o.tool_call_id
        )
        SELECT {", ".join(map(_ident, by)) + "," if by else ""} origin,
               coalesce(server, '{MISSING}') AS server, coalesce(tool, '{MISSING}') AS tool,
               sum(sends) AS sends, sum(tokens_first) AS tokens_first,
               sum(tokens_total) - sum(tokens_first) AS tokens_resent, sum(tokens_total) AS tokens_total
        FROM named GROUP BY ALL
        ORDER BY {", ".join(map(_ident, by)) + "," if by else ""} tokens_resent DESC, origin, server, tool
    """
    del by_list
    out = _query(sql, table)
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
