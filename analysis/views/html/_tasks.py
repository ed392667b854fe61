"""Per-task data of the page: which events make up a task's timeline, the waterfall bars, and the context fill of
every LLM call.

A task's timeline is its own events plus the session start-up it waited for: session events (``INIT``, and MCP
protocol or MCP-proxy events without a task id, :data:`promcp.analysis.engine.SESSION_SQL`) carry no task, so each
is attributed to the first task of its run that starts after it in ``seq`` order — the host
starts a server when the first task that needs it begins, and an instrumented process initializes its sessions
before using them. Start-up recorded after a run's last task goes to that last task.

Bars are laid out on the task's own clock: an event's start is its wall-clock ``t_start_ns`` relative to the
task's first timed event; an event without a start is placed after the previous bar. Its length is ``latency_ms``
(a monotonic clock), else ``t_end_ns - t_start_ns``; an event with neither is drawn with a nominal length and marked
as not measured. ``timing_quality`` travels with every bar so the chart draws bounded and untimed events apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd

from promcp.analysis.engine import SESSION_SQL, TASK_EVENT_SQL, Events, as_arrow
from promcp.analysis.load import attrs_of
from promcp.analysis.tables import ORIGINS, UNOBSERVED, unobserved_sql
from promcp.analysis.task_sql import PHASE_TOKENS
from promcp.analysis.views.html._frames import (
    STARTUP_ONLY,
    clean,
    number,
    query,
    select_list,
    sql_text,
)

#: stage → the token column the accounting rule counts for it (docs/accounting.md); INIT counts its footprint.
TOKEN_COLUMN: Final[dict[str, str]] = {
    "INIT": "footprint_tokens",
    **{stage: col for stages, col in PHASE_TOKENS.values() for stage in stages},
}
_LLM_INPUT: Final = ("S1", "S5")
#: Stack order of the context-fill parts: the origins; the part of the input the source could not see (an
#: import's client-side system prompt and tools, :data:`~promcp.analysis.tables.UNOBSERVED`, as in the report's
#: origin table); the rest of a provider's total no origin accounts for; then the cache split.
PARTS: Final = (*ORIGINS, UNOBSERVED, "unattributed", "cache read", "cache write", "uncached")
_SEP: Final = "\x1f"

EVENT_COLUMNS: Final = (
    "run_id",
    "topology",
    "task_id",
    "seq",
    "round",
    "stage",
    "phase",
    "server",
    "tool",
    "t_start_ns",
    "t_end_ns",
    "latency_ms",
    "timing_quality",
    "tokens_in",
    "tokens_out",
    "footprint_tokens",
    "token_source",
    "tokenizer",
    "status",
    "error_type",
    "model",
    "context_window",
    "cache_read_tokens",
    "cache_write_tokens",
    *(f"in_{o}" for o in ORIGINS),
    "attrs",
)


@dataclass(frozen=True)
class Limits:
    """How much per-task detail the page embeds (the summary, schema weight and what-if always cover everything):
    ``tasks``/``events`` for the timelines and context fill, ``tools`` for the schema-weight charts, ``rows`` for
    each table of the task section (tasks, errors, overflows; incomplete tasks first)."""

    tasks: int = 1_000
    events: int = 30_000
    tools: int = 60
    rows: int = 500


@dataclass
class TaskData:
    """``index``: one row per embedded task; ``timeline``: one row per bar; ``calls``: context fill, long format
    (one row per call and part); ``windows``: one row per LLM call (total, window, overflow); ``total``: tasks in
    the dataset."""

    index: pd.DataFrame
    timeline: pd.DataFrame
    calls: pd.DataFrame
    windows: pd.DataFrame
    total: int
    events_total: int


def _group_index(events: Events) -> pd.DataFrame:
    """Every task of the selection (a run's events without a task id are its implicit task, as in the report) with
    its event count, start-up attributed."""
    tasks = query(
        events,
        f"""SELECT CAST(run_id AS VARCHAR) AS run_id, any_value(CAST(topology AS VARCHAR)) AS topology,
               CAST(task_id AS VARCHAR) AS task, min(seq) AS first_seq,
               count(*) AS events, max("round") AS rounds,
               count(*) FILTER (WHERE coalesce(CAST(status AS VARCHAR), 'ok') <> 'ok') AS problems
           FROM ev WHERE {TASK_EVENT_SQL} GROUP BY 1, 3""",
    )
    init = query(
        events,
        "SELECT CAST(run_id AS VARCHAR) AS run_id, CAST(topology AS VARCHAR) AS topology, seq "
        f"FROM ev WHERE {SESSION_SQL}",
    )
    init = attribute_init(init, tasks)
    counts = init.groupby(["run_id", "task"], sort=False).size().rename("init").reset_index()
    startup = init[init["task"] == STARTUP_ONLY]
    if len(startup):
        only = startup.groupby("run_id", sort=False).agg(
            topology=("topology", "first"), first_seq=("seq", "min")
        )
        only = only.reset_index().assign(task=STARTUP_ONLY, events=0, rounds=np.nan, problems=0)
        tasks = pd.concat([tasks, only], ignore_index=True) if len(tasks) else only
    if tasks.empty:
        return pd.DataFrame(
            columns=["run_id", "topology", "task", "first_seq", "events", "rounds", "problems"]
        )
    tasks = tasks.merge(counts, on=["run_id", "task"], how="left")
    tasks["events"] = tasks["events"].astype("int64") + tasks["init"].fillna(0).astype("int64")
    tasks = tasks.drop(columns="init").sort_values(["run_id", "first_seq"], kind="stable")
    return tasks.reset_index(drop=True)


def attribute_init(init: pd.DataFrame, tasks: pd.DataFrame) -> pd.DataFrame:
    """``init`` (run_id, seq, …) with a ``task`` column: the first group of the run starting after each event, else
    the run's last group, else :data:`STARTUP_ONLY`."""
    out = init.sort_values("seq", kind="stable").reset_index(drop=True)
    out["task"] = pd.Series([None] * len(out), dtype=object)
    if out.empty:
        return out
    if len(tasks):
        right = tasks[["run_id", "first_seq", "task"]].sort_values("first_seq", kind="stable")
        right = right.astype({"first_seq": "int64"})
        left = out[["run_id", "seq"]].astype({"seq": "int64"})
        fwd = pd.merge_asof(
            left, right, left_on="seq", right_on="first_seq", by="run_id", direction="forward"
        )
        back = pd.merge_asof(
            left, right, left_on="seq", right_on="first_seq", by="run_id", direction="backward"
        )
        out["task"] = fwd["task"].where(fwd["task"].notna(), back["task"]).to_numpy()
    out["task"] = out["task"].where(out["task"].notna(), STARTUP_ONLY)
    return out


def choose(index: pd.DataFrame, limits: Limits) -> pd.DataFrame:
    """The tasks whose detail is embedded: round-robin over runs in run order, each run's tasks in order, until
    :attr:`Limits.tasks` tasks or :attr:`Limits.events` events (the first task always)."""
    if index.empty:
        return index
    runs = {r: i for i, r in enumerate(dict.fromkeys(index["run_id"]))}
    order = index.assign(_rank=index.groupby("run_id", sort=False).cumcount(), _run=index["run_id"].map(runs))
    order = order.sort_values(["_rank", "_run"], kind="stable")
    fits = order["events"].cumsum() <= limits.events
    fits.iloc[0] = True
    picked = order[fits.to_numpy()].head(max(1, limits.tasks))
    return picked.sort_values(["_run", "first_seq"], kind="stable").drop(columns=["_rank", "_run"])


def _events_of(events: Events, picked: pd.DataFrame) -> pd.DataFrame:
    runs = ", ".join(sql_text(r) for r in dict.fromkeys(picked["run_id"]))
    keys = ", ".join(sql_text(f"{r}{_SEP}{t}") for r, t in zip(picked["run_id"], picked["task"], strict=True))
    group = "CAST(run_id AS VARCHAR) || chr(31) || CAST(task_id AS VARCHAR)"
    unobserved = unobserved_sql(as_arrow(events).column_names)
    return query(
        events,
        f"""SELECT {select_list(events, EVENT_COLUMNS)}, {unobserved} AS in_{UNOBSERVED} FROM ev
            WHERE CAST(run_id AS VARCHAR) IN ({runs})
              AND ({SESSION_SQL} OR {group} IN ({keys}))
            ORDER BY run_id, seq""",
    )


def task_data(events: Events, limits: Limits) -> TaskData:
    """The embedded tasks' index, waterfall bars and context fill."""
    index = _group_index(events)
    picked = choose(index, limits)
    empty = TaskData(index.head(0), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), len(index), 0)
    if picked.empty:
        return empty
    rows = _events_of(events, picked)
    task = rows["task_id"].astype(object)  # session events have none: attributed below
    is_init = (rows["stage"] == "INIT") | rows["task_id"].isna()
    if is_init.any():
        init = attribute_init(rows.loc[is_init, ["run_id", "seq"]].reset_index(), index)
        task.loc[init["index"].to_numpy()] = init["task"].to_numpy()
    rows["task"] = task.to_numpy()
    wanted = set(zip(picked["run_id"], picked["task"], strict=True))
    keep = [(r, t) in wanted for r, t in zip(rows["run_id"], rows["task"], strict=True)]
    rows = rows[keep].reset_index(drop=True)
    picked = picked.reset_index(drop=True)
    picked["key"] = np.arange(len(picked))
    keys = {(r, t): k for r, t, k in zip(picked["run_id"], picked["task"], picked["key"], strict=True)}
    rows["key"] = [keys[(r, t)] for r, t in zip(rows["run_id"], rows["task"], strict=True)]
    records = _records(rows)
    timeline = _timeline(records)
    calls, windows = _context(records)
    timed = timeline.groupby("key", sort=False)["timed"].any() if len(timeline) else pd.Series(dtype=bool)
    picked["timed"] = picked["key"].map(timed).fillna(False).astype(bool)
    picked["llm_calls"] = picked["key"].map(windows.groupby("key").size() if len(windows) else {}).fillna(0)
    return TaskData(
        picked.reset_index(drop=True), timeline, calls, windows, len(index), int(index["events"].sum())
    )


