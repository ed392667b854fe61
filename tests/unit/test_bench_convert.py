"""promcp bench converters on the shared MCP-Bench / MCP-Universe / routing data, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from promcp import bench
from promcp.catalogs import load_catalog
from promcp.errors import ConfigError
from promcp.host import config

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def _shared(rel: str) -> Path:
    path = DATA / rel
    if not path.exists():
        pytest.skip(f"shared reference data not present: {path}")
    return path


def _write_and_load(conv: bench.Conversion, out: Path) -> config.Benchmark:
    bench.write_benchmark(conv, out, "test")
    return config.load(out)


def test_mcp_bench_paper_subset(tmp_path: Path) -> None:
    tasks = _shared("tasks/mcp-bench/mcpbench_tasks_single_runner_format.json")
    catalog = load_catalog(_shared("catalogs/mcp-bench-servers.json"))
    conv = bench.convert_mcp_bench(
        [tasks], catalog, only_servers=bench.PAPER_MCP_BENCH_SERVERS, out_dir=tmp_path
    )
    b = _write_and_load(conv, tmp_path / "paper.yaml")
    assert len(b.tasks) == 30
    own = {s for t in b.tasks for s in t.servers}
    assert len(own) == 15
    assert sum(len(catalog.server(b.servers[s].replay_server or s).tools) for s in own) == 151
    raw = json.loads(tasks.read_text())
    first = next(g for g in raw["server_tasks"] if g["server_name"] in bench.PAPER_MCP_BENCH_SERVERS)
    t0 = next(t for t in b.tasks if t.id == first["tasks"][0]["task_id"])
    assert t0.prompt == first["tasks"][0]["fuzzy_description"].strip()
    assert len(t0.distraction_servers) == 10  # MCP-Bench's frozen draw for this task
    assert t0.expected_tools and all(e.split(":")[0] in t0.servers for e in t0.expected_tools)
    assert all(s.mode == "replay" and s.command is not None for s in b.servers.values())


def test_mcp_bench_task_prompt_and_no_distraction(tmp_path: Path) -> None:
    tasks = _shared("tasks/mcp-bench/mcpbench_tasks_multi_2server_runner_format.json")
    catalog = load_catalog(_shared("catalogs/mcp-bench-servers.json"))
    conv = bench.convert_mcp_bench([tasks], catalog, prompt="task", distraction=False, per_server=1)
    for t in conv.data["tasks"]:
        assert "distraction_servers" not in t and len(t["servers"]) == 2
    # multi-server dependency analyses name tools as "Server:tool"
    assert any(len({e.split(":")[0] for e in t.get("expected_tools", [])}) == 2 for t in conv.data["tasks"])


def test_expected_tools_only_listed_tools() -> None:
    catalog = load_catalog(_shared("catalogs/mcp-bench-servers.json"))
    wiki = catalog.server("Wikipedia")
    text = "Use Wikipedia:get_article then search_wikipedia; Wikipedia:not_a_tool; get_articles is no tool."
    assert bench.expected_tools(text, [wiki]) == ["wikipedia:get_article", "wikipedia:search_wikipedia"]


def test_mcp_universe(tmp_path: Path) -> None:
    configs = _shared("tasks/mcp-universe/configs")
    catalogs = [
        load_catalog(_shared("catalogs/mcp-universe-servers.json")),
        load_catalog(_shared("catalogs/official-reference-servers.json")),
    ]
    files = [configs / f"{n}.yaml" for n in ("financial_analysis", "location_navigation", "web_search")]
    conv = bench.convert_mcp_universe(files, catalogs, out_dir=tmp_path)
    b = _write_and_load(conv, tmp_path / "u.yaml")
    by_cat: dict[str, int] = {}
    for t in b.tasks:
        by_cat[t.id.split(".")[0]] = by_cat.get(t.id.split(".")[0], 0) + 1
    assert by_cat["financial_analysis"] == 40 and by_cat["web_search"] == 50
    skipped = [n for n in conv.notes if "skipped" in n]  # e.g. playwright: no captured list, skipped, said so
    listed = sum(
        len(d["spec"]["tasks"])
        for f in files
        for d in yaml.safe_load_all(f.read_text())
        if d["kind"] == "benchmark"
    )
    assert len(b.tasks) + len(skipped) == listed
    assert all(t.system_prompt for t in b.tasks)


def test_routing(tmp_path: Path) -> None:
    catalog = load_catalog(_shared("catalogs/tool-rot"))
    conv = bench.convert_routing(catalog, _shared("catalogs/tool-rot/fixtures/benchmark_queries.jsonl"))
    b = _write_and_load(conv, tmp_path / "r.yaml")
    assert len(b.tasks) == 100 and len(b.servers) == 6
    assert sum(1 for t in b.tasks if t.expected_tools) >= 90


def test_malformed_inputs_name_file_and_entry(tmp_path: Path) -> None:
    catalog = load_catalog(_shared("catalogs/mcp-bench-servers.json"))
    bad = tmp_path / "tasks.json"
    bad.write_text(json.dumps({"server_tasks": [{"servers": ["Wikipedia"], "tasks": [{"task_id": "x"}]}]}))
    with pytest.raises(ConfigError) as info:
        bench.convert_mcp_bench([bad], catalog)
    assert info.value.source == str(bad) and info.value.key == "server_tasks[0].tasks[0].task_description"
    bad.write_text(
        json.dumps(
            {"server_tasks": [{"servers": ["Nope"], "tasks": [{"task_id": "x", "task_description": "d"}]}]}
        )
    )
    with pytest.raises(ConfigError, match="'Nope' is not in the catalog") as info:
        bench.convert_mcp_bench([bad], catalog)
    assert info.value.key == "server_tasks[0].servers"
    bad.write_text(json.dumps({"tasks": []}))
    with pytest.raises(ConfigError, match="server_tasks"):
        bench.convert_mcp_bench([bad], catalog)
    q = tmp_path / "q.jsonl"
    q.write_text('{"query": "a"}\n{"nope": 1}\n')
    with pytest.raises(ConfigError) as info:
        bench.convert_routing(catalog, q)
    assert info.value.line == 2 and info.value.source == str(q)
    y = tmp_path / "b.yaml"
    y.write_text("kind: benchmark\nspec:\n  tasks: [missing/task.json]\n")
    with pytest.raises(ConfigError, match="task file not found") as info:
        bench.convert_mcp_universe([y], [catalog])
    assert info.value.key == "document 1.spec.tasks[0]"


def test_cli_convert(tmp_path: Path) -> None:
    from promcp.cli import main

    out = tmp_path / "a.yaml"
    rc = main(["bench", "convert", "tool-attention", str(_shared("catalogs/tool-attention")), "-o", str(out),
               "--replay-arg=--latency-ms=5"])  # fmt: skip
    assert rc == 0
    data = yaml.safe_load(out.read_text())
    assert len(data["tasks"]) == 7
    assert all(s["args"] == ["--latency-ms=5"] for s in data["servers"].values())
    assert not Path(next(iter(data["servers"].values()))["catalog"]).is_absolute()
