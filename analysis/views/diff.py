"""``promcp diff``'s result as a document: per phase and per origin, A, B and the change."""

from __future__ import annotations

from promcp.analysis.diff import Diff
from promcp.analysis.report import Report
from promcp.analysis.views.base import Column, Document, Missing, Table
from promcp.analysis.views.strategies import STRATEGIES_NOTE, strategies_table

NOT_OBSERVABLE = Missing("not observable")
#: A side without a complete task (e.g. a dry run): it has no value, observable or not.
NO_DATA = Missing("no data")
_VALUES = ("tokens", "latency_ms", "tokens_share", "per_task", "per_call", "share")
_CHANGES = ("tokens", "latency_ms", "per_task", "per_call")


def _rows(d: Diff, name: str) -> list[dict[str, object]]:
    rows = [dict(r) for r in d.tables[name].to_dict(orient="records")]
    empty = {side: rep.complete == 0 for side, rep in (("a", d.a), ("b", d.b))}
    for r in rows:  # an origin one side cannot observe (exports hold no tool definitions)
        for side in ("a", "b"):
            if empty[side]:
                for key in _VALUES:
                    if f"{key}_{side}" in r:
                        r[f"{key}_{side}"] = NO_DATA
                for key in _CHANGES:
                    for suffix in ("_change", "_change_pct"):
                        if key + suffix in r:
                            r[key + suffix] = NO_DATA
            elif r.get(f"observable_{side}") is False:
                for key in ("per_task", "share"):
                    r[f"{key}_{side}"] = NOT_OBSERVABLE
                r["per_task_change"] = r["per_task_change_pct"] = NOT_OBSERVABLE
    return rows


def _notes(rep: Report, side: str) -> list[str]:
    return [f"{side}: {n}" for n in [*rep.notes, *(n for ns in rep.table_notes.values() for n in ns)]]


def diff_document(d: Diff, label_a: str, label_b: str) -> Document:
    """The document ``promcp diff`` prints; ``label_a``/``label_b`` name the two sides."""
    header = (
        f"A = {label_a} ({d.a.complete} task(s)) · B = {label_b} ({d.b.complete} task(s)); change = B − A"
    )
    doc = Document("promcp diff", header=header, data=dict(d.tables))
    doc.meta = {
        "a": {
            "label": label_a,
            "events": d.a.events,
            "runs": d.a.runs,
            "tasks": d.a.tasks,
            "complete": d.a.complete,
        },
        "b": {
            "label": label_b,
            "events": d.b.events,
            "runs": d.b.runs,
            "tasks": d.b.tasks,
            "complete": d.b.complete,
        },
    }
    doc.add(
        Table(
            "phases_tokens",
            "Tokens per task by phase — mean (A, B, change)",
            [
                Column("phase"),
                Column("tokens_a", "A", "number"),
                Column("tokens_b", "B", "number"),
                Column("tokens_change", "change", "change"),
                Column("tokens_change_pct", "change %", "change", 1),
                Column("tokens_share_a", "A share %", "percent", 1),
                Column("tokens_share_b", "B share %", "percent", 1),
            ],
            _rows(d, "phases"),
            source="phases",
        )
    )
    doc.add(
        Table(
            "phases_latency",
            "Latency per task by phase, ms — mean (A, B, change)",
            [
                Column("phase"),
                Column("latency_ms_a", "A", "number", 1),
                Column("latency_ms_b", "B", "number", 1),
                Column("latency_ms_change", "change", "change", 1),
                Column("latency_ms_change_pct", "change %", "change", 1),
            ],
            _rows(d, "phases"),
            source="phases",
        )
    )
    doc.add(
        Table(
            "origins",
            "LLM input tokens per task by origin — mean (A, B, change)",
            [
                Column("origin"),
                Column("per_task_a", "A", "number", 1),
                Column("per_task_b", "B", "number", 1),
                Column("per_task_change", "change", "change", 1),
                Column("per_task_change_pct", "change %", "change", 1),
                Column("share_a", "A share %", "percent", 1),
                Column("share_b", "B share %", "percent", 1),
            ],
            _rows(d, "origins"),
            source="origins",
        )
    )
    if "strategies" in d.tables:
        doc.add(strategies_table(d.tables["strategies"]))
        doc.notes.append(STRATEGIES_NOTE)
    doc.notes += _notes(d.a, "A") + _notes(d.b, "B")
    return doc
