"""The page's data: everything the HTML report shows, computed from a dataset — no HTML here.

:func:`page_data` is the seam between "compute" and "draw": it returns a :class:`PageData` whose
:meth:`PageData.to_json` is embedded in the page verbatim (``<script type="application/json" id="promcp-data">``),
so a test or a script can read the page's numbers back. Its ``report`` member is exactly the document
``promcp report --format json`` prints for the same dataset and grouping.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from promcp import __version__
from promcp.analysis.load import scan
from promcp.analysis.render import _fold_constant_keys, _num, _views, to_json
from promcp.analysis.report import Report, report
from promcp.analysis.tables import PHASES, Events, ParquetEvents
from promcp.analysis.views.html._frames import jsonable, query
from promcp.analysis.views.html._schemas import schema_weight
from promcp.analysis.views.html._tasks import Limits, task_data

if TYPE_CHECKING:  # not imported at run time: the what-if engine pulls in torch
    from promcp.analysis.whatif import WhatifResult


@dataclass
class Table:
    """A titled table of display strings (as the terminal report prints it)."""

    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class PageData:
    """Everything the page shows. Frames are embedded column-wise (``{"columns": […], "data": [[…], …]}``)."""

    header: dict[str, Any]
    report: dict[str, Any]
    summary: list[Table]
    phases: pd.DataFrame
    runs: pd.DataFrame
    tasks: pd.DataFrame
    timeline: pd.DataFrame
    calls: pd.DataFrame
    windows: pd.DataFrame
    schemas: pd.DataFrame
    whatif: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """The page's data document (JSON text, safe to embed in a ``<script>`` element)."""
        small = {
            "header": self.header,
            "report": self.report,
            "summary": [t.__dict__ for t in self.summary],
            "whatif": self.whatif,
            "notes": self.notes,
        }
        frames = {
            "phases": self.phases,
            "runs": self.runs,
            "tasks": self.tasks,
            "timeline": self.timeline,
            "calls": self.calls,
            "windows": self.windows,
            "schemas": self.schemas,
        }
        parts = [
            json.dumps(k) + ":" + json.dumps(jsonable(v), separators=(",", ":"), allow_nan=False)
            for k, v in small.items()
        ]
        parts += [json.dumps(k) + ":" + _split_json(v) for k, v in frames.items()]
        return ("{" + ",".join(parts) + "}").replace("</", "<\\/")


def _split_json(frame: pd.DataFrame) -> str:
    if frame.empty and not len(frame.columns):
        return '{"columns":[],"data":[]}'
    return str(frame.to_json(orient="split", index=False, double_precision=6, date_format="iso"))


def _header(events: Events, rep: Report, dataset: str) -> dict[str, Any]:
    tok = query(events, "SELECT DISTINCT CAST(tokenizer AS VARCHAR) AS t FROM ev WHERE tokenizer IS NOT NULL")
    topo = query(events, "SELECT DISTINCT CAST(topology AS VARCHAR) AS t FROM ev WHERE topology IS NOT NULL")
    return {
        "dataset": dataset,
        "events": rep.events,
        "runs": rep.runs,
        "tasks": rep.tasks,
        "tokenizers": sorted(tok["t"]),
        "topologies": sorted(topo["t"]),
        "promcp_version": __version__,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _runs(events: Events) -> pd.DataFrame:
    return query(
        events,
        """SELECT CAST(run_id AS VARCHAR) AS run_id, any_value(CAST(topology AS VARCHAR)) AS topology,
                  any_value(CAST(source AS VARCHAR)) AS source, any_value(CAST(benchmark AS VARCHAR)) AS benchmark,
                  string_agg(DISTINCT CAST(model AS VARCHAR), ', ') AS models,
                  count(*) AS events, count(DISTINCT task_id) AS tasks,
                  sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out,
                  (max(t_end_ns) - min(t_start_ns)) / 1e9 AS wall_s
           FROM ev GROUP BY 1 ORDER BY 1""",
    )


def _summary(rep: Report, by: Sequence[str]) -> list[Table]:
    out = []
    for title, view in _views(rep, by):
        title, view = _fold_constant_keys(title, view, by)
        rows = [[v if isinstance(v, str) else _num(v) for v in row] for row in view.itertuples(index=False)]
        out.append(Table(title, [str(c) for c in view.columns], rows))
    return out


def _phases(rep: Report, by: Sequence[str]) -> pd.DataFrame:
    """Mean tokens and latency per task by phase, one row per (group, phase), for the summary chart."""
    table = rep.tables.get("phases")
    if table is None or table.empty:
        return pd.DataFrame(columns=["group", "phase", "tokens", "latency_ms", "share"])
    t = table[table["phase"].isin(PHASES)]
    group = t[list(by)].astype(str).agg(" / ".join, axis=1) if by else pd.Series("all", index=t.index)
    return pd.DataFrame(
        {
            "group": group.to_numpy(),
            "phase": t["phase"].to_numpy(),
            "tokens": t["tokens_mean"].to_numpy(),
            "latency_ms": t["latency_ms_mean"].to_numpy(),
            "share": t["tokens_share"].to_numpy(),
        }
    )


def page_data(
    data: str | Path | pd.DataFrame | pa.Table | ParquetEvents,
    *,
    by: Sequence[str] = ("topology",),
    whatif: WhatifResult | None = None,
    limits: Limits | None = None,
    dataset_label: str | None = None,
) -> PageData:
    """Compute the page's data for a dataset path (or loaded events).

    ``by`` groups the summary tables as ``promcp report --by`` does; ``whatif`` is a computed or saved what-if
    result (:func:`promcp.analysis.whatif.whatif_dataset` / :func:`~promcp.analysis.whatif.read_result`);
    ``limits`` bounds the per-task detail embedded (the page says when it is cut).
    """
    limits = limits or Limits()
    if isinstance(data, pd.DataFrame):
        events: Events = pa.Table.from_pandas(data, preserve_index=False)
    elif isinstance(data, pa.Table | ParquetEvents):
        events = data
    else:
        events = scan(data)
    label = dataset_label or (str(data) if isinstance(data, str | Path) else "(events in memory)")
    rep = report(events, by=by)
    notes = list(rep.notes)
    tasks = task_data(events, limits)
    if tasks.total > len(tasks.index):
        shown = int(tasks.index["events"].sum())
        notes.append(
            f"Task timelines and context fill are embedded for {len(tasks.index):,} of {tasks.total:,} tasks "
            f"({shown:,} of {tasks.events_total:,} task events; at most {limits.tasks:,} tasks and "
            f"{limits.events:,} events, the first tasks of each run in turn). The summary tables, schema weight "
            "and what-if cover every event."
        )
    schemas, n_tools = schema_weight(events, limits.tools)
    if n_tools > limits.tools:
        notes.append(
            f"Schema weight shows the {limits.tools} heaviest of {n_tools:,} tools (by schema tokens or re-send cost)."
        )
    doc = json.loads(to_json(rep))
    return PageData(
        header=_header(events, rep, label),
        report=doc,
        summary=_summary(rep, by),
        phases=_phases(rep, by),
        runs=_runs(events),
        tasks=tasks.index,
        timeline=tasks.timeline,
        calls=tasks.calls,
        windows=tasks.windows,
        schemas=schemas,
        whatif=None if whatif is None else jsonable(whatif.document()),
        notes=notes,
    )
