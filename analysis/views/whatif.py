"""``promcp whatif``'s result as a document: one row per strategy, the baseline (``full``) first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from promcp.analysis.views.base import MISSING, Column, Document, Table

if TYPE_CHECKING:  # not imported at run time: the what-if engine pulls in torch
    from promcp.analysis.whatif import WhatifResult

COLUMNS = [
    Column("strategy"),
    Column("turns", kind="number"),
    Column("tokens_per_turn", "tok/turn", "number", 1),
    Column("reduction_pct", "cut %", "percent", 1),
    Column("tokens_per_task", "tok/task", "number", 1),
    Column("saved_total", "saved", "number"),
    Column("recall_pct", "recall %", "percent", 1),
    Column("hidden_pct", "hidden %", "percent", 1),
    Column("routing_ms_mean", "route ms", "number", 1),
    Column("routing_ms_p95", "p95 ms", "number", 1),
    Column("saved_usd", "saved $", "number", 4),
    Column("saved_usd_cached", "saved $ cached", "number", 4),
]
#: Facts of ``meta`` shown under the table when present.
FACTS = ("n_tools", "queries", "queries_file", "llm_calls", "zero_baseline_turns", "skipped")


def whatif_document(result: WhatifResult, notes: list[str] | None = None) -> Document:
    """The what-if table of a result (:func:`~promcp.analysis.whatif.whatif_dataset`, a catalog evaluation, or
    :func:`~promcp.analysis.whatif.read_result`); its ``meta`` has ``mode``, ``source``, ``tokenizer``, ``k``,
    ``scorer`` and the facts. The scaling curve, when computed, is the data table ``scaling``."""
    summary, meta = result.summary, result.meta
    header = (
        f"{meta.get('mode') or MISSING} {meta.get('source') or MISSING} · tokenizer {meta.get('tokenizer') or MISSING}"
        f" · k={meta.get('k') or MISSING} · scorer {meta.get('scorer') or MISSING}"
    )
    doc = Document("promcp whatif", header=header, meta=dict(meta), data={"summary": summary})
    if result.scaling is not None:
        doc.data["scaling"] = result.scaling
    rows = [dict(r) for r in summary.to_dict(orient="records")]
    reason = (
        "no LLM calls to recompute: the dataset has no successful LLM input events (S1/S5); what-if needs a run "
        "or an import with LLM calls, or a tool catalog"
        if meta.get("mode") == "dataset" and not meta.get("llm_calls")
        else "no turns could be costed (see the notes)"
    )
    dollars = {"saved_usd", "saved_usd_cached"}
    priced = any(r.get(k) is not None and r.get(k) == r.get(k) for r in rows for k in dollars)
    doc.add(
        Table(
            "summary",
            "Tokens per turn under each strategy (full = as recorded)",
            COLUMNS if priced else [c for c in COLUMNS if c.key not in dollars],
            rows,
            empty=reason,
            source="summary",
        )
    )
    facts = {k: meta[k] for k in FACTS if meta.get(k)}
    if facts:
        doc.notes.append(" · ".join(f"{k}: {v}" for k, v in facts.items()))
    if meta.get("zero_baseline_turns"):
        doc.notes.append(
            f"{meta['zero_baseline_turns']} turn(s) whose recorded input has 0 tokens are left out of cut % "
            "(nothing to cut)"
        )
    if priced:
        doc.notes.append(
            "saved $: input dollars saved without prompt caching; saved $ cached: with it (a strategy that changes "
            "the tool list per call breaks the cached prefix and pays plain input; docs/whatif.md)"
        )
    doc.notes += notes or []
    return doc