def _records(rows: pd.DataFrame) -> dict[int, list[dict[str, Any]]]:
    """The events of each embedded task (by key), in ``seq`` order, as plain dicts with JSON-safe values."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows.to_dict(orient="records"):
        out.setdefault(int(r["key"]), []).append({k: clean(v) for k, v in r.items()})
    return out


def _label(stage: str, r: dict[str, Any]) -> str:
    server, tool = r["server"], r["tool"]
    if stage == "INIT":
        return f"INIT {server or '?'} · {r['phase']}"
    where = f"{server}/{tool}" if server and tool else (tool or server or "")
    rnd = f"r{int(r['round'])}" if number(r["round"]) is not None else ""
    return " · ".join(p for p in (stage, rnd, where) if p)


def _timeline(groups: dict[int, list[dict[str, Any]]]) -> pd.DataFrame:
    out: list[dict[str, Any]] = []
    for key, g in groups.items():
        starts = [v for v in (number(r["t_start_ns"]) for r in g) if v is not None]
        t0 = min(starts) if starts else None
        cursor = 0.0
        bars: list[dict[str, Any]] = []
        for i, r in enumerate(g):
            stage = str(r["stage"])
            start_ns, end_ns = number(r["t_start_ns"]), number(r["t_end_ns"])
            start = (start_ns - t0) / 1e6 if start_ns is not None and t0 is not None else None
            quality = r["timing_quality"] or "none"
            dur = number(r["latency_ms"]) if quality != "none" else None
            if (
                dur is None
                and quality != "none"
                and start_ns is not None
                and end_ns is not None
                and end_ns >= start_ns
            ):
                dur = (end_ns - start_ns) / 1e6
            x0 = start if start is not None else cursor
            cursor = max(cursor, x0 + (dur or 0.0))
            col = TOKEN_COLUMN.get(stage)
            tokens = number(r[col]) if col else None
            if dur is None:
                quality = "none"
            bars.append(
                {
                    "key": key,
                    "i": i,
                    "row": f"{i + 1:>3}  {_label(stage, r)}",
                    "stage": stage,
                    "phase": r["phase"],
                    "round": r["round"],
                    "server": r["server"],
                    "tool": r["tool"],
                    "x0": x0,
                    "dur": dur,
                    "placed": "measured" if start is not None else "after the previous event",
                    "tokens": tokens,
                    "token_column": col,
                    "tokenizer": r["tokenizer"],
                    "token_source": r["token_source"] or "none",
                    "timing_quality": quality,
                    "status": r["status"] or "ok",
                    "error_type": r["error_type"],
                    "seq": r["seq"],
                }
            )
        span = max([b["x0"] + (b["dur"] or 0.0) for b in bars] + [0.0])
        nominal = max(span * 0.02, 0.5) if span > 0 else 1.0
        timed = any(b["dur"] is not None or b["placed"] == "measured" for b in bars)
        for b in bars:
            b["x1"] = b["x0"] + (b["dur"] if b["dur"] is not None else nominal)
            b["timed"] = timed
            b["label"] = _bar_label(b)
        out.extend(bars)
    return pd.DataFrame(out)


def _bar_label(b: dict[str, Any]) -> str:
    parts = []
    if b["tokens"] is not None:
        parts.append(f"{b['tokens']:,.0f} tok")
    q, dur = b["timing_quality"], b["dur"]
    if dur is None:
        parts.append("no timing")
    elif q == "bounded":
        parts.append(f"≤ {dur:,.1f} ms")
    elif q == "derived":
        parts.append(f"~{dur:,.1f} ms")
    else:
        parts.append(f"{dur:,.1f} ms")
    if b["status"] != "ok":
        parts.append(str(b["status"]))
    return " · ".join(parts)


def _context(groups: dict[int, list[dict[str, Any]]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Context fill rows (``kind`` ``origin`` and, where the provider reported caching, ``cache``)."""
    parts: list[dict[str, Any]] = []
    windows: list[dict[str, Any]] = []
    for key, g in groups.items():
        for i, r in enumerate(e for e in g if e["stage"] in _LLM_INPUT):
            rnd = number(r["round"])
            call = f"{i + 1} · {r['stage']} r{int(rnd)}" if rnd is not None else f"{i + 1} · {r['stage']}"
            total = number(r["tokens_in"])
            known = 0.0
            hidden = number(r[f"in_{UNOBSERVED}"]) or 0.0
            for o in (*ORIGINS, UNOBSERVED):
                v = number(r[f"in_{o}"])
                if o == "system" and v is not None:
                    v -= hidden  # the unobserved part is counted inside in_system; it is its own part here
                if v:
                    parts.append(
                        {"key": key, "i": i, "call": call, "kind": "by origin", "part": o, "tokens": v}
                    )
                    known += v
            if total is not None and total > known:
                parts.append(
                    {"key": key, "i": i, "call": call, "kind": "by origin", "part": "unattributed",
                     "tokens": total - known}
                )  # fmt: skip
            a = attrs_of(r["attrs"])
            unseen = [o for o in ORIGINS if a.get(f"{o}_observable") is False]
            # columns since schema v2; older files kept them in attrs
            read, write = number(r["cache_read_tokens"]), number(r["cache_write_tokens"])
            if read is None and write is None:
                read, write = number(a.get("cache_read_tokens")), number(a.get("cache_write_tokens"))
            if total is not None and (read is not None or write is not None):
                for part, v in (
                    ("cache read", read or 0.0),
                    ("cache write", write or 0.0),
                    ("uncached", max(total - (read or 0.0) - (write or 0.0), 0.0)),
                ):
                    parts.append(
                        {"key": key, "i": i, "call": call, "kind": "cache", "part": part, "tokens": v}
                    )
            windows.append(
                {
                    "key": key,
                    "i": i,
                    "call": call,
                    "tokens_in": total,
                    "context_window": number(r["context_window"]),
                    "overflow": r["status"] == "context_overflow",
                    "status": r["status"] or "ok",
                    "model": r["model"],
                    "tokenizer": r["tokenizer"],
                    "token_source": r["token_source"],
                    "cache_read": read,
                    "cache_write": write,
                    "not_observable": ", ".join(unseen) or None,
                }
            )
    frame = pd.DataFrame(parts)
    if len(frame):
        frame["o"] = frame["part"].map({p: i for i, p in enumerate(PARTS)})
    return frame, pd.DataFrame(windows)
