"""promcp.analysis — load promcp traces into pandas and compute the attribution tables.

>>> import promcp.analysis as pa
>>> df = pa.load("traces/example")                   # one row per event (docs/events.md)
>>> pa.phase_attribution(df, by=["topology"])        # the paper's Tables 1/2, long format
>>> pa.report("traces/example").tables["segments"]   # every table ``promcp report`` prints

Every table is a pure function of the event frame; the rules that turn events into phases and segments without
counting a token twice are in docs/accounting.md.
"""

from promcp.analysis.load import load, load_content, load_table, scan
from promcp.analysis.report import SECTIONS, Report, report
from promcp.analysis.tables import (
    INIT_PHASES,
    ORIGINS,
    PHASES,
    SEGMENTS,
    ParquetEvents,
    input_origins,
    latency_segments,
    phase_attribution,
    resend_cost,
    session_init,
    task_phase_totals,
)
from promcp.analysis.tokenizer_compare import compare_tokenizers

__all__ = [
    "INIT_PHASES",
    "ORIGINS",
    "PHASES",
    "SECTIONS",
    "SEGMENTS",
    "ParquetEvents",
    "Report",
    "compare_tokenizers",
    "input_origins",
    "latency_segments",
    "load",
    "load_content",
    "load_table",
    "phase_attribution",
    "report",
    "resend_cost",
    "scan",
    "session_init",
    "task_phase_totals",
]
