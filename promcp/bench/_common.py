"""What every converter shares: reading inputs with located errors, replay server entries, writing the YAML."""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from promcp.catalogs import Catalog, CatalogServer
from promcp.errors import ConfigError


@dataclass
class Conversion:
    """A converted benchmark: the YAML mapping ``promcp run`` reads, plus what the converter skipped and why."""

    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def n_tasks(self) -> int:
        return len(self.data.get("tasks", []))

    @property
    def n_servers(self) -> int:
        return len(self.data.get("servers", {}))


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 (byte {exc.start})", source=path) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", source=path, line=exc.lineno) from None


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", source=path) from None
    out = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg}", source=path, line=n) from None
        if not isinstance(obj, dict):
            raise ConfigError("each line must be a JSON object", source=path, line=n)
        out.append((n, obj))
    return out


def literal_list(value: Any, path: Path, key: str) -> list[Any]:
    """A list given as JSON, or as the Python ``repr`` some benchmark files store (``"['a', 'b']"``)."""
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        try:
            parsed = ast.literal_eval(value) if value.strip() else []
        except (ValueError, SyntaxError):
            parsed = None
        if isinstance(parsed, list):
            return parsed
    raise ConfigError(f"expected a list, got {str(value)[:60]!r}", source=path, key=key)


def portable_path(target: Path, out_dir: Path | None) -> str:
    """``target`` relative to the benchmark file's directory when it can be (else absolute)."""
    target = target.resolve()
    if out_dir is None:
        return str(target)
    try:
        return os.path.relpath(target, out_dir.resolve())
    except ValueError:
        return str(target)


def replay_entry(
    catalog: Catalog, server: CatalogServer, out_dir: Path | None, args: list[str]
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "mode": "replay",
        "catalog": portable_path(catalog.path, out_dir),
        "catalog_server": server.name,
    }
    if args:
        entry["args"] = list(args)
    return entry


def write_benchmark(conversion: Conversion, out: Path, header: str) -> None:
    """Write the benchmark YAML (keys in a readable order, a provenance comment on top)."""
    text = yaml.safe_dump(conversion.data, sort_keys=False, allow_unicode=True, width=120)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(comment + text, encoding="utf-8")
