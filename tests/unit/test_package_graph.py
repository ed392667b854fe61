"""The package graph keeps the data flow one-directional (read from the source, so a lazy import inside a function
counts too): the stage builders and wire formats depend on nothing that measures or analyses; the two live sources
do not import each other; the instrumentation's modules import each other without a cycle."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {
    "promcp": REPO / "promcp",
    "promcp.collectors": REPO / "collectors",
    "promcp.analysis": REPO / "analysis",
}


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("promcp"):
                    graph[name].add(node.module)
                    graph[name].update(f"{node.module}.{a.name}" for a in node.names)
                elif isinstance(node, ast.Import):
                    graph[name].update(a.name for a in node.names if a.name.startswith("promcp"))
    return graph


def _under(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_stages_and_wire_import_no_source_and_no_analysis() -> None:
    graph = _graph()
    forbidden = (
        "promcp.host",
        "promcp.shims",
        "promcp.collectors",
        "promcp.analysis",
        "promcp.cli",
        "promcp.store",
    )
    back = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if _under(src, "promcp.stages", "promcp.wire")
        for dst in dsts
        if _under(dst, *forbidden) or dst == "promcp.recorder"
    )
    assert back == []
    assert any(_under(d, "promcp.wire") for d in graph["promcp.stages.llm"])  # the graph is really read


def test_live_sources_do_not_import_each_other() -> None:
    graph = _graph()
    crossing = sorted(
        (src, dst)
        for src, dsts in graph.items()
        for dst in dsts
        if (_under(src, "promcp.host") and _under(dst, "promcp.shims"))
        or (_under(src, "promcp.shims") and _under(dst, "promcp.host"))
        or (_under(src, "promcp.collectors") and _under(dst, "promcp.host", "promcp.shims"))
    )
    assert crossing == []


def test_no_import_cycle_in_the_instrumentation() -> None:
    graph = _graph()
    modules = {m for m in graph if m.startswith("promcp.shims.")}
    edges = {m: {d for d in graph[m] if d in modules} for m in modules}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in edges[m]:
            assert state.get(d) != 1, f"import cycle: {' -> '.join([*path, d])}"
            if d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(modules):
        if m not in state:
            visit(m, [m])
    assert (
        "promcp.shims._join" in edges["promcp.shims._mcpevents"]
    )  # the hooks share the join through its module


def test_the_mcp_proxy_start_imports_no_dataframe_library(tmp_path: Path) -> None:
    """A client waits for ``promcp proxy mcp`` to answer ``initialize`` (Codex starts its first turn without a slow
    server): its command-line path and its recorder, up to a ready recording, import neither pyarrow nor pandas
    (the journal is JSONL; Parquet is written when the run is merged, in another process). Checked in a fresh
    interpreter, where nothing else loaded them first."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from promcp.cli import build_parser\n"
        "args = build_parser(('proxy',)).parse_args(['proxy', 'mcp', '--run-id', 't', '--', 'cat'])\n"
        "from promcp.proxy.mcp.stdio import StdioOptions, _Recording\n"
        f"rec = _Recording.prepare(StdioOptions(args.command[1:], out={str(tmp_path)!r}, run_id='t'))\n"
        "assert rec is not None\n"
        "rec.recorder.close(finalize_run=False)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'pandas', 'duckdb', 'rich'))\n"
        "print(' '.join(heavy))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "", f"the MCP proxy's start imported {got.stdout.strip()}"
    assert list(tmp_path.rglob("*.jsonl")), "no journal part written: the recorder did not really start"


def _cycle(graph: dict[str, set[str]], modules: set[str]) -> list[str] | None:
    """An import cycle among ``modules`` (as a path), or None."""
    edges = {m: {d for d in graph[m] if d in modules and d != m} for m in modules}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                return [*path, d]
            if d not in state and (found := visit(d, [*path, d])) is not None:
                return found
        state[m] = 2
        return None

    for m in sorted(modules):
        if m not in state and (found := visit(m, [m])) is not None:
            return found
    return None


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph, set(graph)) == ["a", "b", "c", "a"]
    assert _cycle(graph, {"a", "b", "d"}) is None


def test_no_import_cycle_among_the_commands() -> None:
    graph = _graph()
    commands = {m for m in graph if m.startswith("promcp.cli.")}
    assert "promcp.cli.run" in commands and "promcp.cli.doctor" in commands
    assert _cycle(graph, commands) is None


def test_no_source_imports_the_cli() -> None:
    """Sources measure and hand facts on; printing and options belong to the commands (``promcp.cli``)."""
    graph = _graph()
    sources = (
        "promcp.proxy",
        "promcp.collectors",
        "promcp.host",
        "promcp.shims",
        "promcp.collect",
        "promcp.recorder",
        "promcp.store",
        "promcp.stages",
        "promcp.wire",
    )
    reaching_up = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if _under(src, *sources)
        for dst in dsts
        if _under(dst, "promcp.cli")
    )
    assert reaching_up == []
    assert any(_under(d, "promcp.cli") for d in graph["promcp.cli.proxy"])  # the graph holds cli edges


def _stage_events_built(path: Path) -> list[int]:
    """Lines where ``path`` constructs an :class:`~promcp.events.Event` (``Event(stage=…)``)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        )
        if name == "Event" and any(k.arg == "stage" for k in node.keywords):
            lines.append(node.lineno)
    return lines


def test_stage_events_are_built_only_in_stages() -> None:
    """A source hands facts to a builder of promcp/stages; it never decides an event's columns itself."""
    stages = REPO / "promcp" / "stages"
    built = {
        str(path.relative_to(REPO)): lines
        for folder in FOLDERS.values()
        for path in folder.rglob("*.py")
        if stages not in path.parents and (lines := _stage_events_built(path))
    }
    assert built == {}
    assert _stage_events_built(stages / "llm.py")  # the check really finds constructions
