"""Routing fixtures → promcp benchmark: every catalog server as a replay, one task per query.

tool-rot: ``benchmark_tools.json`` + ``benchmark_queries.jsonl`` (``query``, ``correct_tool``); Tool Attention:
``tools.json`` + ``queries.jsonl`` (``text``). Each query becomes a task offered every server of the catalog; a
``correct_tool`` / ``expected_tool(s)`` naming a listed tool becomes the task's expected tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promcp.bench._common import Conversion, read_jsonl, replay_entry
from promcp.catalogs import Catalog
from promcp.errors import ConfigError


def convert(
    catalog: Catalog,
    queries: Path,
    *,
    out_dir: Path | None = None,
    limit: int | None = None,
    replay_args: tuple[str, ...] = (),
    max_rounds: int | None = None,
) -> Conversion:
    servers = {s.slug: replay_entry(catalog, s, out_dir, list(replay_args)) for s in catalog.servers}
    owner: dict[str, list[str]] = {}
    for s in catalog.servers:
        for t in s.tools:
            owner.setdefault(t.name, []).append(s.slug)
    tasks: list[dict[str, Any]] = []
    notes: list[str] = []
    for n, q in read_jsonl(queries):
        text = q.get("query", q.get("text"))
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("a query needs a string 'query' (or 'text')", source=queries, line=n)
        wanted = q.get("expected_tools", q.get("expected_tool", q.get("correct_tool")))
        wanted = [wanted] if isinstance(wanted, str) else list(wanted or [])
        expected = []
        for w in wanted:
            name = str(w).split("/")[-1]
            if name not in owner:
                notes.append(f"{queries.name}:{n}: expected tool {w!r} is not in the catalog; dropped")
                continue
            expected += [f"{slug}:{name}" for slug in owner[name]]
        entry: dict[str, Any] = {"id": f"q{n:04d}", "prompt": text.strip(), "servers": list(servers)}
        if expected:
            entry["expected_tools"] = expected
        if max_rounds is not None:
            entry["max_rounds"] = max_rounds
        tasks.append(entry)
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise ConfigError("no queries", source=queries)
    return Conversion({"name": f"routing-{catalog.path.stem}", "servers": servers, "tasks": tasks}, notes)
