"""The strategies the what-if projects: the one definition lives in :mod:`promcp.strategies.payloads`, which the
live paths (``promcp run --strategy``) call too; this module keeps the what-if's import path."""

from promcp.strategies.payloads import (
    ROUTED,
    SEARCH_TOOL,
    STRATEGIES,
    Payload,
    dedup,
    full,
    result_fields,
    search_tool,
    slim,
    summary_pool,
    topk,
    two_phase,
)

__all__ = [
    "ROUTED",
    "SEARCH_TOOL",
    "STRATEGIES",
    "Payload",
    "dedup",
    "full",
    "result_fields",
    "search_tool",
    "slim",
    "summary_pool",
    "topk",
    "two_phase",
]
