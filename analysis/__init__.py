"""promcp.analysis — load promcp traces into pandas and compute the attribution tables.

>>> import promcp.analysis as pa
>>> df = pa.load("examples/default-run")              # one row per event (docs/events.md)
>>> pa.phase_attribution(df, by=["topology"])        # the paper's Tables 1/2, long format
>>> pa.task_table(df)                                # every task, its outcome and why it failed
>>> pa.report("examples/default-run").tables["segments"]   # every table ``promcp report`` prints

Every table is a pure function of the events; the rules that turn events into phases and segments without counting
a token twice, and which tasks count, are in docs/accounting.md. docs/analysis.md shows each helper with an example.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from promcp.analysis.cost import cache_split, call_costs, load_prices
    from promcp.analysis.diff import Diff, diff
    from promcp.analysis.engine import IMPLICIT_TASK, OUTCOMES, complete, outcomes, select
    from promcp.analysis.load import load, load_content, load_table, scan
    from promcp.analysis.report import Report, report
    from promcp.analysis.scanned import ParquetEvents
    from promcp.analysis.sections import SECTIONS
    from promcp.analysis.tables import (
        INIT_PHASES,
        ORIGINS,
        SEGMENTS,
        UNOBSERVED,
        input_origins,
        latency_segments,
        phase_attribution,
        resend_cost,
        session_init,
        task_phase_totals,
    )
    from promcp.analysis.task_sql import PHASES
    from promcp.analysis.tasks import errors, overflows, task_table
    from promcp.analysis.tokenizer_compare import compare_tokenizers

#: public name → the module that defines it: imported on first use, so that a command using one part of the package
#: (``promcp report --section phases`` runs without pandas) does not load every other
_WHERE = {
    **dict.fromkeys(("cache_split", "call_costs", "load_prices"), "cost"),
    **dict.fromkeys(("Diff", "diff"), "diff"),
    **dict.fromkeys(("IMPLICIT_TASK", "OUTCOMES", "complete", "outcomes", "select"), "engine"),
    **dict.fromkeys(("load", "load_content", "load_table", "scan"), "load"),
    **dict.fromkeys(("Report", "report"), "report"),
    "SECTIONS": "sections",
    "ParquetEvents": "scanned",
    "PHASES": "task_sql",
    **dict.fromkeys(
        (
            "INIT_PHASES",
            "ORIGINS",
            "SEGMENTS",
            "UNOBSERVED",
            "input_origins",
            "latency_segments",
            "phase_attribution",
            "resend_cost",
            "session_init",
            "task_phase_totals",
        ),
        "tables",
    ),
    **dict.fromkeys(("errors", "overflows", "task_table"), "tasks"),
    "compare_tokenizers": "tokenizer_compare",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """``promcp.analysis.report``, ``.diff`` and ``.load`` name a module and the function it defines: importing the
    module sets the package's attribute to the module, and this keeps the function there (``pa.report(...)``), as
    the package did when it imported everything at once."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "IMPLICIT_TASK",
    "INIT_PHASES",
    "ORIGINS",
    "OUTCOMES",
    "PHASES",
    "SECTIONS",
    "SEGMENTS",
    "UNOBSERVED",
    "Diff",
    "ParquetEvents",
    "Report",
    "cache_split",
    "call_costs",
    "compare_tokenizers",
    "complete",
    "diff",
    "errors",
    "input_origins",
    "latency_segments",
    "load",
    "load_content",
    "load_prices",
    "load_table",
    "outcomes",
    "overflows",
    "phase_attribution",
    "report",
    "resend_cost",
    "scan",
    "select",
    "session_init",
    "task_phase_totals",
    "task_table",
]
