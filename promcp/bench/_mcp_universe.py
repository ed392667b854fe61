"""MCP-Universe → promcp benchmark: benchmark YAMLs (``kind: agent`` / ``kind: benchmark`` documents) + task JSONs.

A benchmark YAML's ``tasks`` are paths like ``mcpuniverse/web_search/info_search_task_0001.json``; they resolve
against the YAML's directory (the ``mcpuniverse/`` prefix dropped), then the YAML's directory + the file name.
A task's prompt is its ``question`` (+ ``output_format`` when given, as MCP-Universe appends it); its servers are
its ``mcp_servers`` names, served as replays of the captured ``tools/list`` catalog. The agent's ``instruction``
becomes the system prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from promcp.bench._common import Conversion, literal_list, read_json, replay_entry
from promcp.catalogs import Catalog, CatalogServer
from promcp.errors import ConfigError


def _documents(path: Path) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=path) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ConfigError(
            f"invalid YAML: {exc.problem}", source=path, line=mark.line + 1 if mark else None
        ) from None
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or "kind" not in d or not isinstance(d.get("spec"), dict):
            raise ConfigError(
                "each YAML document needs 'kind' and a 'spec' mapping", source=path, key=f"document {i + 1}"
            )
    return docs


def _task_path(base: Path, rel: str) -> Path:
    parts = Path(rel).parts
    candidates = [
        base / rel,
        base / Path(*parts[1:]) if len(parts) > 1 else base / rel,
        base / Path(rel).name,
    ]
    for c in candidates:
        if c.is_file():
            return c
    return candidates[1]


def _find(catalogs: Sequence[Catalog], name: str) -> tuple[Catalog, CatalogServer] | None:
    for catalog in catalogs:
        try:
            return catalog, catalog.server(name)
        except ConfigError:
            continue
    return None


def convert(
    yaml_files: Sequence[Path],
    catalogs: Sequence[Catalog],
    *,
    out_dir: Path | None = None,
    limit_per_file: int | None = None,
    replay_args: Sequence[str] = (),
    max_rounds: int | None = None,
) -> Conversion:
    servers: dict[str, dict[str, Any]] = {}
    tasks: list[dict[str, Any]] = []
    notes: list[str] = []
    system_prompts: set[str] = set()
    for path in yaml_files:
        docs = _documents(path)
        agents = {d["spec"].get("name"): d["spec"] for d in docs if d["kind"] == "agent"}
        benches = [(i, d["spec"]) for i, d in enumerate(docs) if d["kind"] == "benchmark"]
        if not benches:
            raise ConfigError("no 'kind: benchmark' document", source=path)
        for i, spec in benches:
            key = f"document {i + 1}.spec.tasks"
            rels = spec.get("tasks")
            if not isinstance(rels, list) or not all(isinstance(r, str) for r in rels):
                raise ConfigError("'tasks' must be a list of task file paths", source=path, key=key)
            agent = agents.get(spec.get("agent"), {})
            instruction = (agent.get("config") or {}).get("instruction")
            if isinstance(instruction, str) and instruction.strip():
                system_prompts.add(instruction.strip())
            for j, rel in enumerate(rels[:limit_per_file] if limit_per_file else rels):
                tpath = _task_path(path.parent, rel)
                if not tpath.is_file():
                    raise ConfigError(f"task file not found: {tpath}", source=path, key=f"{key}[{j}]")
                task = read_json(tpath)
                if (
                    not isinstance(task, dict)
                    or not isinstance(task.get("question"), str)
                    or not task["question"].strip()
                ):
                    raise ConfigError("a task needs a string 'question'", source=tpath, key="question")
                names: list[str] = []
                missing: list[str] = []
                resolved: list[tuple[Catalog, CatalogServer]] = []
                for k, s in enumerate(literal_list(task.get("mcp_servers", []), tpath, "mcp_servers")):
                    name = s.get("name") if isinstance(s, dict) else s
                    if not isinstance(name, str):
                        raise ConfigError("a server needs a 'name'", source=tpath, key=f"mcp_servers[{k}]")
                    found = _find(catalogs, name)
                    if found is None:
                        missing.append(name)
                        continue
                    catalog, server = found
                    resolved.append((catalog, server))
                if missing:  # keep the rest of the suite: a task needing an uncaptured server is skipped
                    notes.append(f"{tpath.name}: skipped, no captured tools/list for {', '.join(missing)}")
                    continue
                for catalog, server in resolved:
                    servers.setdefault(server.slug, replay_entry(catalog, server, out_dir, list(replay_args)))
                    names.append(server.slug)
                if not names:
                    raise ConfigError(
                        "a task needs at least one of 'mcp_servers'", source=tpath, key="mcp_servers"
                    )
                prompt = task["question"].strip()
                if isinstance(task.get("output_format"), str | dict):
                    fmt = task["output_format"]
                    prompt += f"\n\nOutput format: {fmt if isinstance(fmt, str) else str(fmt)}"
                entry: dict[str, Any] = {
                    "id": f"{tpath.parent.name}.{tpath.stem}",
                    "prompt": prompt,
                    "servers": names,
                }
                if isinstance(instruction, str) and instruction.strip():
                    entry["system_prompt"] = instruction.strip()
                if max_rounds is not None:
                    entry["max_rounds"] = max_rounds
                tasks.append(entry)
    if not tasks:
        raise ConfigError("no task found in the benchmark YAML(s)", source=str(yaml_files[0]))
    if len(system_prompts) > 1:
        notes.append("the benchmarks' agents have different instructions: kept per task (system_prompt)")
    return Conversion({"name": "mcp-universe", "servers": servers, "tasks": tasks}, notes)
