"""MCP-Bench → promcp benchmark: tasks of ``mcpbench_tasks_*_runner_format.json`` on replay servers.

Each task keeps its id; its prompt is ``fuzzy_description`` (MCP-Bench's default; ``prompt="task"`` uses the
precise ``task_description``); its servers are the task's ``servers`` and its frozen ``distraction_servers`` (the
exact list MCP-Bench drew for the task, unless ``distraction=False``); its expected tools are the
``Server:tool`` mentions in ``dependency_analysis`` that name a tool the catalog lists for one of the task's
servers. Every server is a replay of the catalog (MCP-Bench's tools dump).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from promcp.bench._common import Conversion, literal_list, read_json, replay_entry
from promcp.catalogs import Catalog, CatalogServer, slugify
from promcp.errors import ConfigError


def expected_tools(analysis: str, servers: Sequence[CatalogServer]) -> list[str]:
    """``slug:tool`` for each tool of ``servers`` that ``analysis`` mentions, in first-mention order.

    A mention is ``Server Name:tool`` (multi-server tasks) or the bare tool name as a word (single-server tasks
    write ``search_wikipedia → get_article``); only tools the catalog lists for the task's servers count.
    """
    first: dict[str, int] = {}
    for server in servers:
        for t in server.tools:
            spec = f"{server.slug}:{t.name}"
            qualified = re.search(
                re.escape(server.name) + r"\s*:\s*" + re.escape(t.name) + r"(?![\w-])", analysis
            )
            bare = re.search(r"(?<![\w-])" + re.escape(t.name) + r"(?![\w-])", analysis)
            hits = [m.start() for m in (qualified, bare) if m is not None]
            if hits:
                first[spec] = min(hits)
    return sorted(first, key=first.__getitem__)


def convert(
    task_files: Sequence[Path],
    catalog: Catalog,
    *,
    out_dir: Path | None = None,
    only_servers: Sequence[str] | None = None,
    per_server: int | None = None,
    prompt: str = "fuzzy",
    distraction: bool = True,
    replay_args: Sequence[str] = (),
    max_rounds: int | None = None,
) -> Conversion:
    if prompt not in ("fuzzy", "task"):
        raise ConfigError(f"prompt must be 'fuzzy' or 'task', got {prompt!r}", key="--prompt")
    wanted = {slugify(s) for s in only_servers} if only_servers else None
    servers: dict[str, dict[str, Any]] = {}
    tasks: list[dict[str, Any]] = []
    notes: list[str] = []

    def server_key(name: str, path: Path, key: str) -> tuple[str, CatalogServer]:
        try:
            server = catalog.server(name)
        except ConfigError:
            raise ConfigError(
                f"server {name!r} is not in the catalog {catalog.path}", source=path, key=key
            ) from None
        if server.slug not in servers:
            servers[server.slug] = replay_entry(catalog, server, out_dir, list(replay_args))
        return server.slug, server

    for path in task_files:
        data = read_json(path)
        groups = data.get("server_tasks") if isinstance(data, dict) else None
        if not isinstance(groups, list):
            raise ConfigError("expected {'server_tasks': [...]} (MCP-Bench runner format)", source=path)
        for i, group in enumerate(groups):
            gkey = f"server_tasks[{i}]"
            if not isinstance(group, dict) or not isinstance(group.get("tasks"), list):
                raise ConfigError("a server_tasks entry needs a 'tasks' list", source=path, key=gkey)
            names = group.get("servers") or [group.get("server_name")]
            names = literal_list(names, path, f"{gkey}.servers")
            if not names or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(
                    "'servers' must name at least one server", source=path, key=f"{gkey}.servers"
                )
            if wanted is not None and not all(slugify(n) in wanted for n in names):
                continue
            chosen = group["tasks"] if per_server is None else group["tasks"][:per_server]
            for j, task in enumerate(chosen):
                tkey = f"{gkey}.tasks[{j}]"
                if not isinstance(task, dict):
                    raise ConfigError("a task must be a JSON object", source=path, key=tkey)
                for needed in ("task_id", "task_description"):
                    if not isinstance(task.get(needed), str) or not task[needed].strip():
                        raise ConfigError(
                            f"a task needs a string {needed!r}", source=path, key=f"{tkey}.{needed}"
                        )
                text = task.get("fuzzy_description") if prompt == "fuzzy" else task["task_description"]
                if not isinstance(text, str) or not text.strip():
                    notes.append(f"{path.name} {tkey}: no fuzzy_description; used task_description")
                    text = task["task_description"]
                own = [server_key(n, path, f"{gkey}.servers") for n in names]
                entry: dict[str, Any] = {
                    "id": re.sub(r"[^A-Za-z0-9_.:-]+", "_", task["task_id"]),
                    "prompt": text.strip(),
                    "servers": [slug for slug, _ in own],
                }
                if distraction:
                    extra = literal_list(
                        task.get("distraction_servers", []), path, f"{tkey}.distraction_servers"
                    )
                    slugs = [server_key(str(n), path, f"{tkey}.distraction_servers")[0] for n in extra]
                    if slugs:
                        entry["distraction_servers"] = [s for s in slugs if s not in entry["servers"]]
                analysis = task.get("dependency_analysis")
                exp = expected_tools(analysis, [s for _, s in own]) if isinstance(analysis, str) else []
                if exp:
                    entry["expected_tools"] = exp
                if max_rounds is not None:
                    entry["max_rounds"] = max_rounds
                tasks.append(entry)
    if not tasks:
        raise ConfigError("no task selected (check --servers / the task files)", source=str(task_files[0]))
    ids = [t["id"] for t in tasks]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"task id(s) listed twice across the inputs: {', '.join(dup)}")
    return Conversion({"name": "mcp-bench", "servers": servers, "tasks": tasks}, notes)
