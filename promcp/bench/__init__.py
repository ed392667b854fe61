"""Benchmark converters: public benchmark data → promcp benchmark files run through replay servers.

* :func:`convert_mcp_bench` — MCP-Bench runner-format task files + its servers' tools dump;
* :func:`convert_mcp_universe` — MCP-Universe benchmark YAMLs (+ their task JSONs) + captured ``tools/list``;
* :func:`convert_routing` — a routing catalog (tool-rot, Tool Attention) + its queries.

Each returns a :class:`Conversion` (``data``: the YAML mapping; ``notes``: what was skipped and why); write it
with :func:`write_benchmark`. Bad input raises :class:`~promcp.errors.ConfigError` naming the file and the entry.
"""

from __future__ import annotations

from promcp.bench._common import Conversion, write_benchmark
from promcp.bench._mcp_bench import convert as convert_mcp_bench
from promcp.bench._mcp_bench import expected_tools
from promcp.bench._mcp_universe import convert as convert_mcp_universe
from promcp.bench._routing import convert as convert_routing

#: The ProMCP paper's 15 MCP-Bench servers (30 single-server tasks: 2 per server).
PAPER_MCP_BENCH_SERVERS = (
    "Wikipedia",
    "Paper Search",
    "Scientific Computing",
    "Medical Calculator",
    "Hugging Face",
    "Game Trends",
    "OSINT Intelligence",
    "Weather Data",
    "NASA Data",
    "Car Price Evaluator",
    "Reddit",
    "Movie Recommender",
    "NixOS",
    "FruityVice",
    "Call for Papers",
)

__all__ = [
    "PAPER_MCP_BENCH_SERVERS",
    "Conversion",
    "convert_mcp_bench",
    "convert_mcp_universe",
    "convert_routing",
    "expected_tools",
    "write_benchmark",
]
