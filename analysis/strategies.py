"""Live strategy runs measured against a baseline and against the what-if's prediction from that baseline.

``promcp diff BASELINE STRATEGY_RUN`` prints it as its ``strategies`` table; ``promcp report`` adds a ``strategies``
section when a dataset holds runs of several strategies (:func:`dataset_table`: the baseline is the latest run
whose calls all ran ``full``, the variants every other run).

Per strategy (the label every LLM input event carries in ``attrs.strategy``; none is ``full``), over the tasks
both sides answered: schema tokens per call (the ``schemas`` parts), LLM input tokens per task, prefill ms per call
and latency per task, cost per task (priced calls only), routing ms (p50/p95), tasks answered, expected-tool
accuracy (tasks whose expected tools, recorded in the run's meta, were all called), the tokens the LLM proxy saved
per call where it rewrote the requests (``attrs.saved_tokens``: the client's input minus the upstream's, counted
with one tokenizer), and the what-if's prediction
from the baseline's own calls (:func:`promcp.analysis.whatif.evaluate_dataset`, same K and scorer), with the
difference ``measured − predicted`` in percent. Each per-call figure is a mean over the task's calls, then over
tasks, so a strategy that changes the number of rounds does not change the weight of a task.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from promcp.analysis.load import attrs_of

log = logging.getLogger(__name__)

#: The columns of the comparison (one row per strategy; the baseline first).
COLUMNS: Final = (
    "strategy",
    "runs",
    "tasks",
    "answered",
    "expected_pct",
    "calls_per_task",
    "schema_per_call",
    "predicted_schema_per_call",
    "schema_diff_pct",
    "input_per_task",
    "predicted_input_per_task",
    "input_diff_pct",
    "prefill_ms_per_call",
    "latency_ms_per_task",
    "usd_per_task",
    "routing_ms_p50",
    "routing_ms_p95",
    "fallbacks",
    "saved_per_call",
)
_INPUT = ("S1", "S5")


def call_frame(events: pd.DataFrame) -> pd.DataFrame:
    """One row per recorded LLM input (S1/S5, ok): run, task, round, strategy label, schema and input tokens,
    prefill ms, routing ms, whether the router fell back."""
    calls = events[events["stage"].astype(str).isin(_INPUT) & (events["status"].astype(str) == "ok")]
    rows = []
    for ev in calls.itertuples(index=False):
        attrs = attrs_of(ev.attrs)
        parts = ev.parts if ev.parts is not None and not isinstance(ev.parts, float) else []
        schema = sum(int(p["tokens"]) for p in parts if p["origin"] == "schemas")
        rows.append(
            {
                "run_id": str(ev.run_id),
                "task": str(ev.task_id),
                "round": int(ev.round),
                "strategy": str(attrs.get("strategy") or "full"),
                "schema": schema,
                "tokens_in": float(ev.tokens_in) if pd.notna(ev.tokens_in) else np.nan,
                "prefill_ms": float(ev.latency_ms) if pd.notna(ev.latency_ms) else np.nan,
                "routing_ms": attrs.get("routing_ms"),
                "fallback": bool(attrs.get("strategy_fallback")),
                "saved": attrs.get("saved_tokens"),  # measured by the LLM proxy (client − upstream)
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "run_id",
            "task",
            "round",
            "strategy",
            "schema",
            "tokens_in",
            "prefill_ms",
            "routing_ms",
            "fallback",
            "saved",
        ],
    )


def _answered(events: pd.DataFrame) -> dict[tuple[str, str], bool]:
    from promcp.analysis.tasks import task_table

    table = task_table(events)
    return {(str(r.run_id), str(r.task_id)): r.outcome == "ok" for r in table.itertuples()}


def _expected_hits(
    events: pd.DataFrame, expected: Mapping[str, Sequence[str]]
) -> dict[tuple[str, str], bool]:
    s3 = events[events["stage"].astype(str) == "S3"]
    called: dict[tuple[str, str], set[str]] = {}
    for ev in s3.itertuples(index=False):
        if attrs_of(ev.attrs).get("sent") is False:
            continue
        called.setdefault((str(ev.run_id), str(ev.task_id)), set()).add(f"{ev.server}:{ev.tool}")
    ran = events[events["task_id"].notna()][["run_id", "task_id"]].drop_duplicates()
    out = {}
    for run, task in zip(ran["run_id"].astype(str), ran["task_id"].astype(str), strict=True):
        tools = expected.get(task)  # (a run of some of the benchmark's tasks is scored on those it ran)
        if tools:
            out[(run, task)] = set(tools) <= called.get((run, task), set())
    return out


def _spec(label: str) -> tuple[str, int, str]:
    from promcp.strategies.live import parse_strategy

    spec = parse_strategy(label)
    return spec.name, spec.k, spec.scorer


def predict(
    events: pd.DataFrame,
    content: pd.DataFrame,
    label: str,
    *,
    tasks: Sequence[str] | None = None,
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """The what-if of ``label`` over the baseline ``events``: per task, the predicted schema tokens per call and
    input tokens per task (columns ``task``, ``predicted_schema_per_call``, ``predicted_input_per_task``). LLM
    calls it had to leave out are said in ``notes`` (None: logged as a warning)."""
    from promcp.analysis.whatif import Router, counter, evaluate_dataset
    from promcp.analysis.whatif._dataset_eval import skipped_note

    name, k, scorer = _spec(label)
    cols = ["task", "predicted_schema_per_call", "predicted_input_per_task"]
    if name == "full":
        return pd.DataFrame(columns=cols)
    res = evaluate_dataset(
        events,
        content,
        counter,
        k=k,
        strategies=[name],
        router_factory=lambda tools: Router(tools, scorer),  # type: ignore[arg-type]
    )
    note = skipped_note(res.skipped)
    if note is not None:
        if notes is None:
            log.warning("%s", note)
        else:
            notes.append(note)
    turns = res.turns
    if turns.empty:
        return pd.DataFrame(columns=cols)
    full = turns[turns["strategy"] == "full"].set_index(["run_id", "task", "round"])["tokens"]
    mine = turns[turns["strategy"] == name].set_index(["run_id", "task", "round"])["tokens"]
    base = call_frame(events).set_index(["run_id", "task", "round"])["schema"]
    joined = pd.DataFrame({"full": full, "mine": mine, "schema": base}).dropna().reset_index()
    joined["predicted_schema"] = joined["schema"] + joined["mine"] - joined["full"]
    if tasks is not None:
        joined = joined[joined["task"].isin(list(tasks))]
    per_task = joined.groupby("task").agg(
        predicted_schema_per_call=("predicted_schema", "mean"), predicted_input_per_task=("mine", "sum")
    )
    return per_task.reset_index()[cols]


def _pct(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or not np.isfinite(predicted) or predicted == 0:
        return None
    return float(100.0 * (measured - predicted) / predicted)


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def compare(
    baseline: pd.DataFrame,
    baseline_content: pd.DataFrame,
    variants: pd.DataFrame,
    *,
    expected: Mapping[str, Sequence[str]] | None = None,
    costs: pd.DataFrame | None = None,
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """One row per strategy: the baseline's (``baseline`` events) first, then each strategy found in ``variants``
    (events of one or more strategy runs), measured over the tasks both sides answered, beside the prediction.
    What a prediction had to leave out is said once in ``notes`` (None: logged as a warning)."""
    said: list[str] = []
    expected = expected or {}
    frames = {"base": baseline, "var": variants}
    calls = {side: call_frame(ev) for side, ev in frames.items()}
    answered = {side: _answered(ev) for side, ev in frames.items()}
    hits = {side: _expected_hits(ev, expected) for side, ev in frames.items()}
    task_ms = {side: _task_latency(ev) for side, ev in frames.items()}
    base_ok = {t for (_r, t), ok in answered["base"].items() if ok}
    base_label = _label(calls["base"])
    rows = []
    groups: list[tuple[str, str, pd.DataFrame]] = [("base", base_label, calls["base"])]
    for label, g in calls["var"].groupby("strategy", sort=False):
        groups.append(("var", str(label), g))
    predictions: dict[str, pd.DataFrame] = {}
    for side, label, g in groups:
        ok = {t for (r, t), good in answered[side].items() if good and r in set(g["run_id"])}
        both = sorted(ok & base_ok) if side == "var" else sorted(ok)
        g = g[g["task"].isin(both)]
        per_task = g.groupby(["run_id", "task"]).agg(
            calls=("round", "size"),
            schema=("schema", "mean"),
            tokens=("tokens_in", "sum"),
            prefill=("prefill_ms", "mean"),
        )
        row: dict[str, Any] = {
            "strategy": label,
            "runs": int(g["run_id"].nunique()),
            "tasks": len(per_task),
            "answered": f"{len(ok)}/{sum(1 for (r, _t) in answered[side] if r in set(g['run_id']))}",
            "calls_per_task": _num(per_task["calls"].mean()) if len(per_task) else None,
            "schema_per_call": _num(per_task["schema"].mean()) if len(per_task) else None,
            "input_per_task": _num(per_task["tokens"].mean()) if len(per_task) else None,
            "prefill_ms_per_call": _num(per_task["prefill"].mean()) if len(per_task) else None,
        }
        runs = set(g["run_id"])
        lat = [ms for (r, t), ms in task_ms[side].items() if r in runs and t in both]
        row["latency_ms_per_task"] = float(np.mean(lat)) if lat else None
        scored = [hit for (r, _t), hit in hits[side].items() if r in runs]
        row["expected_pct"] = 100.0 * sum(scored) / len(scored) if scored else None
        routing = pd.to_numeric(g["routing_ms"], errors="coerce").dropna()
        row["routing_ms_p50"] = float(routing.quantile(0.5)) if len(routing) else None
        row["routing_ms_p95"] = float(routing.quantile(0.95)) if len(routing) else None
        row["fallbacks"] = int(g["fallback"].sum())
        saved = g.assign(saved=pd.to_numeric(g["saved"], errors="coerce")).groupby(["run_id", "task"])[
            "saved"
        ]
        saved_mean = saved.mean().dropna()
        row["saved_per_call"] = float(saved_mean.mean()) if len(saved_mean) else None
        row["usd_per_task"] = _usd(costs, runs, both)
        if side == "var" and label != base_label:
            if label not in predictions:
                predictions[label] = predict(baseline, baseline_content, label, tasks=both, notes=said)
            pred = predictions[label]
            if len(pred):
                row["predicted_schema_per_call"] = float(pred["predicted_schema_per_call"].mean())
                row["predicted_input_per_task"] = float(pred["predicted_input_per_task"].mean())
                row["schema_diff_pct"] = _pct(row["schema_per_call"], row["predicted_schema_per_call"])
                row["input_diff_pct"] = _pct(row["input_per_task"], row["predicted_input_per_task"])
        rows.append(row)
    for note in dict.fromkeys(said):
        if notes is None:
            log.warning("%s", note)
        else:
            notes.append(note)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _label(calls: pd.DataFrame) -> str:
    labels = list(dict.fromkeys(calls["strategy"])) if len(calls) else []
    return labels[0] if len(labels) == 1 else "full"


def _task_latency(events: pd.DataFrame) -> dict[tuple[str, str], float]:
    from promcp.analysis.tasks import task_table

    table = task_table(events)
    return {
        (str(r.run_id), str(r.task_id)): float(r.latency_ms)
        for r in table.itertuples()
        if pd.notna(r.latency_ms)
    }


def _usd(costs: pd.DataFrame | None, runs: set[str], tasks: Sequence[str]) -> float | None:
    if costs is None or costs.empty or "total_usd" not in costs:
        return None
    c = costs[costs["run_id"].astype(str).isin(runs) & costs["task_id"].astype(str).isin(list(tasks))]
    c = c[c["total_usd"].notna()]
    if c.empty:
        return None
    return float(c.groupby(["run_id", "task_id"])["total_usd"].sum().mean())


def expected_tools(path: str | Path) -> dict[str, list[str]]:
    """The expected tools the runs of a dataset recorded in their meta (``promcp run``), by task id."""
    from promcp.store.runs import list_runs

    out: dict[str, list[str]] = {}
    root = Path(path)
    for run in list_runs(root if root.is_dir() else root.parent):
        for task, tools in (run.meta.get("expected_tools") or {}).items():
            if isinstance(tools, list):
                out.setdefault(str(task), [str(t) for t in tools])
    return out


def has_strategies(events: pd.DataFrame) -> bool:
    """Whether ``events`` hold LLM calls of more than one strategy (a baseline counts as ``full``)."""
    labels = set(call_frame(events)["strategy"])
    return len(labels) > 1


def dataset_table(
    path: str | Path,
    *,
    runs: Sequence[str] | None = None,
    latest: int = 0,
    tasks: Sequence[str] | None = None,
) -> tuple[pd.DataFrame | None, str | None]:
    """``promcp report``'s ``strategies`` section over the runs of ``path`` selected: the latest run whose calls
    all ran ``full`` is the baseline, every other run a variant (:func:`compare`). ``(None, why)`` when the
    selection holds no baseline or a single strategy."""
    from promcp.analysis.cost import call_costs
    from promcp.analysis.load import load, load_content
    from promcp.analysis.whatif._result import select_events

    events = select_events(path, load(path), runs=runs, latest=latest, tasks=tasks)
    calls = call_frame(events)
    labels = calls.groupby("run_id")["strategy"].agg(lambda s: frozenset(s))
    if len(frozenset().union(*labels)) < 2:
        return None, None
    baselines = [r for r, ls in labels.items() if ls == {"full"}]
    if not baselines:
        return None, "no run without a strategy (or with --strategy full) to measure the others against"
    order = events.groupby(events["run_id"].astype(str))["t_start_ns"].min()
    base = max(baselines, key=lambda r: order.get(r, 0))
    is_base = events["run_id"].astype(str) == base
    baseline, variants = events[is_base], events[~is_base]
    costs = call_costs(events)
    said: list[str] = []  # what a prediction left out: a note of the section
    table = compare(
        baseline, load_content(path), variants, expected=expected_tools(path), costs=costs, notes=said
    )
    note = f"baseline: run {base} (every call full); predictions from its own calls"
    for left_out in said:
        note += f"; {left_out}"
    return table, note
