"""Two runs or datasets side by side: tokens and latency per phase and per origin, with the change (B − A).

When B's LLM calls ran a strategy A's did not (``promcp run --strategy``), ``tables["strategies"]`` also compares
them per strategy, measured and as the what-if predicts from A (:mod:`promcp.analysis.strategies`).

>>> d = pa.diff("traces", "traces", runs_a=["20261124T101500Z"], runs_b=["20261124T103000Z"])
>>> d.tables["phases"][["phase", "tokens_a", "tokens_b", "tokens_change_pct"]]

Each side is a :class:`~promcp.analysis.Report` (complete tasks only unless ``include_incomplete``), grouped as one
group: the means are per task of that side, so sides with different task counts compare fairly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from promcp.analysis.engine import Events
from promcp.analysis.report import Report, report

#: The report sections a diff compares.
DIFF_SECTIONS: Final = ("phases", "origins")


@dataclass
class Diff:
    """``tables["phases"]`` and ``tables["origins"]`` (one row per phase / origin, A, B, change); the two reports."""

    a: Report
    b: Report
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def _change(frame: pd.DataFrame, name: str) -> None:
    a, b = frame[f"{name}_a"].astype("float64"), frame[f"{name}_b"].astype("float64")
    frame[f"{name}_change"] = b - a
    frame[f"{name}_change_pct"] = np.where(a != 0, 100.0 * (b - a) / a.where(a != 0), np.nan)


def _side(rep: Report, section: str, key: str, values: dict[str, str], suffix: str) -> pd.DataFrame:
    table = rep.tables.get(section, pd.DataFrame())
    if table.empty:
        return pd.DataFrame(columns=[key, *(f"{v}_{suffix}" for v in values.values())])
    return table[[key, *values]].rename(columns={k: f"{v}_{suffix}" for k, v in values.items()})


def _join(a: Report, b: Report, section: str, key: str, values: dict[str, str]) -> pd.DataFrame:
    left = _side(a, section, key, values, "a")
    right = _side(b, section, key, values, "b")
    order = list(dict.fromkeys([*left[key], *right[key]]))
    out = left.merge(right, on=key, how="outer").set_index(key).reindex(order).reset_index()
    for v in values.values():
        if v != "observable":
            _change(out, v)
    return out


def _events(path: str | Path, runs: Sequence[str] | None, tasks: Sequence[str] | None) -> pd.DataFrame:
    """The loaded events of the runs and tasks selected (the what-if's selection rule)."""
    from promcp.analysis.load import load
    from promcp.analysis.whatif._result import select_events

    return select_events(path, load(path), runs=runs, latest=0, tasks=tasks)


def _strategies(
    a: str | Path | Events,
    b: str | Path | Events,
    runs_a: Sequence[str] | None,
    runs_b: Sequence[str] | None,
    tasks: Sequence[str] | None,
) -> pd.DataFrame | None:
    """The ``strategies`` table (:mod:`promcp.analysis.strategies`) when B's calls ran a strategy other than A's;
    ``None`` otherwise, or when the sides are not datasets on disk (the prediction needs captured content)."""
    from promcp.analysis.load import load_content
    from promcp.analysis.strategies import call_frame, compare, expected_tools

    if not isinstance(a, str | Path) or not isinstance(b, str | Path):
        return None
    ev_a, ev_b = _events(a, runs_a, tasks), _events(b, runs_b, tasks)
    labels_a, labels_b = set(call_frame(ev_a)["strategy"]), set(call_frame(ev_b)["strategy"])
    if not labels_b or labels_b <= labels_a:
        return None
    from promcp.analysis.cost import call_costs

    costs = pd.concat([call_costs(ev_a), call_costs(ev_b)], ignore_index=True)
    return compare(ev_a, load_content(a), ev_b, expected=expected_tools(b) or expected_tools(a), costs=costs)


def diff(
    a: str | Path | Events,
    b: str | Path | Events,
    *,
    runs_a: Sequence[str] | None = None,
    runs_b: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    include_incomplete: bool = False,
) -> Diff:
    """Compare dataset (or runs of a dataset) ``a`` with ``b``; ``tasks`` narrows both sides to those task ids."""
    common = {"by": (), "sections": DIFF_SECTIONS, "tasks": tasks, "include_incomplete": include_incomplete}
    rep_a = report(a, runs=runs_a, **common)  # type: ignore[arg-type]
    rep_b = report(b, runs=runs_b, **common)  # type: ignore[arg-type]
    out = Diff(rep_a, rep_b)
    out.tables["phases"] = _join(
        rep_a,
        rep_b,
        "phases",
        "phase",
        {"tokens_mean": "tokens", "latency_ms_mean": "latency_ms", "tokens_share": "tokens_share"},
    )
    out.tables["origins"] = _join(
        rep_a,
        rep_b,
        "origins",
        "origin",
        {
            "per_task_mean": "per_task",
            "per_call_mean": "per_call",
            "share": "share",
            "observable": "observable",
        },
    )
    strategies = _strategies(a, b, runs_a, runs_b, tasks)
    if strategies is not None:
        out.tables["strategies"] = strategies
    return out
