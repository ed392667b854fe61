"""Small helpers shared by the page's data builders: SQL over the events, JSON-safe values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from promcp.analysis.engine import Events, as_arrow, ident
from promcp.analysis.engine import query as _query

#: The group of a run's start-up events when the run has no other event to attribute them to. (Task events
#: without a task id already belong to the run's implicit task, :data:`promcp.analysis.engine.IMPLICIT_TASK`.)
STARTUP_ONLY = "(start-up)"


def query(events: Events, sql: str) -> pd.DataFrame:
    """Run ``sql`` over the events (the engine's normalized, selected view ``ev``), as the attribution tables do."""
    return _query(sql, as_arrow(events))


def select_list(events: Events, columns: Sequence[str]) -> str:
    """``col, col, NULL AS col`` — columns an older file lacks come back as nulls, text as VARCHAR."""
    present = set(as_arrow(events).column_names)
    out = []
    for c in columns:
        out.append(f"CAST({ident(c)} AS VARCHAR) AS {ident(c)}" if c in _TEXT and c in present else
                   (ident(c) if c in present else f"NULL AS {ident(c)}"))  # fmt: skip
    return ", ".join(out)


#: Dictionary-encoded (categorical) text columns: cast to VARCHAR so pandas gets plain strings.
_TEXT = frozenset(
    {
        "run_id",
        "topology",
        "source",
        "benchmark",
        "task_id",
        "stage",
        "phase",
        "timing_quality",
        "model",
        "provider",
        "server",
        "tool",
        "transport",
        "token_source",
        "tokenizer",
        "status",
        "error_type",
    }
)


def sql_text(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def clean(value: Any) -> Any:
    """A JSON-safe scalar: NaN/NA → None, numpy numbers → Python numbers."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return clean(value.item())
    return value


def jsonable(value: Any) -> Any:
    """``value`` with every NaN/NA replaced by None and every non-JSON scalar by its text, recursively."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    v = clean(value)
    return v if v is None or isinstance(v, str | int | float | bool) else str(v)


def number(value: Any) -> float | None:
    """A finite number, or None."""
    v = clean(value)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)
