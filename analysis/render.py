"""Render report tables: rich terminal tables in the paper's layout, or CSV / JSON / Markdown for scripts.

The terminal and Markdown views follow the paper's Tables 1 and 2: one row per phase, one column per group
(topology, model, …), each cell ``mean ± std (share %)``. CSV and JSON carry the raw numbers (long format).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from typing import Any, Final

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from promcp.analysis.report import SECTIONS, Report

FORMATS: Final = ("table", "csv", "json", "markdown")


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "—"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def cell(mean: Any, std: Any, share: Any = None, digits: int = 0) -> str:
    """``mean ± std (share%)`` with thousands separators; missing parts are left out."""
    text = _num(mean, digits)
    if text == "—":
        return text
    if std is not None and not (isinstance(std, float) and math.isnan(std)):
        text += f" ± {_num(std, digits)}"
    if share is not None and not (isinstance(share, float) and math.isnan(share)):
        text += f" ({share:.1f}%)"
    return text


def _group_label(row: pd.Series, by: Sequence[str]) -> str:
    return " / ".join(str(row[k]) for k in by) if by else "all"


def paper_layout(
    table: pd.DataFrame, by: Sequence[str], item: str, value: str, digits: int = 0
) -> pd.DataFrame:
    """Pivot a long stats table (``*by, item, <value>_mean, <value>_std, <value>_share``) into the paper's layout."""
    if table.empty:
        return pd.DataFrame()
    labels = table.apply(lambda r: _group_label(r, by), axis=1)
    cells = [
        cell(r[f"{value}_mean"], r[f"{value}_std"], r.get(f"{value}_share"), digits)
        for _, r in table.iterrows()
    ]
    long = pd.DataFrame({item: table[item].to_numpy(), "group": labels.to_numpy(), "cell": cells})
    order = list(dict.fromkeys(long[item]))
    wide = long.pivot(index=item, columns="group", values="cell").reindex(order)
    wide.columns.name = None
    return wide.reset_index()


