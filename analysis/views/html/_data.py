"""The page's data: everything the HTML report shows, computed from a dataset — no HTML here.

:func:`page_data` is the seam between "compute" and "draw": it returns a :class:`PageData` whose
:meth:`PageData.to_json` is embedded in the page verbatim (``<script type="application/json" id="promcp-data">``),
so a test or a script can read the page's numbers back. Its tables are the report's own :class:`Document`
(:func:`~promcp.analysis.views.report.report_document`, the one ``promcp report`` prints), so the embedded
``report`` member is exactly what ``promcp report --format json`` prints for the same selection and sections, and
``whatif`` what ``promcp whatif --format json`` prints.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
import pyarrow as pa

from promcp import __version__
from promcp.analysis.engine import TASK_EVENT_SQL, Events, as_arrow, outcomes, select
from promcp.analysis.report import Report, report
from promcp.analysis.scanned import ParquetEvents
from promcp.analysis.sections import DEFAULT_SECTIONS
from promcp.analysis.task_sql import PHASES, WALL_MS_SQL
from promcp.analysis.views.base import MISSING, Document
from promcp.analysis.views.html._frames import jsonable, query
from promcp.analysis.views.html._schemas import schema_weight
from promcp.analysis.views.html._tasks import Limits, task_data
from promcp.analysis.views.jsondata import JsonRenderer
from promcp.analysis.views.report import report_document
from promcp.analysis.views.whatif import whatif_document
from promcp.errors import ConfigError

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # not imported at run time: the what-if engine pulls in torch
    from promcp.analysis.whatif import WhatifResult

#: The report sections of the page's summary (``promcp report``'s default; context overflows too when any).
SUMMARY_SECTIONS: Final = DEFAULT_SECTIONS
#: Sections of the page's task section, always computed: every task with its outcome, every failed event.
TASK_SECTIONS: Final = ("tasks", "errors", "overflows")


@dataclass
class PageData:
    """Everything the page shows. ``report`` and ``whatif`` are documents (their tables are drawn by the one HTML
    table formatter, their JSON is what ``--format json`` prints); frames are embedded column-wise
    (``{"columns": […], "data": [[…], …]}``)."""

    header: dict[str, Any]
    report: Document
    phases: pd.DataFrame
    runs: pd.DataFrame
    tasks: pd.DataFrame
    timeline: pd.DataFrame
    calls: pd.DataFrame
    windows: pd.DataFrame
    schemas: pd.DataFrame
    whatif: Document | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """The page's data document (JSON text, safe to embed in a ``<script>`` element)."""
        as_json = JsonRenderer()
        small = {
            "header": self.header,
            "report": json.loads(as_json.render(self.report)),
            "whatif": None if self.whatif is None else json.loads(as_json.render(self.whatif)),
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
        return json_in_script("{" + ",".join(parts) + "}")


def json_in_script(text: str) -> str:
    """JSON text that cannot end, or change the parsing of, the ``<script>`` element it sits in: every ``<``, ``>``
    and ``&`` as a ``\\u`` escape (they can only occur inside JSON strings, so the JSON reads the same). Escaping
    ``</`` alone is not enough: a string holding ``<!--<script>`` (a tool name, say) switches the HTML parser into
    the script's "double escaped" state, and the page's data no longer parses."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _split_json(frame: pd.DataFrame) -> str:
    if frame.empty and not len(frame.columns):
        return '{"columns":[],"data":[]}'
    return str(frame.to_json(orient="split", index=False, double_precision=6, date_format="iso"))


def _header(events: Events, rep: Report, dataset: str, selection: dict[str, Any]) -> dict[str, Any]:
    tok = query(events, "SELECT DISTINCT CAST(tokenizer AS VARCHAR) AS t FROM ev WHERE tokenizer IS NOT NULL")
    topo = query(events, "SELECT DISTINCT CAST(topology AS VARCHAR) AS t FROM ev WHERE topology IS NOT NULL")
    return {
        "dataset": dataset,
        "selection": {k: v for k, v in selection.items() if v},
        "events": rep.events,
        "runs": rep.runs,
        "tasks": rep.tasks,
        "complete_tasks": rep.complete,
        "include_incomplete": rep.include_incomplete,
        "tokenizers": sorted(tok["t"]),
        "topologies": sorted(topo["t"]),
        "missing": MISSING,
        "promcp_version": __version__,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _runs(events: Events) -> pd.DataFrame:
    return query(
        events,
        f"""SELECT CAST(run_id AS VARCHAR) AS run_id, any_value(CAST(topology AS VARCHAR)) AS topology,
                  any_value(CAST(source AS VARCHAR)) AS source, any_value(CAST(benchmark AS VARCHAR)) AS benchmark,
                  string_agg(DISTINCT CAST(model AS VARCHAR), ', ') AS models,
                  count(*) AS events, count(DISTINCT task_id) FILTER (WHERE {TASK_EVENT_SQL}) AS tasks,
                  sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out,
                  {WALL_MS_SQL} / 1e3 AS wall_s
           FROM ev GROUP BY 1 ORDER BY 1""",
    )


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


def _with_outcomes(index: pd.DataFrame, rep: Report, events: Events) -> pd.DataFrame:
    """The embedded tasks with their outcome and error (the report's task table; start-up groups have none)."""
    tasks = rep.tables.get("tasks")
    if tasks is None:
        tasks = outcomes(events)
    facts = tasks[["run_id", "task_id", "outcome", "error"]].rename(columns={"task_id": "task"})
    return index.merge(facts.astype({"run_id": str, "task": str}), on=["run_id", "task"], how="left")


def find_whatif(dataset: str | Path) -> WhatifResult | None:
    """The what-if result saved in a dataset directory (``DATASET/_whatif.json``, or ``whatif.json`` as saved
    before), if there is one.

    A saved file that is not a what-if result is left out with a warning logged naming it:
    the rest of the page does not depend on it.
    """
    from promcp.analysis.whatif._result import LEGACY_RESULT_FILE, RESULT_FILE, read_result

    path = Path(dataset)
    if not path.is_dir():
        return None
    candidate = next((path / n for n in (RESULT_FILE, LEGACY_RESULT_FILE) if (path / n).is_file()), None)
    if candidate is None:
        return None
    try:
        return read_result(candidate)
    except ConfigError as exc:
        log.warning("%s; the page has no what-if section", exc)
        return None


def _cut_rows(rep: Report, limit: int) -> dict[str, int]:
    """Bound the task section's tables to ``limit`` rows each (a large dataset has thousands of tasks); the task
    table keeps every incomplete task first, in order. Returns the cut tables' full row counts."""
    cut: dict[str, int] = {}
    for name in TASK_SECTIONS:
        frame = rep.tables.get(name)
        if frame is None or len(frame) <= limit:
            continue
        cut[name] = len(frame)
        if name == "tasks":
            bad = frame["outcome"] != "ok"
            keep = bad | (~bad).cumsum().le(max(0, limit - int(bad.sum())))
            frame = frame[keep.to_numpy()]
        rep.tables[name] = frame.head(limit).reset_index(drop=True)
    return cut


def page_data(
    data: str | Path | pd.DataFrame | pa.Table | ParquetEvents,
    *,
    by: Sequence[str] = ("topology",),
    sections: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    latest: int = 0,
    tasks: Sequence[str] | None = None,
    include_incomplete: bool = False,
    tokenizers: Sequence[str] = (),
    resend_top: int = 15,
    whatif: WhatifResult | None = None,
    limits: Limits | None = None,
    dataset_label: str | None = None,
) -> PageData:
    """Compute the page's data for a dataset path (or loaded events).

    ``by``, ``runs``, ``latest``, ``tasks``, ``include_incomplete``, ``tokenizers`` and ``resend_top`` mean what
    they mean to :func:`promcp.analysis.report` (``promcp report``'s flags): the page shows the same selection.
    ``sections`` picks the summary tables (default: :data:`SUMMARY_SECTIONS`); the task section's tables
    (:data:`TASK_SECTIONS`) are always there. ``whatif`` is a computed or saved what-if result
    (:func:`promcp.analysis.whatif.whatif_dataset` / :func:`~promcp.analysis.whatif.read_result`); ``limits``
    bounds the per-task detail embedded (the page says when it is cut).
    """
    limits = limits or Limits()
    if whatif is None and isinstance(data, str | Path):
        whatif = find_whatif(data)
    label = dataset_label or (str(data) if isinstance(data, str | Path) else "(events in memory)")
    wanted = list(dict.fromkeys([*(sections or SUMMARY_SECTIONS), *TASK_SECTIONS]))
    rep = report(
        data,
        by=by,
        sections=wanted,
        tokenizers=tokenizers,
        resend_top=resend_top,
        runs=runs,
        latest=latest,
        tasks=tasks,
        include_incomplete=include_incomplete,
    )
    events = select(as_arrow(data), runs=runs, latest=latest, tasks=tasks)
    notes: list[str] = []
    detail = task_data(events, limits)
    if detail.total > len(detail.index):
        shown = int(detail.index["events"].sum())
        notes.append(
            f"Task timelines and context fill are embedded for {len(detail.index):,} of {detail.total:,} tasks "
            f"({shown:,} of {detail.events_total:,} task events; at most {limits.tasks:,} tasks and "
            f"{limits.events:,} events, the first tasks of each run in turn). The tables, schema weight "
            "and what-if cover every event."
        )
    schemas, n_tools = schema_weight(events, limits.tools, include_incomplete=include_incomplete)
    if n_tools > limits.tools:
        notes.append(
            f"Schema weight shows the {limits.tools} heaviest of {n_tools:,} tools (by schema tokens or re-send cost)."
        )
    selection = {"runs": list(runs or []), "latest": latest, "tasks": list(tasks or [])}
    task_index = _with_outcomes(detail.index, rep, events)
    cut = _cut_rows(rep, limits.rows)
    doc = report_document(rep)
    for table in doc.tables:
        if table.name in cut:
            table.notes.append(
                f"the page lists {limits.rows:,} of {cut[table.name]:,} rows"
                + (" (every incomplete task first)" if table.name == "tasks" else "")
                + f"; promcp report --section {table.name} lists them all"
            )
    return PageData(
        header=_header(events, rep, label, selection),
        report=doc,
        phases=_phases(rep, by),
        runs=_runs(events),
        tasks=task_index,
        timeline=detail.timeline,
        calls=detail.calls,
        windows=detail.windows,
        schemas=schemas,
        whatif=None if whatif is None else whatif_document(whatif),
        notes=notes,
    )
