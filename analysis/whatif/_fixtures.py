"""Tool lists for what-if: through ``promcp.catalogs`` when it is installed, else a minimal private reader.

The private reader is a stop-gap (promcp.catalogs was not in the tree when what-if was written): it understands
only the shapes of the shared reference catalogs — a flat list of tools (tool-rot, paper-tools-flat), Tool
Attention's ``{id, summary, full_schema}`` list, a list of ``{server, tools: [...]}`` and MCP-Bench's
``{"servers": {name: {"tools": {...}}}}`` — and it keeps the server name on each tool under ``server``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promcp.errors import ConfigError

#: The routing queries that come with a catalog directory (tried in this order).
QUERY_FILES = ("benchmark_queries.jsonl", "queries.jsonl", "fixtures/benchmark_queries.jsonl")
_TOOL_FILES = ("benchmark_tools.json", "tools.json", "fixtures/benchmark_tools.json")


def _from_catalogs_package(path: Path) -> list[dict[str, Any]] | None:
    try:
        from promcp import catalogs  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        return None
    load = getattr(catalogs, "load_catalog", None)
    if load is None:
        return None
    catalog = load(path)
    tools: list[dict[str, Any]] = []
    for server in getattr(catalog, "servers", []):
        name = getattr(server, "name", None)
        for raw in getattr(server, "tools", []):
            tools.append({**dict(raw), "server": name} if name else dict(raw))
    return tools


def _tools_of(obj: Any, source: Path) -> list[dict[str, Any]]:
    if isinstance(obj, dict) and isinstance(obj.get("servers"), dict):
        out = []
        for server, entry in obj["servers"].items():
            tools = entry.get("tools", {}) if isinstance(entry, dict) else {}
            items = tools.values() if isinstance(tools, dict) else tools
            out += [{**t, "server": entry.get("name") or server} for t in items if isinstance(t, dict)]
        return out
    if isinstance(obj, dict) and isinstance(obj.get("tools"), list):
        obj = [obj]
    if not isinstance(obj, list):
        raise ConfigError("not a tool catalog (expected a list of tools or servers)", source=str(source))
    out = []
    for i, item in enumerate(obj):
        if not isinstance(item, dict):
            raise ConfigError("expected a JSON object", source=str(source), key=f"[{i}]")
        if isinstance(item.get("tools"), list):
            server = item.get("server") or item.get("name")
            out += [{**t, "server": server} for t in item["tools"] if isinstance(t, dict)]
        elif "full_schema" in item:
            server = str(item.get("id", "")).split("__", 1)[0] or None
            out.append({**item, "server": server})
        elif "name" in item:
            out.append({**item, "server": item.get("server") or item.get("server_name")})
        else:
            raise ConfigError(
                "entry has neither a tool name nor a tools list", source=str(source), key=f"[{i}]"
            )
    return out


def catalog_file(path: Path) -> Path:
    """The tools file of a catalog path (a file, or a directory holding one of the known names)."""
    if path.is_dir():
        for name in _TOOL_FILES:
            if (path / name).is_file():
                return path / name
        raise ConfigError(f"no tools file ({', '.join(_TOOL_FILES)}) in this directory", source=str(path))
    return path


def query_file(path: Path) -> Path | None:
    """The queries file next to a catalog (``None`` when it has none)."""
    folder = path if path.is_dir() else path.parent
    for name in QUERY_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """The tools of a catalog file or directory, each a raw dict with ``server`` when known."""
    path = Path(path)
    via_package = _from_catalogs_package(path)
    if via_package is not None:
        return via_package
    file = catalog_file(path)
    try:
        obj = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read catalog: {exc.strerror}", source=str(file)) from None
    except ValueError as exc:
        raise ConfigError(f"not JSON: {exc}", source=str(file)) from None
    return _tools_of(obj, file)
