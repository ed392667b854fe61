"""Attribution tables over promcp events (pure functions: DataFrame in, DataFrame out).

The accounting rules are written down once, in docs/accounting.md, and implemented here:

* every event contributes its tokens and its latency to exactly one phase (:data:`PHASE_TOKENS`);
* a task's phase value is the sum over its events; tables report mean ± std over tasks and each phase's share of
  the mean total (ratio of means);
* events with ``status = context_overflow`` (never sent) and events outside a task (``task_id`` null: session
  start-up) are left out of the phase tables; start-up has its own table (:func:`session_init`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

#: The paper's phases (Tables 1 and 2), in display order.
PHASES: Final = ("context", "llm_plan", "tool_call", "tool_result", "final_answer")
#: The paper's latency segments.
SEGMENTS: Final = ("tool_plan", "tool_execution", "answer_synthesis")
#: Start-up phases of a session.
INIT_PHASES: Final = ("spawn", "ready", "initialize", "tools_discovery")
ORIGINS: Final = ("system", "schemas", "user", "history", "tool_results")

#: phase -> (stages that carry it, token column counted for it)
PHASE_TOKENS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "context": (("S1", "S5"), "tokens_in"),
    "llm_plan": (("S2",), "tokens_out"),
    "tool_call": (("S3",), "footprint_tokens"),
    "tool_result": (("S4",), "footprint_tokens"),
    "final_answer": (("S6",), "tokens_out"),
}

_STAGE_TO_PHASE = {stage: phase for phase, (stages, _) in PHASE_TOKENS.items() for stage in stages}
TASK_KEYS: Final = ("run_id", "task_id")


def _task_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Events that belong to a task and were actually sent."""
    mask = df["task_id"].notna() & (df["stage"].astype(str) != "INIT")
    if "status" in df:
        mask &= df["status"].astype(str) != "context_overflow"
    return df.loc[mask]


def _as_str(series: pd.Series) -> pd.Series:
    """Categorical/object keys as plain strings with a visible placeholder for missing values."""
    return series.astype(object).where(series.notna(), "—").astype(str)


def _group_keys(df: pd.DataFrame, by: Sequence[str]) -> list[str]:
    missing = [c for c in by if c not in df.columns]
    if missing:
        raise KeyError(f"cannot group by {', '.join(missing)}: not an event column")
    return list(by)


def _stats(
    per_task: pd.DataFrame, by: list[str], items: Sequence[str], item_name: str, value: str
) -> pd.DataFrame:
    """mean, std and share of mean total for each item column of a per-task frame."""
    rows = []
    groups = per_task.groupby(by, sort=True, dropna=False, observed=True) if by else [((), per_task)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        total = part[list(items)].sum(axis=1, min_count=1)
        total_mean = total.mean()
        for item in (*items, "total"):
            col = total if item == "total" else part[item]
            mean = col.mean()
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    item_name: item,
                    f"{value}_mean": mean,
                    f"{value}_std": col.std(ddof=1)
                    if col.count() > 1
                    else 0.0
                    if col.count() == 1
                    else np.nan,
                    f"{value}_share": (100.0 * mean / total_mean)
                    if total_mean and not np.isnan(total_mean)
                    else np.nan,
                    "tasks": int(col.count()),
                }
            )
    return pd.DataFrame(rows)


def _per_task(
    frame: pd.DataFrame, keys: list[str], item: str, items: Sequence[str], value: str, min_count: int
) -> pd.DataFrame:
    """Sum ``value`` per task and ``item`` into one column per item.

    An item with no events in a task counts 0; an item whose events all lack the value stays NaN (unknown), so
    means skip it instead of pretending it cost nothing.
    """
    grouped = frame.groupby([*keys, item], sort=False, observed=True)[value]
    sums = grouped.sum(min_count=min_count).unstack(item)
    present = grouped.size().unstack(item)
    out = pd.DataFrame(index=sums.index)
    for name in items:
        if name in sums:
            out[name] = sums[name].where(present[name].notna(), 0.0)
        else:
            out[name] = 0.0
    return out


