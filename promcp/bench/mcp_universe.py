"""MCP-Universe → promcp benchmark file.

Input: MCP-Universe benchmark YAMLs (multi-document: ``kind: llm`` / ``agent`` / ``benchmark``; the benchmark's
``spec.tasks`` lists task JSON paths like ``mcpuniverse/web_search/info_search_task_0001.json``), the task JSONs
(``{question, mcp_servers: [{name}], output_format?, evaluators, ...}``) and captured ``tools/list`` catalogs (e.g.
``mcp-universe-servers.json`` plus ``official-reference-servers.json`` for google-maps).

Task JSON paths resolve against the YAML's directory: ``mcpuniverse/<domain>/<file>`` → ``<yaml dir>/<domain>/<file>``
(the repository layout), else the path as written relative to the YAML. The agent's ``instruction`` becomes the
task's ``system_prompt``; ``output_format`` is appended to the question the way MCP-Universe's agents receive it.
Tasks needing a server that no catalog captured (playwright, github, notion, blender …) are skipped and listed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from promcp.bench._doc import BenchmarkDoc, catalog_map
from promcp.catalogs import Catalog, load_catalog
from promcp.errors import ConfigError


def _docs(path: Path) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=path) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ConfigError(
            f"invalid YAML: {exc.problem}", source=path, line=mark.line + 1 if mark else None
        ) from exc
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or "kind" not in d or not isinstance(d.get("spec"), dict):
            raise ConfigError(
                "each YAML document needs 'kind' and a 'spec' mapping", source=path, key=f"document[{i}]"
            )
    return docs


def _task_path(yaml_path: Path, ref: str) -> Path:
    parts = Path(ref).parts
    if len(parts) >= 2 and parts[0] == "mcpuniverse":
        candidate = yaml_path.parent / Path(*parts[1:])
        if candidate.exists():
            return candidate
    return yaml_path.parent / ref


def _question(task: dict[str, Any], path: Path) -> str:
    q = task.get("question")
    if not isinstance(q, str) or not q.strip():
        raise ConfigError("missing or empty 'question'", source=path, key="question")
    fmt = task.get("output_format")
    if fmt is not None:
        q = f"{q.strip()}\n\nOutput format:\n{json.dumps(fmt, ensure_ascii=False, indent=2)}"
    return q.strip()


def convert_mcp_universe(
    benchmark_files: Sequence[str | Path],
    catalogs: Sequence[Catalog | str | Path],
    *,
    name: str = "mcp-universe",
    include_instruction: bool = True,
) -> BenchmarkDoc:
    cats = {}
    for c in catalogs:
        cat = c if isinstance(c, Catalog) else load_catalog(c)
        cats[str(cat.path)] = cat
    known = catalog_map(cats)
    doc = BenchmarkDoc(name=name, description="MCP-Universe tasks on replay servers from captured tools/list")
    seen: set[str] = set()
    for yml in map(Path, benchmark_files):
        docs = _docs(yml)
        agents = {d["spec"].get("name"): d["spec"] for d in docs if d["kind"] == "agent"}
        benches = [(i, d["spec"]) for i, d in enumerate(docs) if d["kind"] == "benchmark"]
        if not benches:
            raise ConfigError("no 'kind: benchmark' document", source=yml)
        for i, spec in benches:
            refs = spec.get("tasks")
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                raise ConfigError(
                    "'spec.tasks' must be a list of task file paths",
                    source=yml,
                    key=f"document[{i}].spec.tasks",
                )
            agent = agents.get(spec.get("agent"), {})
            instruction = (agent.get("config") or {}).get("instruction") if isinstance(agent, dict) else None
            for j, ref in enumerate(refs):
                path = _task_path(yml, ref)
                tid = f"{yml.stem}.{Path(ref).stem}"
                try:
                    task = json.loads(path.read_text(encoding="utf-8"))
                except OSError as exc:
                    raise ConfigError(
                        f"task file {ref!r} not found ({exc.strerror or exc}: {path})",
                        source=yml,
                        key=f"document[{i}].spec.tasks[{j}]",
                    ) from exc
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"invalid JSON: {exc.msg}", source=path, line=exc.lineno) from exc
                if not isinstance(task, dict):
                    raise ConfigError("a task must be a JSON object", source=path)
                servers = task.get("mcp_servers")
                if not isinstance(servers, list) or not servers:
                    raise ConfigError(
                        "'mcp_servers' must be a non-empty list of {name}", source=path, key="mcp_servers"
                    )
                names = []
                for k, s in enumerate(servers):
                    n = s.get("name") if isinstance(s, dict) else None
                    if not isinstance(n, str) or not n:
                        raise ConfigError(
                            "a server entry needs a string 'name'", source=path, key=f"mcp_servers[{k}].name"
                        )
                    names.append(n)
                missing = [n for n in names if n not in known]
                if missing:
                    doc.skipped.append((tid, f"no captured tools/list for: {', '.join(missing)}"))
                    continue
                if tid in seen:
                    doc.skipped.append((tid, "duplicate task id"))
                    continue
                seen.add(tid)
                keys = [doc.add_replay_server(*known[n]) for n in names]
                entry: dict[str, Any] = {"id": tid, "prompt": _question(task, path), "servers": keys}
                if include_instruction and isinstance(instruction, str) and instruction.strip():
                    entry["system_prompt"] = instruction.strip()
                doc.tasks.append(entry)
    return doc
