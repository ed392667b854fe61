"""One reader per catalog format; :func:`read` detects the format and dispatches.

Every problem is a :class:`~promcp.errors.ConfigError` naming the file and the entry (``key``) in the source's own
terms, e.g. ``servers["Wikipedia"].tools["search"].input_schema`` or ``[12].inputSchema``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from promcp.catalogs._model import WIRE_FIELDS, Catalog, CatalogServer, CatalogTool, build_catalog, slugify
from promcp.errors import ConfigError

FORMATS = ("mcp-bench", "server-list", "flat", "tool-attention", "tools-list")

#: files a catalog *directory* may hold (first match wins): tool-rot's fixture, Tool Attention's catalog
DIRECTORY_FILES = ("fixtures/benchmark_tools.json", "benchmark_tools.json", "tools.json")


def _q(name: object) -> str:
    return json.dumps(name, ensure_ascii=False)


class _Source:
    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, message: str, key: str | None = None) -> ConfigError:
        return ConfigError(message, source=self.path, key=key or None)

    def tool(
        self, server: str, raw: Any, entry: str, *, name_hint: str | None = None, wire: Any = None
    ) -> CatalogTool:
        """Check one tool and build its wire dict (``wire`` given: that dict; else the MCP fields of ``raw``)."""
        if not isinstance(raw, dict):
            raise self.error(f"a tool must be a JSON object, got {type(raw).__name__}", entry)
        src = raw if wire is None else wire
        if not isinstance(src, dict):
            raise self.error(f"the tool definition must be a JSON object, got {type(src).__name__}", entry)
        name = src.get("name", name_hint)
        if not isinstance(name, str) or not name:
            raise self.error("a tool needs a non-empty string 'name'", f"{entry}.name")
        if name_hint is not None and name != name_hint:
            raise self.error(
                f"the tool is listed as {name_hint!r} but names itself {name!r}", f"{entry}.name"
            )
        desc = src.get("description", "")
        if desc is not None and not isinstance(desc, str):
            raise self.error("'description' must be a string", f"{entry}.description")
        schema_key = (
            "inputSchema" if "inputSchema" in src else "input_schema" if "input_schema" in src else None
        )
        # MCP requires an input schema; a catalog that left it out (a summary-only listing) gets the empty one
        schema = {"type": "object"} if schema_key is None else src[schema_key]
        if not isinstance(schema, dict):
            raise self.error("the input schema must be a JSON object", f"{entry}.{schema_key}")
        if schema.get("type", "object") != "object":
            raise self.error(
                f"the input schema's type must be 'object', got {schema.get('type')!r}",
                f"{entry}.{schema_key}",
            )
        out: dict[str, Any] = {"name": name}
        for key in WIRE_FIELDS[1:]:
            if key == "inputSchema":
                out["inputSchema"] = schema
            elif key in src:
                out[key] = src[key]
        if "description" not in src:
            out.pop("description", None)
        return CatalogTool(server=server, name=name, raw=raw, wire=out, entry=entry)

    def server(
        self,
        name: str,
        tools: list[CatalogTool],
        entry: str,
        meta: Mapping[str, Any],
        raw_list: bytes | None = None,
    ) -> CatalogServer:
        seen: dict[str, str] = {}
        for t in tools:
            if t.name in seen:
                raise self.error(
                    f"server {name!r} lists tool {t.name!r} twice ({seen[t.name]} and {t.entry})", t.entry
                )
            seen[t.name] = t.entry
        return CatalogServer(name=name, tools=tuple(tools), tools_list_raw=raw_list, meta=dict(meta))


# -- formats -------------------------------------------------------------------------------------------------------


def _mcp_bench(src: _Source, data: Any) -> list[CatalogServer]:
    """MCP-Bench's tools dump: ``{"servers": {display: {"name", "command", "tools": {tool: {...}}}}}``."""
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise src.error("expected {'servers': {name: {...}}}", "servers")
    out = []
    for display, entry in servers.items():
        e = f"servers[{_q(display)}]"
        if not isinstance(entry, dict):
            raise src.error("a server entry must be a JSON object", e)
        tools = entry.get("tools")
        if isinstance(tools, dict):
            items = [(f"{e}.tools[{_q(k)}]", k, v) for k, v in tools.items()]
        elif isinstance(tools, list):
            items = [(f"{e}.tools[{i}]", None, v) for i, v in enumerate(tools)]
        else:
            raise src.error("a server needs 'tools' (an object or a list)", f"{e}.tools")
        # the entry's own "name" (MCP-Bench: always the display key, which its tasks use) names the server
        name = entry["name"] if isinstance(entry.get("name"), str) and entry["name"] else display
        listed = [src.tool(name, v, k, name_hint=hint) for k, hint, v in items]
        meta = {k: v for k, v in entry.items() if k not in ("tools",)}
        out.append(src.server(name, listed, e, meta))
    return out


