"""promcp.analysis — load promcp traces into pandas and compute the attribution tables.

>>> import promcp.analysis as pa
>>> df = pa.load("examples/default-run")              # one row per event (docs/events.md)
>>> pa.phase_attribution(df, by=["topology"])        # the paper's Tables 1/2, long format
>>> pa.task_table(df)                                # every task, its outcome and why it failed
>>> pa.report("examples/default-run").tables["segments"]   # every table ``promcp report`` prints

Every table is a pure function of the events; the rules that turn events into phases and segments without counting
a token twice, and which tasks count, are in docs/accounting.md. docs/analysis.md shows each helper with an example.
"""

from promcp.analysis.cost import cache_split, call_costs, load_prices
from promcp.analysis.diff import Diff, diff
from promcp.analysis.engine import IMPLICIT_TASK, OUTCOMES, complete, outcomes, select
from promcp.analysis.load import load, load_content, load_table, scan
from promcp.analysis.report import SECTIONS, Report, report
from promcp.analysis.scanned import ParquetEvents
from promcp.analysis.tables import (
    INIT_PHASES,
    ORIGINS,
    PHASES,
    SEGMENTS,
    UNOBSERVED,
    input_origins,
    latency_segments,
    phase_attribution,
    resend_cost,
    session_init,
    task_phase_totals,
)
from promcp.analysis.tasks import errors, overflows, task_table
from promcp.analysis.tokenizer_compare import compare_tokenizers

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
