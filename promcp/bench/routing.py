"""Routing fixtures → promcp benchmark file: every query is a task offered *all* servers of the catalog.

* tool-rot: ``fixtures/benchmark_tools.json`` (54 tools, ``server_name``) + ``benchmark_queries.jsonl``
  (``{"query", "correct_tool"}``) → ``expected_tools`` = the one server owning ``correct_tool``;
* Tool Attention: ``tools.json`` (120 tools, ``id = <server>__<tool>``) + ``queries.jsonl`` (``{"text"}``; no
  expected tool).

Queries are JSONL: ``query`` or ``text`` is the prompt; ``correct_tool`` / ``expected_tool`` / ``expected_tools``
(``tool``, ``server:tool`` or ``server/tool``) the expected tool(s). A bad line is a ConfigError naming file and line.
These workloads are meant to overflow small context windows: every task carries every schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promcp.bench._doc import BenchmarkDoc
from promcp.catalogs import Catalog, load_catalog
from promcp.errors import ConfigError

QUERY_FILES = ("fixtures/benchmark_queries.jsonl", "benchmark_queries.jsonl", "queries.jsonl")


def find_queries(catalog_path: Path) -> Path:
    base = catalog_path if catalog_path.is_dir() else catalog_path.parent
    for rel in QUERY_FILES:
        for cand in (base / rel, base.parent / rel):
            if cand.is_file():
                return cand
    raise ConfigError(
        f"no queries file beside the catalog (looked for {', '.join(QUERY_FILES)})", source=catalog_path
    )


def _expected(cat: Catalog, spec: str, path: Path, line: int) -> str:
    for sep in (":", "/"):
        if sep in spec:
            server, tool = spec.split(sep, 1)
            s = cat.server(server)
            if tool not in {t.name for t in s.tools}:
                raise ConfigError(f"server {s.name!r} has no tool {tool!r}", source=path, line=line)
            return f"{s.slug}:{tool}"
    owners = [t for t in cat.tools() if t.name == spec]
    if len(owners) != 1:
        what = "no server lists" if not owners else "several servers list"
        raise ConfigError(f"{what} a tool named {spec!r}; write it as server:tool", source=path, line=line)
    return f"{cat.server(owners[0].server).slug}:{spec}"


def convert_routing(
    catalog: str | Path,
    queries: str | Path | None = None,
    *,
    name: str | None = None,
    limit: int | None = None,
) -> BenchmarkDoc:
    cat = load_catalog(catalog)
    qpath = Path(queries) if queries else find_queries(Path(catalog))
    doc = BenchmarkDoc(
        name=name or f"routing-{Path(catalog).stem}",
        description=f"Routing queries of {qpath.name}, every task offered all {len(cat.tools())} tools of {cat.path.name}",
    )
    keys = [doc.add_replay_server(cat, s) for s in cat.servers]
    try:
        lines = qpath.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read queries: {exc}", source=qpath) from exc
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            q = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg}", source=qpath, line=n) from exc
        prompt = q.get("query", q.get("text")) if isinstance(q, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError("a query needs a string 'query' (or 'text')", source=qpath, line=n)
        entry: dict[str, Any] = {"id": f"q{n:04d}", "prompt": prompt.strip(), "servers": keys}
        want = q.get("expected_tools", q.get("expected_tool", q.get("correct_tool")))
        if want is not None:
            specs = want if isinstance(want, list) else [want]
            if not all(isinstance(s, str) for s in specs):
                raise ConfigError("expected tool(s) must be strings", source=qpath, line=n)
            entry["expected_tools"] = [_expected(cat, s, qpath, n) for s in specs]
        doc.tasks.append(entry)
        if limit is not None and len(doc.tasks) >= limit:
            break
    return doc