def _server_list(src: _Source, data: Any) -> list[CatalogServer]:
    """A list of ``{server, command?, serverInfo?, protocolVersion?, tools: [MCP Tool]}`` (captured tools/list)."""
    out = []
    for i, entry in enumerate(data):
        e = f"[{i}]"
        if not isinstance(entry, dict):
            raise src.error("a server entry must be a JSON object", e)
        name = entry.get("server", entry.get("name"))
        if not isinstance(name, str) or not name:
            raise src.error("a server entry needs a string 'server'", f"{e}.server")
        if not isinstance(entry.get("tools"), list):
            raise src.error("a server entry needs a 'tools' list", f"{e}.tools")
        listed = [src.tool(name, t, f"{e}.tools[{j}]") for j, t in enumerate(entry["tools"])]
        meta = {k: v for k, v in entry.items() if k not in ("tools", "server")}
        out.append(src.server(name, listed, e, meta))
    return out


def _flat(src: _Source, data: Any) -> list[CatalogServer]:
    """A flat list of tools each naming its server: ``server`` (paper-tools-flat) or ``server_name`` (tool-rot)."""
    grouped: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for i, raw in enumerate(data):
        e = f"[{i}]"
        if not isinstance(raw, dict):
            raise src.error("a tool must be a JSON object", e)
        server = raw.get("server", raw.get("server_name"))
        if not isinstance(server, str) or not server:
            raise src.error(
                "a tool of a flat catalog needs a string 'server' (or 'server_name')", f"{e}.server"
            )
        grouped.setdefault((str(raw.get("benchmark") or ""), server), []).append((e, raw))
    # two benchmarks may ship a server of the same name (MCP-Bench "Wikipedia", MCP-Universe "wikipedia"):
    # those are told apart as "<benchmark>:<server>", the rest keep their own name
    slugs = Counter(slugify(server) for _, server in grouped)
    out = []
    for (bench, server), items in grouped.items():
        name = f"{bench}:{server}" if bench and slugs[slugify(server)] > 1 else server
        meta = {"benchmark": bench, "server": server} if bench else {}
        out.append(src.server(name, [src.tool(name, raw, e) for e, raw in items], name, meta))
    return out


def _tool_attention(src: _Source, data: Any) -> list[CatalogServer]:
    """Tool Attention's catalog: ``[{id: "<server>__<tool>", summary, full_schema: {name, ...}}]``."""
    grouped: dict[str, list[CatalogTool]] = {}
    for i, raw in enumerate(data):
        e = f"[{i}]"
        if not isinstance(raw, dict):
            raise src.error("an entry must be a JSON object", e)
        ident = raw.get("id")
        if not isinstance(ident, str) or "__" not in ident:
            raise src.error("'id' must be a string '<server>__<tool>'", f"{e}.id")
        server = ident.split("__", 1)[0]
        tool = src.tool(server, raw, f"{e}.full_schema", wire=raw.get("full_schema"))
        grouped.setdefault(server, []).append(tool)
    return [src.server(name, tools, name, {}) for name, tools in grouped.items()]


