"""The sections of ``promcp report``, in display order, with their titles (no pandas: the CLI's parser reads them)."""

from __future__ import annotations

from typing import Final

#: Report sections in display order, with their titles.
SECTIONS: Final[dict[str, str]] = {
    "phases": "Phase attribution (tokens and latency per task: mean ± std, share of total)",
    "segments": "Latency segments (tool-plan S1–S2, tool-execution S3–S4, answer-synthesis S5–S6)",
    "init": "Session initialization per server and transport",
    "origins": "LLM input tokens by origin",
    "resend": "Cumulative re-send cost (top entries)",
    "tasks": "Tasks: outcome, rounds, tokens and time of every task",
    "errors": "Errors: every event that did not end ok, with its reason",
    "overflows": "Context overflows: LLM calls that did not fit the context window (not sent)",
    "tokenizers": "Tokenizer comparison over captured content",
    "cost": "Cost per task by phase, US dollars — mean ± std (share %)",
    "cache": "LLM input tokens by cache status and origin",
    "schema_tax": "Amortized schema tax: what re-sending each tool definition cost, billed vs. without caching vs. "
    "deferred",
    "strategies": "Strategies — each run's strategy measured against the baseline run and the what-if's prediction",
}
#: What ``promcp report`` shows without ``--section`` (``overflows`` too when there are any).
DEFAULT_SECTIONS: Final = ("phases", "segments", "init", "origins", "resend")
