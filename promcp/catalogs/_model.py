"""The typed catalog: :class:`Catalog` → :class:`CatalogServer` → :class:`CatalogTool` (see the package docstring)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from promcp.errors import ConfigError
from promcp.wire import compact_json
from promcp.wire.mcp import tool_text

#: Tool fields of an MCP ``Tool`` (2025-11-25 / 2026-07-28 schema) kept on the wire when a source lists them.
WIRE_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "_meta")


def render_tool(tool: CatalogTool) -> str:
    """The text of one tool as promcp's host puts it in a prompt (:func:`promcp.wire.mcp.tool_text`)."""
    return tool_text(tool.name, tool.description, tool.input_schema)


class _Counter(Protocol):
    def count(self, text: str) -> int: ...


@dataclass(frozen=True, eq=False)
class CatalogTool(Mapping[str, Any]):
    """One tool. As a mapping it *is* its raw JSON dict exactly as the source listed it.

    ``wire`` is the tool as an MCP server lists it in ``tools/list`` (``name``, ``description``, ``inputSchema`` and
    any other MCP ``Tool`` fields the source kept, e.g. ``title``, ``outputSchema``, ``annotations``).
    ``qualified_name`` is unique across the catalog: the tool's own name, or ``<server-slug>__<name>`` when another
    server of the catalog lists a tool of the same name (duplicates are namespaced, never merged).
    """

    server: str
    name: str
    raw: Mapping[str, Any]
    wire: Mapping[str, Any]
    qualified_name: str = ""
    entry: str = ""  # where the tool sits in its source file, e.g. ``servers["Wikipedia"].tools["search"]``

    @property
    def key(self) -> str:
        """``<server>/<tool>``: the ``schemas`` part key promcp's host uses for this tool."""
        return f"{self.server}/{self.name}"

    @property
    def description(self) -> str:
        value = self.wire.get("description")
        return value if isinstance(value, str) else ""

    @property
    def input_schema(self) -> Mapping[str, Any]:
        value = self.wire.get("inputSchema")
        return value if isinstance(value, Mapping) else {"type": "object"}

    @property
    def summary(self) -> str | None:
        """A source-provided one-line summary (Tool Attention's ``summary``), if any."""
        value = self.raw.get("summary")
        return value if isinstance(value, str) else None

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:
        return f"CatalogTool({self.server!r}, {self.name!r})"


@dataclass(frozen=True, eq=False)
class CatalogServer:
    """One server of a catalog: its name, its tools in listed order, and what the source recorded about it."""

    name: str
    tools: tuple[CatalogTool, ...]
    #: the exact ``tools/list`` result JSON bytes the source captured, when it captured them (else None)
    tools_list_raw: bytes | None = None
    #: other recorded facts: ``command``, ``serverInfo``, ``protocolVersion``, ``benchmark``, ``source``
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        """A name safe as a YAML key, a tool-name prefix and a task id part: ``Paper Search`` → ``paper-search``."""
        return slugify(self.name)

    def tool(self, name: str) -> CatalogTool:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(name)

    def tools_list_result(self) -> dict[str, Any]:
        """The ``tools/list`` result as a dict: ``{"tools": [wire, ...]}`` (or the captured result)."""
        if self.tools_list_raw is not None:
            parsed: dict[str, Any] = json.loads(self.tools_list_raw)
            return parsed
        return {"tools": [dict(t.wire) for t in self.tools]}

    def tools_list_bytes(self) -> bytes:
        """The ``tools/list`` result JSON a replay server sends: the captured bytes, else compact JSON of ``wire``."""
        if self.tools_list_raw is not None:
            return self.tools_list_raw
        return compact_json(self.tools_list_result()).encode()

    def footprint(self, counter: _Counter) -> dict[str, Any]:
        """Tools, tokens and bytes of this server's tools as the host renders them into a prompt."""
        per_tool = {}
        for t in self.tools:
            text = render_tool(t)
            per_tool[t.name] = {"tokens": counter.count(text), "bytes": len(text.encode())}
        return {
            "n_tools": len(self.tools),
            "tokens": sum(v["tokens"] for v in per_tool.values()),
            "bytes": sum(v["bytes"] for v in per_tool.values()),
            "tools": per_tool,
        }


@dataclass(frozen=True, eq=False)
class Catalog:
    """Servers of one catalog file (or directory), in file order; ``format`` names the reader that read it."""

    path: Path
    format: str
    servers: tuple[CatalogServer, ...]

    def server(self, name: str) -> CatalogServer:
        """The server called ``name`` (its display name or its slug); a ConfigError lists the known names."""
        for s in self.servers:
            if s.name == name:
                return s
        for s in self.servers:
            if s.slug == slugify(name):
                return s
        known = ", ".join(repr(s.name) for s in self.servers)
        raise ConfigError(f"no server {name!r} in this catalog; it has: {known}", source=self.path, key=name)

    def names(self) -> list[str]:
        return [s.name for s in self.servers]

    def tools(self) -> list[CatalogTool]:
        """Every tool of every server, flattened in catalog order (each keeps ``server``; names may repeat)."""
        return [t for s in self.servers for t in s.tools]

    def subset(self, names: Sequence[str]) -> Catalog:
        """A catalog of just these servers (in the given order); ``qualified_name`` is recomputed for the subset."""
        return build_catalog(self.path, self.format, [self.server(n) for n in names])

    def footprint(self, counter: _Counter) -> dict[str, dict[str, Any]]:
        """``{server: {"n_tools", "tokens", "bytes", "tools"}}`` as the host renders tools (see :func:`render_tool`)."""
        return {s.name: s.footprint(counter) for s in self.servers}


_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(name: str) -> str:
    return _SLUG.sub("-", name.lower()).strip("-") or "server"


def build_catalog(path: Path, fmt: str, servers: Sequence[CatalogServer]) -> Catalog:
    """Check server names are unique and give every tool its catalog-unique ``qualified_name``."""
    seen: dict[str, str] = {}
    for s in servers:
        if s.slug in seen:
            raise ConfigError(
                f"two servers named {seen[s.slug]!r} and {s.name!r} (same slug {s.slug!r}); rename one",
                source=path,
                key=s.name,
            )
        seen[s.slug] = s.name
    owners: dict[str, int] = {}
    for s in servers:
        for name in {t.name for t in s.tools}:
            owners[name] = owners.get(name, 0) + 1
    out: list[CatalogServer] = []
    for s in servers:
        tools = tuple(
            CatalogTool(
                server=t.server,
                name=t.name,
                raw=t.raw,
                wire=t.wire,
                qualified_name=t.name if owners[t.name] == 1 else f"{s.slug}__{t.name}",
                entry=t.entry,
            )
            for t in s.tools
        )
        out.append(CatalogServer(s.name, tools, s.tools_list_raw, s.meta))
    return Catalog(path=path, format=fmt, servers=tuple(out))
