"""Schema weight: every tool a server listed, its schema tokens (``INIT tools_discovery`` ``attrs.tools``), what
its schema cost over all LLM calls that carried it (the cumulative re-send cost, docs/accounting.md), and whether
any task ever called it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from promcp.analysis.engine import Events
from promcp.analysis.load import attrs_of
from promcp.analysis.tables import BUILTIN_SERVER, resend_cost
from promcp.analysis.views.html._frames import number, query

COLUMNS = (
    "run_id",
    "server",
    "tool",
    "schema_tokens",
    "schema_bytes",
    "tokenizer",
    "sends",
    "tokens_total",
    "tokens_resent",
    "called",
)


def schema_weight(
    events: Events, limit: int, *, include_incomplete: bool = False
) -> tuple[pd.DataFrame, int]:
    """One row per (run, server, tool) for the ``limit`` heaviest tools of the dataset; and how many tools there
    are in all. The re-send cost counts the tasks the report counts (complete ones unless ``include_incomplete``);
    a tool is "called" when any task called it."""
    listed = query(
        events,
        "SELECT CAST(run_id AS VARCHAR) AS run_id, CAST(server AS VARCHAR) AS server, "
        "CAST(tokenizer AS VARCHAR) AS tokenizer, attrs, count(*) AS sessions FROM ev "
        "WHERE CAST(stage AS VARCHAR) = 'INIT' AND CAST(phase AS VARCHAR) = 'tools_discovery' "
        "AND attrs IS NOT NULL GROUP BY ALL",
    )
    rows: list[dict[str, Any]] = []
    for r in listed.itertuples(index=False):
        for name, info in (attrs_of(r.attrs).get("tools") or {}).items():
            if not isinstance(info, dict):
                continue
            rows.append(
                {
                    "run_id": r.run_id,
                    "server": r.server or "—",
                    "tool": str(name),
                    "schema_tokens": number(info.get("tokens")),
                    "schema_bytes": number(info.get("bytes")),
                    "tokenizer": r.tokenizer,
                    "sessions": int(r.sessions),
                }
            )
    tools = pd.DataFrame(
        rows, columns=["run_id", "server", "tool", "schema_tokens", "schema_bytes", "tokenizer", "sessions"]
    )
    if len(tools):  # a tool listed by several sessions of a run: its mean size, weighted by sessions
        tools["_w"] = tools["schema_tokens"] * tools["sessions"]
        tools["_b"] = tools["schema_bytes"] * tools["sessions"]
        tools = (
            tools.groupby(["run_id", "server", "tool"], sort=False)
            .agg(
                _w=("_w", "sum"),
                _b=("_b", "sum"),
                sessions=("sessions", "sum"),
                tokenizer=("tokenizer", "first"),
            )
            .reset_index()
        )
        tools["schema_tokens"] = tools["_w"] / tools["sessions"]
        tools["schema_bytes"] = tools["_b"] / tools["sessions"]
        tools = tools.drop(columns=["_w", "_b", "sessions"])
    resend = resend_cost(events, ["run_id"], include_incomplete=include_incomplete)
    resend = resend[resend["origin"] == "schemas"][
        ["run_id", "server", "tool", "sends", "tokens_total", "tokens_resent"]
    ]
    merged = tools.merge(resend, on=["run_id", "server", "tool"], how="outer") if len(tools) else resend
    if merged.empty:
        return pd.DataFrame(columns=list(COLUMNS)), 0
    called = query(
        events,
        "SELECT DISTINCT CAST(run_id AS VARCHAR) AS run_id, CAST(server AS VARCHAR) AS server, "
        "CAST(tool AS VARCHAR) AS tool FROM ev WHERE CAST(stage AS VARCHAR) = 'S3' AND tool IS NOT NULL",
    )
    # a tool call without a server is the client's own tool (its derived S3, e.g. Claude Code's ToolSearch)
    hit = set(zip(called["run_id"], called["server"].fillna(BUILTIN_SERVER), called["tool"], strict=True))
    merged["called"] = [
        (r, s, t) in hit for r, s, t in zip(merged["run_id"], merged["server"], merged["tool"], strict=True)
    ]
    for c in ("sends", "tokens_total", "tokens_resent"):
        merged[c] = merged[c].fillna(0)
    if "schema_tokens" not in merged:
        merged = merged.assign(schema_tokens=None, schema_bytes=None, tokenizer=None)
    weight = merged.groupby(["server", "tool"], sort=False).agg(
        w=("schema_tokens", "max"), t=("tokens_total", "sum")
    )
    weight["rank"] = weight[["w", "t"]].fillna(0).max(axis=1)
    top = weight.sort_values("rank", ascending=False).head(limit).index
    keep = pd.MultiIndex.from_frame(merged[["server", "tool"]]).isin(top)
    return merged[keep].reset_index(drop=True)[list(COLUMNS)], len(weight)
