"""Converters: public MCP benchmark data → promcp benchmark files whose servers are replay servers.

The user's files stay where they are; the benchmark file refers to the catalog by a path relative to itself, and
``promcp run`` starts one ``python -m promcp.servers.replay`` per server (see docs/paper-scale.md)::

    from promcp.bench import convert_mcp_bench, PAPER_SERVERS
    doc = convert_mcp_bench(["mcpbench_tasks_single_runner_format.json"], "mcp_servers_info.json",
                            servers=PAPER_SERVERS, single_only=True)
    doc.write(Path("mcp-bench-paper.yaml"))

* :func:`convert_mcp_bench` — MCP-Bench task files + tools dump (:mod:`promcp.bench.mcp_bench`);
* :func:`convert_mcp_universe` — MCP-Universe benchmark YAMLs + task JSONs + captured tools/list
  (:mod:`promcp.bench.mcp_universe`);
* :func:`convert_routing` — a routing fixture (tool-rot, Tool Attention): every query a task offered every tool
  (:mod:`promcp.bench.routing`).

Each returns a :class:`BenchmarkDoc` (``tasks``, ``servers``, ``skipped`` — what was left out and why;
``write(path)``). Malformed input raises :class:`promcp.errors.ConfigError` naming the file and the entry.
"""

from __future__ import annotations

from promcp.bench._doc import BenchmarkDoc
from promcp.bench.mcp_bench import PAPER_SERVERS, convert_mcp_bench, expected_tools
from promcp.bench.mcp_universe import convert_mcp_universe
from promcp.bench.routing import convert_routing

__all__ = [
    "PAPER_SERVERS",
    "BenchmarkDoc",
    "convert_mcp_bench",
    "convert_mcp_universe",
    "convert_routing",
    "expected_tools",
]
