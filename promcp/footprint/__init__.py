"""promcp.footprint — the tools tax of one MCP server, without an agent (``promcp footprint``, docs/footprint.md).

>>> from promcp.footprint import Target, measure
>>> fp = measure(Target(command=("python", "-m", "promcp.servers.echo")), ["o200k_base", "cl100k_base"])
>>> fp.total("o200k_base"), len(fp.tools), fp.startup_ms["initialize"]  # doctest: +SKIP

:func:`measure` starts the server through the host's session code (:mod:`promcp.footprint._session`), counts
every listed tool under each tokenizer (:mod:`promcp.footprint._measure`; a provider's exact count, such as
``anthropic:count_tokens``, by :mod:`promcp.footprint._provider`), and :func:`judge` applies a budget and a saved
baseline (:mod:`promcp.footprint._gate`).
"""

from __future__ import annotations

from promcp.footprint._gate import Baseline, Tolerance, Verdict, judge, read_baseline
from promcp.footprint._measure import (
    FOOTPRINT_STRATEGIES,
    FieldSize,
    Footprint,
    StrategyCost,
    ToolSize,
    footprint_of,
    host_tool,
    measure,
)
from promcp.footprint._session import Listing, Target, list_tools

__all__ = [
    "FOOTPRINT_STRATEGIES",
    "Baseline",
    "FieldSize",
    "Footprint",
    "Listing",
    "StrategyCost",
    "Target",
    "Tolerance",
    "ToolSize",
    "Verdict",
    "footprint_of",
    "host_tool",
    "judge",
    "list_tools",
    "measure",
    "read_baseline",
]
