"""The report as a document: the paper's layout for phases and segments, one view per other section.

The phase and segment views follow the paper's Tables 1 and 2: one row per phase, one column per group (topology,
model, …), each cell ``mean ± std (share %)``. The data behind them (``Document.data``) is the report's own long
tables, which CSV and JSON write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from promcp.analysis.sections import SECTIONS
from promcp.analysis.views.base import Column, Document, Missing, Stat, Table

if TYPE_CHECKING:  # the phases-only report (analysis/phase_report.py) is rendered without pandas
    import pandas as pd

    from promcp.analysis.phase_report import PhaseReport
    from promcp.analysis.report import Report

#: What each task outcome means (shown under the task table).
OUTCOME_HELP = {
    "no_answer": "the last LLM call asked for tools and none followed (max rounds, or the client stopped)",
    "interrupted": "a call has no output or an event was cancelled (killed run, stopped generation)",
}


def _label(row: Any, by: Sequence[str]) -> str:
    return " / ".join(str(getattr(row, k)) for k in by) if by else "all"


def paper_layout(
    table: pd.DataFrame | Iterable[Any], by: Sequence[str], item: str, value: str
) -> tuple[list[str], list[dict[str, Any]]]:
    """A long stats table (``*by, item, <value>_mean, _std, _share``: a frame, or its rows as objects with those
    attributes) as rows per item and one column per group."""
    groups: list[str] = []
    rows: dict[str, dict[str, Any]] = {}
    records = table.itertuples(index=False) if hasattr(table, "itertuples") else table
    for r in records:
        label = _label(r, by)
        if label not in groups:
            groups.append(label)
        name = str(getattr(r, item))
        rows.setdefault(name, {item: name})[label] = Stat(
            getattr(r, f"{value}_mean"), getattr(r, f"{value}_std"), getattr(r, f"{value}_share")
        )
    return groups, list(rows.values())


def _stat_table(
    name: str,
    title: str,
    frame: pd.DataFrame | Iterable[Any],
    by: Sequence[str],
    item: str,
    value: str,
    digits: int,
) -> Table:
    groups, rows = paper_layout(frame, by, item, value)
    cols = [Column(item), *(Column(g, kind="stat", digits=digits) for g in groups)]
    return Table(name, title, cols, rows)


def _fold_constant_keys(table: Table, keys: Sequence[str]) -> Table:
    """A grouping column with one value in the whole table moves into the title (saves terminal width)."""
    for key in keys:
        values = {str(r.get(key)) for r in table.rows}
        if table.rows and len(values) == 1 and any(c.key == key for c in table.columns):
            table.title = f"{table.title} [{key}: {values.pop()}]"
            table.columns = [c for c in table.columns if c.key != key]
            table.key_columns = max(1, table.key_columns - 1)
    return table


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [dict(r) for r in frame.to_dict(orient="records")]


def _init_view(frame: pd.DataFrame, by: Sequence[str]) -> Table:
    tokenizers = sorted(set(frame["tokenizer"]) - {"—"}) if "tokenizer" in frame else []
    title = SECTIONS["init"] + (f" — schema tokens under {', '.join(tokenizers)}" if tokenizers else "")
    rows = []
    for r in frame.to_dict(orient="records"):
        row = {k: r[k] for k in (*by, "server", "transport")}
        row["sessions"] = f"{r['sessions']}" + (f" ({r['failures']} failed)" if r["failures"] else "")
        for p in ("spawn", "ready", "initialize", "tools_discovery"):
            row[p] = Stat(r[f"{p}_ms_mean"], r[f"{p}_ms_std"])
        row |= {k: r[k] for k in ("tools", "schema_tokens", "schema_bytes")}
        rows.append(row)
    cols = [
        *(Column(k) for k in by),
        Column("server"),
        Column("transport"),
        Column("sessions"),
        Column("spawn", "spawn ms", "stat", 1),
        Column("ready", "ready ms", "stat", 1),
        Column("initialize", "initialize ms", "stat", 1),
        Column("tools_discovery", "tools/list ms", "stat", 1),
        Column("tools", kind="number"),
        Column("schema_tokens", "schema tokens", "number"),
        Column("schema_bytes", "schema bytes", "number"),
    ]
    return Table("init", title, cols, rows, key_columns=len(by) + 1)


def _origins_view(frame: pd.DataFrame, by: Sequence[str]) -> Table:
    rows = []
    for r in frame.to_dict(orient="records"):
        row = {k: r[k] for k in (*by, "origin", "calls")}
        for key in ("per_call_mean", "per_task_mean", "share"):
            row[key] = r[key] if r["observable"] else Missing("not observable")
        rows.append(row)
    cols = [
        *(Column(k) for k in by),
        Column("origin"),
        Column("per_call_mean", "per call", "number", 1),
        Column("per_task_mean", "per task", "number", 1),
        Column("share", "share %", "percent", 1),
        Column("calls", kind="number"),
    ]
    table = Table("origins", SECTIONS["origins"], cols, rows, key_columns=len(by) + 1)
    if (frame["origin"] == "unobserved").any():
        table.notes.append(
            "unobserved: the part of the provider's input total the source (an export, or a client's telemetry) "
            "does not show (the client's system prompt and tool definitions), kept apart from the origins that were "
            "observed"
        )
    if not frame["observable"].all():
        table.notes.append(
            "not observable: the source does not record this origin (exports hold no tool definitions)"
        )
    return table


def _resend_view(frame: pd.DataFrame, by: Sequence[str]) -> Table:
    cols = [
        *(Column(k) for k in by),
        Column("origin"),
        Column("server"),
        Column("tool"),
        Column("sends", kind="number"),
        Column("tokens_first", "first", "number"),
        Column("tokens_resent", "resent", "number"),
        Column("tokens_total", "total", "number"),
        Column("resent_share", "resent %", "percent", 1),
    ]
    return Table("resend", SECTIONS["resend"] + " — tokens", cols, _rows(frame), key_columns=len(by) + 3)


def _tasks_view(frame: pd.DataFrame) -> Table:
    cols = [
        Column("run_id", "run"),
        Column("task_id", "task"),
        Column("outcome"),
        Column("rounds", kind="number"),
        Column("tool_calls", "tool calls", "number"),
        Column("tool_errors", "tool errors", "number"),
        Column("tokens", kind="number"),
        Column("llm_billed", "llm billed", "number"),
        Column("latency_ms", "latency ms", "number", 1),
        Column("error"),
    ]
    table = Table("tasks", SECTIONS["tasks"], cols, _rows(frame), key_columns=2)
    for outcome in sorted(set(frame["outcome"]) & set(OUTCOME_HELP)):
        table.notes.append(f"{outcome}: {OUTCOME_HELP[outcome]}")
    return table


def _errors_view(frame: pd.DataFrame) -> Table:
    cols = [
        Column("run_id", "run"),
        Column("task_id", "task"),
        Column("stage"),
        Column("server"),
        Column("tool"),
        Column("status"),
        Column("error_type", "error type"),
        Column("message"),
    ]
    return Table("errors", SECTIONS["errors"], cols, _rows(frame), key_columns=2, empty="none")


def _overflows_view(frame: pd.DataFrame) -> Table:
    cols = [
        Column("run_id", "run"),
        Column("task_id", "task"),
        Column("round", kind="number"),
        Column("model"),
        Column("tokens_in", "prompt tokens", "number"),
        Column("context_window", "context window", "number"),
        Column("overflow_by", "over by", "number"),
    ]
    table = Table("overflows", SECTIONS["overflows"], cols, _rows(frame), key_columns=2)
    table.notes.append(
        "over by: prompt tokens − window; a prompt fits when one token to generate fits after it"
    )
    return table


def _tokenizers_view(frame: pd.DataFrame) -> Table:
    cols = [
        Column("tokenizer"),
        Column("token_source", "source"),
        Column("texts", kind="number"),
        Column("tokens", kind="number"),
        Column("tokens_mean", "mean", "number", 1),
        Column("ratio_to_ref", "ratio", "number", 3),
        Column("pearson_r", "r", "number", 3),
        Column("tokens_per_char", "per char", "number", 4),
        Column("tokens_per_byte", "per byte", "number", 4),
    ]
    table = Table("tokenizers", SECTIONS["tokenizers"], cols, _rows(frame))
    from promcp.tokenizers import describe  # only for this table: a report without it loads no tokenizer

    approx = {str(t): describe(str(t)) for t in frame.get("tokenizer", ()) if describe(str(t))}
    if approx:
        labels = "; ".join(f"{k} = {v}" for k, v in approx.items())
        table.notes.append(f"{labels}: a labelled approximation, not the model's tokenizer (docs/tokens.md)")
    return table


def _keyed_view(name: str, frame: pd.DataFrame, by: Sequence[str], cols: list[Column], note: str) -> Table:
    """A section table keyed by the grouping columns and its first own column, with one explaining note."""
    table = Table(
        name, SECTIONS[name], [*(Column(k) for k in by), *cols], _rows(frame), key_columns=len(by) + 1
    )
    table.notes.append(note)
    return table


def _cache_view(frame: pd.DataFrame, by: Sequence[str]) -> Table:
    cols = [
        Column("origin"),
        Column("cache_read", "cache read", "number"),
        Column("cache_write", "cache write", "number"),
        Column("uncached", kind="number"),
        Column("input_tokens", "input tokens", "number"),
        Column("read_share", "read %", "number", 1),
    ]
    note = (
        "a prompt cache covers a prefix: reads and writes are attributed to the origins in the order the prompt was "
        "sent; an export or a client's telemetry does not show that order (unattributed). Calls without a provider's cache split are not "
        "counted"
    )
    return _keyed_view("cache", frame, by, cols, note)


def _schema_tax_view(frame: pd.DataFrame, by: Sequence[str]) -> Table:
    cols = [
        Column("schema", "tool definition"),
        Column("calls", kind="number"),
        Column("tokens_per_call", "tokens/call", "number", 0),
        Column("cache_reads", "cache reads", "number"),
        Column("cache_writes", "cache writes", "number"),
        Column("billed_usd", "billed $", "number", 4),
        Column("no_cache_usd", "no cache $", "number", 4),
        Column("deferred_usd", "deferred $", "number", 4),
    ]
    note = (
        "billed: the definition's tokens at the rate of how they were billed (cache read, write, uncached, by prefix "
        "position); no cache: all at the input rate; deferred: sent (uncached) only from the round the tool was "
        "first called in the task, as behind a tool-search tool (its own placeholder not counted)"
    )
    return _keyed_view("schema_tax", frame, by, cols, note)


def _phase_views(frame: pd.DataFrame | Sequence[Any], by: Sequence[str], notes: Sequence[str]) -> list[Table]:
    """The phase table (a frame, or its rows) as the paper's Tables 1 and 2: tokens, then latency with ``notes``."""
    tokens = _stat_table(
        "phases_tokens", "Tokens per task by phase — mean ± std (share %)", frame, by, "phase", "tokens", 0
    )
    lat = _stat_table(
        "phases_latency",
        "Latency per task by phase, ms — mean ± std (share %)",
        frame,
        by,
        "phase",
        "latency_ms",
        1,
    )
    lat.notes += notes
    return [tokens, lat]


