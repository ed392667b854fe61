"""The strategies comparison (:mod:`promcp.analysis.strategies`) as a view: ``promcp diff``'s ``strategies`` table
and ``promcp report``'s ``strategies`` section are this one table."""

from __future__ import annotations

import pandas as pd

from promcp.analysis.views.base import Column, Table

STRATEGIES_NOTE = (
    "strategies: measured over the tasks both sides answered (per call: mean per task, then over tasks); "
    "'predicted' is the what-if of that strategy over A's own calls (same K and scorer), 'diff %' = "
    "(measured − predicted) / predicted; see docs/whatif.md, 'Live runs'"
)


def strategies_table(frame: pd.DataFrame) -> Table:
    """The strategies comparison (:func:`promcp.analysis.strategies.compare`) as a view."""
    return Table(
        "strategies",
        "Strategies — measured vs the what-if's prediction from the baseline",
        [
            Column("strategy"),
            Column("answered"),
            Column("expected_pct", "expected tool %", "percent", 1),
            Column("calls_per_task", "calls per task", "number", 2),
            Column("schema_per_call", "schema tok per call", "number", 1),
            Column("predicted_schema_per_call", "predicted", "number", 1),
            Column("schema_diff_pct", "diff %", "change", 2),
            Column("input_per_task", "input tok per task", "number", 1),
            Column("predicted_input_per_task", "predicted input", "number", 1),
            Column("input_diff_pct", "input diff %", "change", 1),
            Column("saved_per_call", "saved tok per call (proxy)", "number", 1),
            Column("prefill_ms_per_call", "prefill ms per call", "number", 1),
            Column("latency_ms_per_task", "latency ms per task", "number", 1),
            Column("usd_per_task", "$ per task", "number", 5),
            Column("routing_ms_p50", "routing ms p50", "number", 1),
            Column("routing_ms_p95", "routing ms p95", "number", 1),
            Column("fallbacks", "fallbacks", "number"),
        ],
        [dict(r) for r in frame.to_dict(orient="records")],
        source="strategies",
    )
