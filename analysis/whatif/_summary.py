"""Per-strategy summary of what-if turns (the table ``promcp whatif`` prints)."""

from __future__ import annotations

import pandas as pd

SUMMARY_COLUMNS = [
    "strategy",
    "turns",
    "tasks",
    "tokens_per_turn",
    "full_per_turn",
    "reduction_pct",
    "tokens_per_task",
    "saved_total",
    "recall_pct",
    "hidden_pct",
    "routing_ms_mean",
    "routing_ms_p95",
    "saved_usd",
    "saved_usd_cached",
]


def summarize(turns: pd.DataFrame, order: list[str] | None = None) -> pd.DataFrame:
    """One row per strategy.

    ``turns`` has one row per (LLM call or query, strategy) with ``strategy``, ``tokens`` and ``full_tokens`` (the
    tokens this strategy's part of the call costs and the baseline's), ``expected``/``hits`` (tool calls known for
    the turn, and how many the strategy left visible), ``routing_ms``, and optionally ``task``.

    * ``reduction_pct``: mean over turns of ``1 - tokens / full_tokens`` (tool-rot's "avg token reduction"), over
      the turns whose baseline has tokens (a 0-token baseline has no reduction to speak of; None if none has);
    * ``saved_total``: cumulative re-send savings, ``sum(full_tokens - tokens)`` over every call;
    * ``saved_usd`` / ``saved_usd_cached``: the same savings in US dollars of input, without and with prompt
      caching (over the turns with a price; None when none has: local models, catalogs);
    * ``recall_pct``: expected tool calls left visible / expected tool calls (Recall@K for routed strategies);
      ``hidden_pct`` is its complement, the share of tool calls the strategy would have hidden from the model.
    """
    rows = []
    strategies = order or list(dict.fromkeys(turns["strategy"]))
    for name in strategies:
        g = turns[turns["strategy"] == name]
        if g.empty:
            continue
        full = g["full_tokens"].astype("float64")
        costed = full > 0
        expected = int(g["expected"].sum())
        recall = 100.0 * int(g["hits"].sum()) / expected if expected else None
        routed = g["routing_ms"] > 0
        tasks = int(g["task"].nunique()) if "task" in g else None
        rows.append(
            {
                "strategy": name,
                "turns": len(g),
                "tasks": tasks,
                "tokens_per_turn": float(g["tokens"].mean()),
                "full_per_turn": float(g["full_tokens"].mean()),
                "reduction_pct": float(100.0 * (1 - g.loc[costed, "tokens"] / full[costed]).mean())
                if costed.any()
                else None,
                "tokens_per_task": float(g.groupby("task")["tokens"].sum().mean()) if tasks else None,
                "saved_total": int((g["full_tokens"] - g["tokens"]).sum()),
                "recall_pct": recall,
                "hidden_pct": None if recall is None else 100.0 - recall,
                "routing_ms_mean": float(g.loc[routed, "routing_ms"].mean()) if routed.any() else None,
                "routing_ms_p95": float(g.loc[routed, "routing_ms"].quantile(0.95)) if routed.any() else None,
                "saved_usd": _saved(g, "full_usd", "usd"),
                "saved_usd_cached": _saved(g, "full_usd_cached", "usd_cached"),
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _saved(turns: pd.DataFrame, full: str, strategy: str) -> float | None:
    """``sum(full - strategy)`` in US dollars over the priced turns; None when no turn has a price."""
    if full not in turns or strategy not in turns:
        return None
    priced = turns[full].notna() & turns[strategy].notna()
    return float((turns.loc[priced, full] - turns.loc[priced, strategy]).sum()) if priced.any() else None