def _views(rep: Report) -> list[Table]:
    by = rep.by
    out: list[Table] = []
    for name, frame in rep.tables.items():
        if name == "phases":
            out += _phase_views(frame, by, rep.table_notes.get("phases", []))
        elif name == "cost":
            if frame.empty:
                table = Table(
                    "cost", SECTIONS["cost"], [Column("phase")], empty="no task with every call priced"
                )
            else:
                table = _stat_table("cost", SECTIONS["cost"], frame, by, "phase", "usd", 4)
            table.notes += rep.table_notes.get("cost", [])
            out.append(table)
        elif name == "strategies":
            from promcp.analysis.views.strategies import STRATEGIES_NOTE, strategies_table

            table = strategies_table(frame)
            table.notes += [STRATEGIES_NOTE, *rep.table_notes.get("strategies", [])]
            out.append(table)
        elif name == "segments":
            out.append(
                _stat_table(
                    "segments",
                    "Latency segments per task, ms — mean ± std (share %)",
                    frame,
                    by,
                    "segment",
                    "latency_ms",
                    1,
                )
            )
        elif frame.empty:  # no error and no overflow is news; any other empty table is missing data
            empty = "none" if name in ("errors", "overflows") else "no data"
            out.append(
                Table(name, SECTIONS.get(name, name), [Column(str(c)) for c in frame.columns], empty=empty)
            )
        elif name == "init":
            out.append(_init_view(frame, by))
        elif name == "origins":
            out.append(_origins_view(frame, by))
        elif name == "resend":
            out.append(_resend_view(frame, by))
        elif name == "tasks":
            out.append(_tasks_view(frame))
        elif name == "errors":
            out.append(_errors_view(frame))
        elif name == "overflows":
            out.append(_overflows_view(frame))
        elif name == "tokenizers":
            out.append(_tokenizers_view(frame))
        elif name == "cache":
            out.append(_cache_view(frame, by))
        elif name == "schema_tax":
            out.append(_schema_tax_view(frame, by))
    return _finish(out, rep.approximations, list(rep.tables), by)


