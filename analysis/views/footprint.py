"""``promcp footprint``'s result as a document: per-tool schema tokens under each tokenizer, the largest fields,
what ``slim`` / ``dedup`` would save, start-up time, and the gate's verdict (budget, baseline).

``--format json`` writes ``{server, target, transport, tools, pages, tokenizers, totals: {tokenizer: tokens},
bytes, listed_bytes, startup_ms, verdict, failures, …, notes, tables: {tools, fields, strategies, startup,
changes}}``; its ``totals`` and ``tables.tools`` are what ``--baseline`` reads back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from promcp.analysis.views.base import Column, Document, Table

if TYPE_CHECKING:
    from promcp.footprint import Footprint, Verdict

#: The largest tools shown in the human formats (every tool is in the JSON data).
TOP_TOOLS = 50


def footprint_document(fp: Footprint, verdict: Verdict | None = None) -> Document:
    first = fp.tokenizers[0]
    totals = " · ".join(f"{fp.total(n):,} tokens ({n})" for n in fp.tokenizers)
    header = f"{fp.server} ({fp.transport}): {len(fp.tools)} tools · {totals} · {fp.total_bytes:,} B"
    meta = fp.summary()
    if verdict is not None:
        meta.update(verdict.summary())
    doc = Document("promcp footprint", header=header, meta=meta)
    doc.data["tools"] = pd.DataFrame(
        [
            {
                "tool": t.name,
                "tokenizer": n,
                "tokens": t.tokens[n],
                "bytes": t.bytes,
                "listed_bytes": t.listed_bytes,
            }
            for t in fp.tools
            for n in fp.tokenizers
        ],
        columns=["tool", "tokenizer", "tokens", "bytes", "listed_bytes"],
    )
    keys = {n: f"tok_{i}" for i, n in enumerate(fp.tokenizers)}
    ranked = sorted(fp.tools, key=lambda t: (-t.tokens[first], t.name))
    total_row = {"tool": "(total)", "bytes": fp.total_bytes, **{keys[n]: fp.total(n) for n in fp.tokenizers}}
    tools = doc.add(
        Table(
            "tools",
            f"Schema tokens per tool, largest first ({first})",
            [
                Column("tool"),
                *(Column(keys[n], n, "number") for n in fp.tokenizers),
                Column("share", "share %", "percent", 1),
                Column("bytes", "bytes", "number"),
            ],
            [
                {
                    "tool": t.name,
                    "bytes": t.bytes,
                    "share": 100.0 * t.tokens[first] / fp.total(first) if fp.total(first) else None,
                    **{keys[n]: t.tokens[n] for n in fp.tokenizers},
                }
                for t in ranked[:TOP_TOOLS]
            ]
            + [total_row],
            empty="the server lists no tools",
            source="tools",
        )
    )
    if len(ranked) > TOP_TOOLS:
        tools.notes.append(f"the {TOP_TOOLS} largest of {len(ranked):,} tools; --format json lists them all")
    doc.add(
        Table(
            "fields",
            f"Largest fields ({fp.local_tokenizer})",
            [
                Column("tool"),
                Column("field"),
                Column("tokens", kind="number"),
                Column("bytes", kind="number"),
            ],
            [{"tool": f.tool, "field": f.field, "tokens": f.tokens, "bytes": f.bytes} for f in fp.fields],
            key_columns=2,
            empty="no descriptions or parameters",
        )
    )
    doc.add(
        Table(
            "strategies",
            "What slimming or $ref deduplication would send instead (promcp whatif's strategies)",
            [
                Column("strategy"),
                Column("tokenizer"),
                Column("tokens", kind="number"),
                Column("saving", kind="number"),
                Column("saving_pct", "saving %", "percent", 1),
            ],
            [
                {
                    "strategy": s.strategy,
                    "tokenizer": s.tokenizer,
                    "tokens": s.tokens,
                    "saving": s.saving,
                    "saving_pct": 100.0 * s.saving / (s.tokens + s.saving) if s.tokens + s.saving else None,
                }
                for s in fp.strategies
            ],
            key_columns=2,
        )
    )
    doc.add(
        Table(
            "startup",
            "Start-up time, ms",
            [Column("phase"), Column("ms", kind="number", digits=1)],
            [{"phase": p, "ms": ms} for p, ms in fp.startup_ms.items()],
        )
    )
    if verdict is not None and verdict.changes:
        doc.add(
            Table(
                "changes",
                f"Against the baseline {verdict.baseline} (tolerance {verdict.tolerance})",
                [
                    Column("tool"),
                    Column("tokenizer"),
                    Column("baseline", kind="number"),
                    Column("tokens", kind="number"),
                    Column("change", kind="change"),
                    Column("status"),
                ],
                verdict.changes,
                key_columns=2,
            )
        )
    for name, exact in fp.exact.items():
        doc.notes.append(
            f"{name}: the provider's own count ({exact.api}); per tool = the count with every tool − the count "
            f"without that one; the total also holds what the provider adds once when tools are offered "
            f"({exact.overhead:,} tokens)"
        )
    for name, reason in fp.errors.items():
        doc.notes.append(f"{name}: not counted ({reason})")
    doc.notes.append(
        "schema tokens: each tool as a host renders it into a prompt (name, description, input schema as "
        "parameters; docs/footprint.md); full = the same tools as whatif's strategies send them"
    )
    if verdict is not None:
        doc.notes += verdict.failures or ["gate: pass"]
    return doc