def task_phase_totals(df: pd.DataFrame, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """One row per task: tokens and latency per phase (columns ``tokens_<phase>``, ``latency_<phase>``)."""
    by = _group_keys(df, by)
    work = _task_rows(df)
    stage = work["stage"].astype(str)
    phase = stage.map(_STAGE_TO_PHASE)
    tokens = np.select(
        [stage.isin(["S1", "S5"]).to_numpy(), stage.isin(["S2", "S6"]).to_numpy()],
        [
            work["tokens_in"].to_numpy(dtype="float64", na_value=np.nan),
            work["tokens_out"].to_numpy(dtype="float64", na_value=np.nan),
        ],
        work["footprint_tokens"].to_numpy(dtype="float64", na_value=np.nan),
    )
    keys = [*by, *TASK_KEYS]
    frame = pd.DataFrame({k: _as_str(work[k]) for k in keys})
    frame["phase"] = phase.to_numpy()
    frame["tokens"] = tokens
    frame["latency"] = work["latency_ms"].to_numpy(dtype="float64", na_value=np.nan)
    tokens_wide = _per_task(frame, keys, "phase", PHASES, "tokens", min_count=0)
    latency_wide = _per_task(frame, keys, "phase", PHASES, "latency", min_count=1)
    out = pd.concat([tokens_wide.add_prefix("tokens_"), latency_wide.add_prefix("latency_")], axis=1)
    return out.reset_index()


def phase_attribution(df: pd.DataFrame, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """Tokens and latency per phase (the paper's Tables 1 and 2): mean ± std over tasks and % share per group.

    Columns: ``*by, phase, tokens_mean, tokens_std, tokens_share, latency_ms_mean, latency_ms_std,
    latency_ms_share, tasks``. ``phase`` runs over :data:`PHASES` and ``total``.
    """
    by = _group_keys(df, by)
    per_task = task_phase_totals(df, by)
    if per_task.empty:
        return pd.DataFrame(
            columns=[
                *by,
                "phase",
                "tokens_mean",
                "tokens_std",
                "tokens_share",
                "latency_ms_mean",
                "latency_ms_std",
                "latency_ms_share",
                "tasks",
            ]
        )
    tok = per_task.rename(columns={f"tokens_{p}": p for p in PHASES})
    lat = per_task.rename(columns={f"latency_{p}": p for p in PHASES})
    t = _stats(tok, by, PHASES, "phase", "tokens")
    lt = _stats(lat, by, PHASES, "phase", "latency_ms").drop(columns=["tasks"])
    return t.merge(lt, on=[*by, "phase"], how="left")[
        [
            *by,
            "phase",
            "tokens_mean",
            "tokens_std",
            "tokens_share",
            "latency_ms_mean",
            "latency_ms_std",
            "latency_ms_share",
            "tasks",
        ]
    ]


def latency_segments(df: pd.DataFrame, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """The paper's three latency segments per task: tool-plan (S1–S2), tool-execution (S3–S4),
    answer-synthesis (S5–S6); mean ± std over tasks and share.

    An LLM call (the input event S1/S5 and the output event S2/S6 of one round) belongs to tool-plan when its output
    is a tool call (S2) and to answer-synthesis when its output is the answer (S6); a call without an output event
    (it failed) counts as tool-plan. Tool execution is every S3 and S4 latency.
    """
    by = _group_keys(df, by)
    work = _task_rows(df)
    keys = [*by, *TASK_KEYS]
    stage = work["stage"].astype(str).to_numpy()
    frame = pd.DataFrame({k: _as_str(work[k]) for k in keys})
    frame["round"] = work["round"].to_numpy(dtype="float64", na_value=np.nan)
    frame["stage"] = stage
    frame["latency"] = work["latency_ms"].to_numpy(dtype="float64", na_value=np.nan)
    answer_rounds = frame.loc[frame["stage"] == "S6", [*TASK_KEYS, "round"]].drop_duplicates()
    answer_rounds["_answer"] = True
    frame = frame.merge(answer_rounds, on=[*TASK_KEYS, "round"], how="left")
    is_answer = frame["_answer"].eq(True).to_numpy()
    llm = np.isin(stage, ["S1", "S2", "S5", "S6"])
    frame["segment"] = np.where(
        np.isin(stage, ["S3", "S4"]),
        "tool_execution",
        np.where(llm & is_answer, "answer_synthesis", np.where(llm, "tool_plan", "")),
    )
    frame = frame[frame["segment"] != ""]
    per_task = _per_task(frame, keys, "segment", SEGMENTS, "latency", min_count=1).reset_index()
    if per_task.empty:
        return pd.DataFrame(
            columns=[*by, "segment", "latency_ms_mean", "latency_ms_std", "latency_ms_share", "tasks"]
        )
    return _stats(per_task, by, SEGMENTS, "segment", "latency_ms")


def session_init(df: pd.DataFrame, by: Sequence[str] = ("topology", "server", "transport")) -> pd.DataFrame:
    """Session start-up per server and transport: spawn, ready, initialize and tools-discovery latency (mean, std),
    tools listed, and the schema footprint of ``tools/list`` (tokens under ``tokenizer``, bytes)."""
    by = _group_keys(df, by)
    init = df.loc[df["stage"].astype(str) == "INIT"]
    if init.empty:
        return pd.DataFrame(columns=[*by, "sessions"])
    frame = pd.DataFrame({k: _as_str(init[k]) for k in by})
    frame["phase"] = init["phase"].astype(str).to_numpy()
    frame["latency"] = init["latency_ms"].to_numpy(dtype="float64", na_value=np.nan)
    frame["tokens"] = init["footprint_tokens"].to_numpy(dtype="float64", na_value=np.nan)
    frame["bytes"] = init["footprint_bytes"].to_numpy(dtype="float64", na_value=np.nan)
    frame["tokenizer"] = _as_str(init["tokenizer"]).to_numpy()
    frame["failed"] = (init["status"].astype(str) != "ok").to_numpy()
    frame["tools"] = [_n_tools(a) for a in init["attrs"]] if "attrs" in init else np.nan
    rows = []
    for key, part in frame.groupby(by, sort=True, dropna=False, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, object] = dict(zip(by, key, strict=True))
        sessions = part[part["phase"].isin(["initialize"])]
        row["sessions"] = (
            len(sessions) if len(sessions) else int(part["phase"].eq("tools_discovery").sum())
        )
        row["failures"] = int(part["failed"].sum())
        for p in INIT_PHASES:
            lat = part.loc[part["phase"] == p, "latency"]
            row[f"{p}_ms_mean"] = lat.mean()
            row[f"{p}_ms_std"] = lat.std(ddof=1) if lat.count() > 1 else (0.0 if lat.count() else np.nan)
        disc = part[part["phase"] == "tools_discovery"]
        row["tools"] = disc["tools"].mean() if len(disc) else np.nan
        row["schema_tokens"] = disc["tokens"].mean() if len(disc) else np.nan
        row["schema_bytes"] = disc["bytes"].mean() if len(disc) else np.nan
        row["tokenizer"] = ",".join(sorted(set(disc["tokenizer"]) - {"—"})) or "—"
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


def input_origins(df: pd.DataFrame, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """Input tokens of LLM calls by origin (system, schemas, user, history, tool results): mean per call, mean per
    task, and share of all input tokens."""
    by = _group_keys(df, by)
    work = _task_rows(df)
    work = work[work["stage"].astype(str).isin(["S1", "S5"])]
    keys = [*by, *TASK_KEYS]
    frame = pd.DataFrame({k: _as_str(work[k]) for k in keys})
    cols = [f"in_{o}" for o in ORIGINS]
    for c in cols:
        frame[c] = work[c].to_numpy(dtype="float64", na_value=np.nan)
    frame["tokens_in"] = work["tokens_in"].to_numpy(dtype="float64", na_value=np.nan)
    rows = []
    groups = frame.groupby(by, sort=True, dropna=False, observed=True) if by else [((), frame)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        per_task = part.groupby(list(TASK_KEYS), observed=True)[[*cols, "tokens_in"]].sum(min_count=1)
        total = part["tokens_in"].sum()
        for origin, c in zip(ORIGINS, cols, strict=True):
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "origin": origin,
                    "per_call_mean": part[c].mean(),
                    "per_task_mean": per_task[c].mean(),
                    "share": 100.0 * part[c].sum() / total if total else np.nan,
                    "calls": int(part[c].count()),
                }
            )
    return pd.DataFrame(rows)


def _parts_frame(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Explode ``parts`` of LLM input events into one row per (call, part)."""
    work = _task_rows(df)
    work = work[work["stage"].astype(str).isin(["S1", "S5"]) & work["parts"].notna()]
    if work.empty:
        return pd.DataFrame(columns=[*by, *TASK_KEYS, "seq", "origin", "key", "tokens"])
    arr = (
        pa.chunked_array([pa.array(work["parts"])])
        if not isinstance(work["parts"].array, pa.ChunkedArray)
        else work["parts"].array
    )
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    parents = pc.list_parent_indices(arr).to_numpy()
    flat = pc.list_flatten(arr)
    keys = [*by, *TASK_KEYS]
    base = {k: _as_str(work[k]).to_numpy()[parents] for k in keys}
    base["seq"] = work["seq"].to_numpy()[parents]
    base["origin"] = flat.field("origin").to_numpy(zero_copy_only=False)
    base["key"] = flat.field("key").to_numpy(zero_copy_only=False)
    base["tokens"] = flat.field("tokens").to_numpy(zero_copy_only=False)
    return pd.DataFrame(base)


def resend_cost(df: pd.DataFrame, by: Sequence[str] = ("topology",)) -> pd.DataFrame:
    """Cumulative re-send cost: for every schema, tool result and other input part, how many LLM calls of its task
    carried it and how many tokens were paid again after the first send.

    Columns: ``*by, origin, server, tool, sends, tokens_first, tokens_resent, tokens_total, resent_share``.
    ``schemas`` rows are keyed by the tool whose schema was sent; ``tool_results`` rows by the tool that produced
    the result (joined through the tool-call id of the S4 event); other origins have no server/tool.
    """
    by = _group_keys(df, by)
    parts = _parts_frame(df, by)
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
    if parts.empty:
        return pd.DataFrame(columns=cols)
    keys = [*by, *TASK_KEYS, "origin", "key"]
    parts = parts.sort_values("seq", kind="stable")
    g = parts.groupby(keys, sort=False, observed=True)["tokens"]
    per_key = pd.DataFrame(
        {"sends": g.size(), "tokens_first": g.first(), "tokens_total": g.sum()}
    ).reset_index()
    per_key["tokens_resent"] = per_key["tokens_total"] - per_key["tokens_first"]
    # name the owner of each key: schema keys are "<server>/<tool>", result keys are tool-call ids
    server = pd.Series(pd.NA, index=per_key.index, dtype=object)
    tool = pd.Series(pd.NA, index=per_key.index, dtype=object)
    is_schema = per_key["origin"] == "schemas"
    split = per_key.loc[is_schema, "key"].str.split("/", n=1, expand=True)
    if not split.empty:
        server[is_schema] = split[0]
        tool[is_schema] = split.get(1, pd.NA)
    is_result = per_key["origin"] == "tool_results"
    if is_result.any():
        s4 = df.loc[
            (df["stage"].astype(str) == "S4") & df["tool_call_id"].notna(),
            ["run_id", "task_id", "tool_call_id", "server", "tool"],
        ]
        owners = pd.DataFrame(
            {
                "run_id": _as_str(s4["run_id"]),
                "task_id": _as_str(s4["task_id"]),
                "key": s4["tool_call_id"].astype(str),
                "o_server": _as_str(s4["server"]),
                "o_tool": _as_str(s4["tool"]),
            }
        ).drop_duplicates(["run_id", "task_id", "key"])
        joined = per_key.loc[is_result, ["run_id", "task_id", "key"]].merge(
            owners, on=["run_id", "task_id", "key"], how="left"
        )
        server[is_result] = joined["o_server"].to_numpy()
        tool[is_result] = joined["o_tool"].to_numpy()
    per_key["server"] = server.fillna("—")
    per_key["tool"] = tool.fillna("—")
    out = (
        per_key.groupby([*by, "origin", "server", "tool"], sort=False, observed=True)
        .agg(
            sends=("sends", "sum"),
            tokens_first=("tokens_first", "sum"),
            tokens_resent=("tokens_resent", "sum"),
            tokens_total=("tokens_total", "sum"),
        )
        .reset_index()
    )
    out["resent_share"] = np.where(
        out["tokens_total"] > 0, 100.0 * out["tokens_resent"] / out["tokens_total"], np.nan
    )
    return out.sort_values([*by, "tokens_resent"], ascending=[True] * len(by) + [False], ignore_index=True)[
        cols
    ]