def _finish(
    out: list[Table], approximations: dict[str, str], sources: list[str], by: Sequence[str]
) -> list[Table]:
    """The notes every view shares (tokens counted by an approximation), each view's data source, constant group
    keys folded into titles."""
    if approximations:
        approx = "; ".join(f"{k} = {v}, a labelled approximation" for k, v in approximations.items())
        for table in out:
            if table.name in ("phases_tokens", "origins", "resend", "init", "tasks"):
                table.notes.append(f"tokens counted with {approx} (docs/tokens.md)")
    for table in out:
        table.source = table.source or next((n for n in sources if table.name.startswith(n)), None)
    return [_fold_constant_keys(t, [*by, "run_id"]) for t in out]


def _document(rep: Report | PhaseReport, tables: list[Table], excluded: list[dict[str, Any]]) -> Document:
    header = f"{rep.events:,} events · {rep.runs} run(s) · {rep.tasks} task(s)"
    if rep.tasks != rep.complete:
        header += f", {rep.complete} complete" + (" (all counted)" if rep.include_incomplete else " counted")
    doc = Document("promcp report", header=header, tables=tables, notes=list(rep.notes))
    doc.meta = {
        "events": rep.events,
        "runs": rep.runs,
        "tasks": rep.tasks,
        "complete_tasks": rep.complete,
        "include_incomplete": rep.include_incomplete,
        "by": rep.by,
        "approximations": rep.approximations,
        "excluded": excluded,
    }
    return doc


def report_document(rep: Report) -> Document:
    """The document ``promcp report`` prints (every renderer takes it)."""
    excluded = [
        {"run_id": r.run_id, "task_id": r.task_id, "outcome": r.outcome, "error": r.error}
        for r in rep.excluded.itertuples()
    ]
    doc = _document(rep, _views(rep), excluded if len(rep.excluded) else [])
    doc.data = dict(rep.tables)
    return doc


def phase_report_document(rep: PhaseReport) -> Document:
    """The document of ``promcp report --section phases`` computed without pandas
    (:func:`promcp.analysis.phase_report.phase_report`): the same header, views and notes as :func:`report_document`
    of the same selection; its data (CSV, JSON) is the views' rows."""
    views = _phase_views(rep.rows, rep.by, rep.table_notes.get("phases", []))
    return _document(rep, _finish(views, rep.approximations, ["phases"], rep.by), rep.excluded)
