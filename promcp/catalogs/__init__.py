"""Tool catalogs: recorded ``tools/list`` data of MCP servers, read into one small typed model.

A *catalog* is a file (or directory) listing the tools of one or more MCP servers — the data that drives the "tools
tax". promcp reads the public formats without needing the servers themselves::

    from promcp.catalogs import load_catalog

    cat = load_catalog("mcp-bench-servers.json")            # format detected; or format="mcp-bench"
    wiki = cat.server("Wikipedia")                          # display name or slug ("wikipedia")
    [t.name for t in wiki.tools]                            # listed order
    cat.tools()                                             # every tool, flattened; each keeps .server
    cat.subset(["Wikipedia", "NixOS"])                      # a smaller catalog
    cat.footprint(promcp.tokenizers.get("o200k_base"))      # {server: {n_tools, tokens, bytes, tools: {...}}}

Model (all frozen):

* :class:`Catalog` — ``path``, ``format``, ``servers`` (tuple, file order), ``server(name)``, ``names()``,
  ``tools()``, ``subset(names)``, ``footprint(counter)``.
* :class:`CatalogServer` — ``name``, ``slug``, ``tools`` (tuple), ``meta`` (``command``, ``serverInfo``,
  ``protocolVersion``, ``benchmark`` … as recorded), ``tools_list_raw`` (the exact captured ``tools/list`` result
  bytes when the source has them, else None), ``tools_list_result()`` / ``tools_list_bytes()`` (what a replay server
  sends: the captured bytes, else compact JSON of ``{"tools": [wire, ...]}``), ``footprint(counter)``.
* :class:`CatalogTool` — a read-only mapping that *is* the tool's raw JSON dict exactly as listed (``dict(tool)``),
  plus ``server``, ``name``, ``key`` (``server/tool``), ``wire`` (the MCP ``Tool`` dict: ``name``, ``description``,
  ``inputSchema`` and every other MCP field the source kept — ``title``, ``outputSchema``, ``annotations`` …),
  ``description``, ``input_schema``, ``summary`` (Tool Attention), ``entry`` (where it sits in the file) and
  ``qualified_name``: unique across the catalog — the tool's name, or ``<server-slug>__<name>`` when two servers list
  the same name (namespaced, never merged).

Formats (``format="auto"`` detects them):

================  ================================================================================================
``mcp-bench``     MCP-Bench tools dump ``{"servers": {display: {"name", "command", "tools": {tool: {name,
                  description, input_schema}}}}}`` (``input_schema`` becomes ``inputSchema`` on the wire)
``server-list``   ``[{server, command?, serverInfo?, protocolVersion?, tools: [MCP Tool, ...]}]`` — MCP-Universe,
                  the official reference servers, MCP-Bench re-listed
``flat``          ``[{server | server_name, name, description, inputSchema, ...}]`` — paper-tools-flat, tool-rot
``tool-attention``  ``[{id: "<server>__<tool>", summary, full_schema: {name, description, inputSchema}}]``
``tools-list``    one captured ``tools/list`` result ``{"tools": [...]}`` or the JSON-RPC response carrying it;
                  the server is named after the file
================  ================================================================================================

A directory stands for the catalog file inside it (``fixtures/benchmark_tools.json`` — tool-rot — or
``tools.json`` — Tool Attention). Footprints render each tool as promcp's host puts it in a prompt
(:func:`render_tool`: compact JSON of ``name``, ``description``, ``parameters``), so they equal the host's INIT
``tools_discovery`` footprints under the same tokenizer.

Errors are :class:`promcp.errors.ConfigError` naming the file and the entry (``key``), e.g.
``mcp-bench-servers.json [servers["Wikipedia"].tools["search"].input_schema]: the input schema must be a JSON
object``. Within one server a tool name listed twice is an error; across servers it is namespaced.
"""

from __future__ import annotations

from pathlib import Path

from promcp.catalogs._model import Catalog, CatalogServer, CatalogTool, render_tool, slugify
from promcp.catalogs._readers import FORMATS, detect, read
from promcp.wire import compact_json

__all__ = [
    "FORMATS",
    "Catalog",
    "CatalogServer",
    "CatalogTool",
    "compact_json",
    "detect",
    "load_catalog",
    "render_tool",
    "slugify",
]


def load_catalog(path: str | Path, format: str = "auto") -> Catalog:
    """Read the catalog at ``path`` (file or catalog directory); ``format`` is one of :data:`FORMATS` or ``auto``."""
    return read(path, format)