def _views(rep: Report, by: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    """The human-readable tables of a report, titled."""
    views: list[tuple[str, pd.DataFrame]] = []
    for name, table in rep.tables.items():
        if name == "phases":
            views.append(
                (
                    "Tokens per task by phase — mean ± std (share %)",
                    paper_layout(table, by, "phase", "tokens"),
                )
            )
            views.append(
                (
                    "Latency per task by phase, ms — mean ± std (share %)",
                    paper_layout(table, by, "phase", "latency_ms", digits=1),
                )
            )
        elif name == "segments":
            views.append(
                (
                    "Latency segments per task, ms — mean ± std (share %)",
                    paper_layout(table, by, "segment", "latency_ms", digits=1),
                )
            )
        elif name == "init" and not table.empty and "spawn_ms_mean" in table:
            tokenizers = sorted(set(table["tokenizer"]) - {"—"})
            view = table[[*by, "server", "transport"]].copy()
            view["sessions"] = [
                f"{n}" if not f else f"{n} ({f} failed)"
                for n, f in zip(table["sessions"], table["failures"], strict=True)
            ]
            labels = {
                "spawn": "spawn ms",
                "ready": "ready ms",
                "initialize": "init ms",
                "tools_discovery": "tools/list ms",
            }
            for p, label in labels.items():
                view[label] = [
                    cell(m, s, None, 1)
                    for m, s in zip(table[f"{p}_ms_mean"], table[f"{p}_ms_std"], strict=True)
                ]
            view["tools"] = table["tools"].map(lambda v: _num(v))
            view["schema tokens"] = table["schema_tokens"].map(lambda v: _num(v))
            view["schema bytes"] = table["schema_bytes"].map(lambda v: _num(v))
            title = SECTIONS[name] + (f" — schema tokens under {', '.join(tokenizers)}" if tokenizers else "")
            views.append((title, view))
        elif name == "origins" and not table.empty:
            view = table[[*by, "origin"]].copy()
            view["per call"] = table["per_call_mean"].map(lambda v: _num(v, 1))
            view["per task"] = table["per_task_mean"].map(lambda v: _num(v, 1))
            view["share %"] = table["share"].map(lambda v: _num(v, 1))
            view["calls"] = table["calls"]
            views.append((SECTIONS[name], view))
        elif name == "resend" and not table.empty:
            view = table.copy()
            view["resent_share"] = view["resent_share"].map(lambda v: _num(v, 1))
            view = view.rename(
                columns={
                    "tokens_first": "first",
                    "tokens_resent": "resent",
                    "tokens_total": "total",
                    "resent_share": "resent %",
                }
            )
            views.append((SECTIONS[name] + " — tokens", view))
        elif name == "tokenizers" and not table.empty:
            view = table.copy()
            for c, digits in (
                ("tokens_mean", 1),
                ("ratio_to_ref", 3),
                ("pearson_r", 3),
                ("tokens_per_char", 4),
                ("tokens_per_byte", 4),
            ):
                view[c] = [_num(v, digits) for v in view[c]]
            views.append((SECTIONS[name], view))
        else:
            views.append((SECTIONS.get(name, name), table))
    return views


def _looks_numeric(col: pd.Series) -> bool:
    """Formatted number cells ("1,234 ± 56 (7.8%)", "—") are right-aligned like numbers."""
    values = [v for v in col.head(20) if isinstance(v, str) and v != "—"]
    return bool(values) and all(v[:1].isdigit() or v[:1] == "-" for v in values)


def _header(rep: Report) -> str:
    return f"{rep.events:,} events · {rep.runs} run(s) · {rep.tasks} task(s)"


def _fold_constant_keys(title: str, view: pd.DataFrame, by: Sequence[str]) -> tuple[str, pd.DataFrame]:
    """A grouping column with one value in the whole table moves into the title (saves terminal width)."""
    for key in by:
        if key in view.columns and len(view) and view[key].nunique(dropna=False) == 1:
            title = f"{title} [{key}: {view[key].iloc[0]}]"
            view = view.drop(columns=[key])
    return title, view


def to_rich(rep: Report, by: Sequence[str], console: Console) -> None:
    console.print(f"[bold]promcp report[/] — {_header(rep)}")
    for title, view in _views(rep, by):
        title, view = _fold_constant_keys(title, view, by)
        if view.empty:
            console.print(f"[dim]{title}: no data[/]")
            continue
        console.print(f"[bold]{escape(title)}[/]")  # a line of its own: a title inside a narrow table wraps
        table = Table(show_lines=False, header_style="bold")
        for i, col in enumerate(view.columns):
            numeric = pd.api.types.is_numeric_dtype(view[col]) or _looks_numeric(view[col])
            table.add_column(str(col), justify="right" if numeric and i > 0 else "left", no_wrap=i == 0)
        for _, row in view.iterrows():
            table.add_row(*(_num(v) if not isinstance(v, str) else v for v in row.tolist()))
        console.print(table)
    for note in rep.notes:
        console.print(f"[yellow]note:[/] {note}")


def to_markdown(rep: Report, by: Sequence[str]) -> str:
    lines = [f"_{_header(rep)}_", ""]
    for title, view in _views(rep, by):
        lines.append(f"**{title}**")
        lines.append("")
        if view.empty:
            lines += ["_no data_", ""]
            continue
        cols = [str(c) for c in view.columns]
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(cols))) + "|")
        for _, row in view.iterrows():
            lines.append("| " + " | ".join(v if isinstance(v, str) else _num(v) for v in row.tolist()) + " |")
        lines.append("")
    lines += [f"> note: {n}" for n in rep.notes]
    return "\n".join(lines).rstrip() + "\n"


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(df.to_json(orient="records", double_precision=6))
    return out


def to_json(rep: Report) -> str:
    doc = {
        "events": rep.events,
        "runs": rep.runs,
        "tasks": rep.tasks,
        "notes": rep.notes,
        "tables": {name: _records(t) for name, t in rep.tables.items()},
    }
    return json.dumps(doc, indent=2)


def to_csv(rep: Report, table: str) -> str:
    if table not in rep.tables:
        raise ValueError(
            f"table {table!r} is not in this report; available: {', '.join(rep.tables) or 'none'}"
        )
    buf = io.StringIO()
    rep.tables[table].to_csv(buf, index=False)
    return buf.getvalue()
