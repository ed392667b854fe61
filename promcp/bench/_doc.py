"""The benchmark document a converter builds, and how it is written as a ``promcp run`` YAML file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from promcp.catalogs import Catalog, CatalogServer


@dataclass
class BenchmarkDoc:
    """A converted benchmark: plain data in the shape of the benchmark file (docs/run.md), plus what was skipped."""

    name: str
    description: str
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    llm: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    #: ``(task or server, reason)`` for every input entry that was not converted
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: where the replay servers' catalog lives (written relative to the output file when possible)
    catalogs: dict[str, Path] = field(default_factory=dict)

    def add_replay_server(self, catalog: Catalog, server: CatalogServer, **extra: Any) -> str:
        """Register ``server`` as a replay server (key = its slug) and return that key."""
        key = server.slug
        self.catalogs[key] = catalog.path
        self.servers[key] = {
            "mode": "replay",
            "catalog": str(catalog.path),
            "replay_server": server.name,
            **extra,
        }
        return key

    def as_dict(self, out: Path | None = None) -> dict[str, Any]:
        servers = {}
        for key, spec in self.servers.items():
            spec = dict(spec)
            if out is not None and key in self.catalogs:
                spec["catalog"] = _relative(self.catalogs[key], out.parent)
            servers[key] = spec
        doc: dict[str, Any] = {"name": self.name, "description": self.description}
        for key, value in (("llm", self.llm), ("sampling", self.sampling), ("policy", self.policy)):
            if value:
                doc[key] = value
        doc["servers"] = servers
        doc["tasks"] = self.tasks
        return doc

    def dump(self, out: Path | None = None, header: str = "") -> str:
        body = yaml.safe_dump(self.as_dict(out), sort_keys=False, allow_unicode=True, width=120)
        lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
        return "\n".join(lines) + ("\n" if lines else "") + body

    def write(self, out: Path, header: str = "") -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(self.dump(out, header), encoding="utf-8")
        os.replace(tmp, out)


def _relative(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when both are on one drive (the host resolves it against the file's dir)."""
    try:
        return os.path.relpath(path.resolve(), base.resolve())
    except ValueError:
        return str(path.resolve())


def catalog_map(catalogs: Mapping[str, Catalog]) -> dict[str, tuple[Catalog, CatalogServer]]:
    """Server name (display name and slug) → (catalog, server), the first catalog listing it winning."""
    found: dict[str, tuple[Catalog, CatalogServer]] = {}
    for cat in catalogs.values():
        for s in cat.servers:
            found.setdefault(s.name, (cat, s))
            found.setdefault(s.slug, (cat, s))
    return found
