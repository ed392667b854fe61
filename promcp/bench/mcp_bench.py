"""MCP-Bench → promcp benchmark file.

Input: MCP-Bench task files (``mcpbench_tasks_*_runner_format.json``: ``server_tasks[].{server_name, servers,
combination_type, tasks[].{task_id, task_description, fuzzy_description, dependency_analysis,
distraction_servers}}``) and the servers' tools dump (any :mod:`promcp.catalogs` format; MCP-Bench's own
``mcp_servers_info.json`` dump is ``format="mcp-bench"``).

Output: one replay server per MCP-Bench server used (task servers and their distraction servers), one task per
MCP-Bench task:

* ``prompt`` — ``fuzzy_description`` (what MCP-Bench gives the agent) by default; ``task_description`` with
  ``prompt="detailed"``;
* ``servers`` — the task's servers; ``distraction_servers`` — the task's own frozen list (MCP-Bench samples 10 per
  task once, at generation time); ``distraction="none"`` drops them;
* ``expected_tools`` — the task servers' tools that ``dependency_analysis`` names, as ``Server:tool`` or as the bare
  tool name (whole word), in order of first mention.

Tasks whose own server is not in the catalog are skipped (listed in ``BenchmarkDoc.skipped``); a distraction server
missing from the catalog is dropped from that task and listed too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from promcp.bench._doc import BenchmarkDoc
from promcp.catalogs import Catalog, CatalogServer, load_catalog
from promcp.errors import ConfigError

#: The ProMCP paper's 15 MCP-Bench servers (151 tools in the 2026-01 tools dump).
PAPER_SERVERS = (
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

PROMPTS = {"fuzzy": "fuzzy_description", "detailed": "task_description"}


def expected_tools(analysis: str, servers: Sequence[CatalogServer]) -> list[tuple[CatalogServer, str]]:
    """Tools of ``servers`` named in ``analysis`` (``Server:tool`` or the bare name as a whole word), first-mention order."""
    hits: list[tuple[int, CatalogServer, str]] = []
    for server in servers:
        for tool in server.tools:
            pattern = rf"(?<![\w-])(?:{re.escape(server.name)}:\s*)?{re.escape(tool.name)}(?![\w-])"
            m = re.search(pattern, analysis)
            if m:
                hits.append((m.start(), server, tool.name))
    hits.sort(key=lambda h: h[0])
    return [(s, t) for _, s, t in hits]


def _load_tasks(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read MCP-Bench task file: {exc.strerror or exc}", source=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 (byte {exc.start})", source=path) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", source=path, line=exc.lineno) from exc
    groups = data.get("server_tasks") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        raise ConfigError("not an MCP-Bench task file: expected {'server_tasks': [...]}", source=path)
    return groups


def _text(task: dict[str, Any], key: str, where: str, path: Path) -> str:
    value = task.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"missing or empty {key!r}", source=path, key=f"{where}.{key}")
    return value.strip()


def convert_mcp_bench(
    task_files: Sequence[str | Path],
    catalog: Catalog | str | Path,
    *,
    prompt: str = "fuzzy",
    distraction: str = "frozen",
    servers: Sequence[str] | None = None,
    single_only: bool = False,
    tasks_per_server: int | None = None,
    name: str = "mcp-bench",
) -> BenchmarkDoc:
    """Convert MCP-Bench tasks (see the module docstring). ``servers`` keeps only tasks whose servers are all in it."""
    if prompt not in PROMPTS:
        raise ConfigError(f"unknown prompt kind {prompt!r}; known: {', '.join(PROMPTS)}", key="--prompt")
    if distraction not in ("frozen", "none"):
        raise ConfigError(
            f"unknown distraction mode {distraction!r}; known: frozen, none", key="--distraction"
        )
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    keep = set(servers) if servers is not None else None
    if keep is not None:
        for s in keep:
            cat.server(s)  # unknown names are a ConfigError listing the catalog's servers
    doc = BenchmarkDoc(
        name=name,
        description=f"MCP-Bench tasks ({prompt} prompts, distraction servers: {distraction}) on replay servers "
        f"from {cat.path.name}",
    )
    seen_ids: set[str] = set()
    for file in map(Path, task_files):
        for gi, group in enumerate(_load_tasks(file)):
            gwhere = f"server_tasks[{gi}]"
            if not isinstance(group, dict):
                raise ConfigError("an entry must be a JSON object", source=file, key=gwhere)
            names = group.get("servers", [group.get("server_name")])
            if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
                raise ConfigError(
                    "'servers' must be a non-empty list of server names", source=file, key=f"{gwhere}.servers"
                )
            if single_only and len(names) != 1:
                continue
            if keep is not None and not set(names) <= keep:
                continue
            tasks = group.get("tasks")
            if not isinstance(tasks, list):
                raise ConfigError("'tasks' must be a list", source=file, key=f"{gwhere}.tasks")
            missing = [n for n in names if n not in cat.names()]
            if missing:
                for t in tasks:
                    tid = t.get("task_id", "?") if isinstance(t, dict) else "?"
                    doc.skipped.append((str(tid), f"server(s) not in the catalog: {', '.join(missing)}"))
                continue
            task_servers = [cat.server(n) for n in names]
            for ti, task in enumerate(tasks[:tasks_per_server] if tasks_per_server else tasks):
                where = f"{gwhere}.tasks[{ti}]"
                if not isinstance(task, dict):
                    raise ConfigError("a task must be a JSON object", source=file, key=where)
                tid = task.get("task_id")
                if not isinstance(tid, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]+", tid):
                    raise ConfigError(
                        "'task_id' must be a string of [A-Za-z0-9_.:-]", source=file, key=f"{where}.task_id"
                    )
                if tid in seen_ids:
                    doc.skipped.append((tid, f"duplicate task id ({file.name} {where})"))
                    continue
                seen_ids.add(tid)
                text = _text(task, PROMPTS[prompt], where, file)
                analysis = task.get("dependency_analysis") or ""
                if not isinstance(analysis, str):
                    raise ConfigError(
                        "'dependency_analysis' must be a string",
                        source=file,
                        key=f"{where}.dependency_analysis",
                    )
                keys = [doc.add_replay_server(cat, s) for s in task_servers]
                entry: dict[str, Any] = {"id": tid, "prompt": text, "servers": keys}
                if distraction == "frozen":
                    extra = task.get("distraction_servers") or []
                    if not isinstance(extra, list) or not all(isinstance(x, str) for x in extra):
                        raise ConfigError(
                            "'distraction_servers' must be a list of server names",
                            source=file,
                            key=f"{where}.distraction_servers",
                        )
                    dkeys = []
                    for d in extra:
                        if d in names:
                            continue
                        if d not in cat.names():
                            doc.skipped.append(
                                (tid, f"distraction server {d!r} not in the catalog (dropped)")
                            )
                            continue
                        dkeys.append(doc.add_replay_server(cat, cat.server(d)))
                    if dkeys:
                        entry["distraction_servers"] = dkeys
                found = expected_tools(analysis, task_servers)
                if found:
                    entry["expected_tools"] = [f"{s.slug}:{t}" for s, t in found]
                doc.tasks.append(entry)
    return doc
