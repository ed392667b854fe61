"""The report: every attribution table of a dataset in one place (what ``promcp report`` prints)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pandas as pd
import pyarrow as pa

from promcp.analysis.load import load_content, scan
from promcp.analysis.tables import (
    ParquetEvents,
    _query,
    input_origins,
    latency_segments,
    phase_attribution,
    resend_cost,
    session_init,
)
from promcp.analysis.tokenizer_compare import compare_tokenizers

#: Report sections in display order, with their titles.
SECTIONS: Final[dict[str, str]] = {
    "phases": "Phase attribution (tokens and latency per task: mean ± std, share of total)",
    "segments": "Latency segments (tool-plan S1–S2, tool-execution S3–S4, answer-synthesis S5–S6)",
    "init": "Session initialization per server and transport",
    "origins": "LLM input tokens by origin",
    "resend": "Cumulative re-send cost (top entries)",
    "tokenizers": "Tokenizer comparison over captured content",
}

#: Columns :func:`report` reads (loading only these keeps million-event reports fast).
REPORT_COLUMNS: Final = (
    "run_id",
    "topology",
    "benchmark",
    "model",
    "task_id",
    "round",
    "seq",
    "stage",
    "phase",
    "server",
    "tool",
    "transport",
    "tool_call_id",
    "tokens_in",
    "tokens_out",
    "footprint_tokens",
    "footprint_bytes",
    "tokenizer",
    "latency_ms",
    "status",
    "in_system",
    "in_schemas",
    "in_user",
    "in_history",
    "in_tool_results",
    "parts",
    "attrs",
)


@dataclass
class Report:
    """Named result tables (pandas) of one dataset, plus what was left out."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    events: int = 0
    runs: int = 0
    tasks: int = 0
    notes: list[str] = field(default_factory=list)


def report(
    data: str | Path | pd.DataFrame | pa.Table | ParquetEvents,
    *,
    by: Sequence[str] = ("topology",),
    sections: Sequence[str] | None = None,
    tokenizers: Sequence[str] = (),
    resend_top: int = 15,
) -> Report:
    """Compute the report tables for a dataset path (or an already loaded frame).

    ``sections`` picks from :data:`SECTIONS` (default: all but ``tokenizers``, which runs only when ``tokenizers``
    names at least one tokenizer to compare over the dataset's captured content).
    """
    wanted = list(sections) if sections is not None else [s for s in SECTIONS if s != "tokenizers"]
    if tokenizers and "tokenizers" not in wanted:
        wanted.append("tokenizers")
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown report section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    if isinstance(data, pd.DataFrame):
        df: pa.Table | ParquetEvents = pa.Table.from_pandas(data, preserve_index=False)
    elif isinstance(data, pa.Table | ParquetEvents):
        df = data
    else:
        df = scan(data)
    counts = _query(
        "SELECT count(*) AS events, count(DISTINCT run_id) AS runs, "
        "count(DISTINCT (run_id, task_id)) FILTER (WHERE task_id IS NOT NULL) AS tasks, "
        "count(*) FILTER (WHERE status = 'context_overflow') AS overflow FROM ev",
        df,
    )
    out = Report(
        events=int(counts.at[0, "events"]), runs=int(counts.at[0, "runs"]), tasks=int(counts.at[0, "tasks"])
    )
    overflow = int(counts.at[0, "overflow"])
    if overflow:
        out.notes.append(
            f"{overflow} LLM call(s) did not fit the context window (status context_overflow); "
            "they are left out of the phase tables"
        )
    builders = {
        "phases": lambda: phase_attribution(df, by),
        "segments": lambda: latency_segments(df, by),
        "init": lambda: session_init(df, [*by, "server", "transport"]),
        "origins": lambda: input_origins(df, by),
        "resend": lambda: resend_cost(df, by).head(resend_top),
    }
    for name in wanted:
        if name == "tokenizers":
            if not tokenizers:
                out.notes.append("tokenizer comparison needs --tokenizers NAME[,NAME…]")
                continue
            if not isinstance(data, str | Path):
                out.notes.append("tokenizer comparison needs a dataset path (captured content)")
                continue
            content = load_content(data)
            if content.empty:
                out.notes.append("no captured content in this dataset: tokenizer comparison skipped")
                continue
            out.tables[name] = compare_tokenizers(content["text"].tolist(), list(tokenizers))
        else:
            out.tables[name] = builders[name]()
    return out