def _tools_list(src: _Source, data: Any, text: bytes) -> list[CatalogServer]:
    """One captured ``tools/list``: a result ``{"tools": [...]}`` or a JSON-RPC response carrying one.

    The server is named after the file (``wikipedia.tools.json`` → ``wikipedia``). A bare one-line result keeps the
    file's exact bytes as the server's ``tools_list_raw`` (a replay server sends them unchanged).
    """
    # exact bytes only when they can travel as one JSON-RPC line (a pretty-printed file is re-serialized compactly)
    raw_list: bytes | None = text.strip() if b"\n" not in text.strip() else None
    result = data
    if isinstance(data, dict) and "jsonrpc" in data:
        result = data.get("result")
        raw_list = None  # the result's bytes are inside the envelope; re-serialized on demand
        if not isinstance(result, dict):
            raise src.error("a JSON-RPC response without a 'result' object", "result")
    assert isinstance(result, dict)
    if not isinstance(result.get("tools"), list):
        raise src.error("a tools/list result needs a 'tools' list", "tools")
    name = src.path.name.split(".")[0] or "server"
    listed = [src.tool(name, t, f"tools[{i}]") for i, t in enumerate(result["tools"])]
    if isinstance(result.get("nextCursor"), str):
        raise src.error("a paged tools/list (nextCursor set): capture every page into one list", "nextCursor")
    return [src.server(name, listed, name, {}, raw_list)]


def detect(data: Any) -> str:
    """The format of parsed JSON ``data`` (one of :data:`FORMATS`), or ValueError."""
    if isinstance(data, dict):
        if isinstance(data.get("servers"), dict):
            return "mcp-bench"
        if isinstance(data.get("tools"), list) or (
            "jsonrpc" in data and isinstance(data.get("result"), dict) and "tools" in data["result"]
        ):
            return "tools-list"
        raise ValueError("a JSON object without 'servers' (MCP-Bench dump) or 'tools' (tools/list result)")
    if isinstance(data, list):
        first = next((x for x in data if isinstance(x, dict)), None)
        if first is None:
            raise ValueError("an empty list, or a list without JSON objects")
        if isinstance(first.get("tools"), list):
            return "server-list"
        if "full_schema" in first:
            return "tool-attention"
        if "server" in first or "server_name" in first:
            return "flat"
        raise ValueError(
            "a list whose entries are neither servers (with 'tools') nor tools naming a 'server'"
        )
    raise ValueError(f"a JSON {type(data).__name__}, not a catalog")


_READERS: dict[str, Callable[[_Source, Any], list[CatalogServer]]] = {
    "mcp-bench": _mcp_bench,
    "server-list": _server_list,
    "flat": _flat,
    "tool-attention": _tool_attention,
}


def resolve_file(path: Path) -> Path:
    """A catalog file, or the catalog file inside a catalog directory (tool-rot, tool-attention layouts)."""
    if path.is_dir():
        for name in DIRECTORY_FILES:
            if (path / name).is_file():
                return path / name
        raise ConfigError(
            f"no catalog file in this directory (looked for {', '.join(DIRECTORY_FILES)})", source=path
        )
    return path


def read(path: str | Path, fmt: str = "auto") -> Catalog:
    """Read ``path`` (a file or a catalog directory) as format ``fmt`` (``auto``: detect)."""
    given = Path(path)
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(f"unknown catalog format {fmt!r}; known: auto, {', '.join(FORMATS)}", key="format")
    file = resolve_file(given)
    try:
        text = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read catalog: {exc.strerror or exc}", source=file) from exc
    try:
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 JSON (byte {exc.start})", source=file) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", source=file, line=exc.lineno) from exc
    src = _Source(file)
    if fmt == "auto":
        try:
            fmt = detect(data)
        except ValueError as exc:
            raise src.error(f"not a known tool catalog: {exc}") from None
    if fmt == "tools-list":
        servers = _tools_list(src, data, text)
    else:
        want = dict if fmt == "mcp-bench" else list
        if not isinstance(data, want):
            raise src.error(f"a {fmt} catalog is a JSON {'object' if want is dict else 'array'}")
        servers = _READERS[fmt](src, data)
    if not servers:
        raise src.error("the catalog lists no servers")
    return build_catalog(file, fmt, servers)
