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


def _modules(folders: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name (as installed: ``collectors/x.py`` is ``promcp.collectors.x``) → its file."""
    found: dict[str, Path] = {}
    for package, folder in folders.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            found[".".join((package, *parts)).removesuffix(".__init__")] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks: imports for the type checker, never executed."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _graph(folders: dict[str, Path] | None = None, *, runtime: bool = False) -> dict[str, set[str]]:
    """Module → the modules it imports, read from the source: top-level and function-level imports alike
    (``runtime``: leaving out ``if TYPE_CHECKING:`` imports, which never run).

    An edge goes to the module the statement executes: ``import a.b`` and ``from a.b import f`` → ``a.b``;
    ``from a import b`` → ``a.b`` when ``b`` is a module, else ``a`` (its ``__init__``, which must have run to
    the line defining ``b``); relative imports are resolved against the importing module's package. The parent
    packages Python initialises first are not edges: a package's ``__init__`` has always started before any of
    its members runs, so ``pkg.m`` importing ``pkg.n`` is no cycle with ``pkg``'s ``__init__`` — unless ``pkg.n``
    (or ``m``) imports a name the ``__init__`` defines, which is the ``from a import b`` edge above."""
    modules = _modules(FOLDERS if folders is None else folders)

    def known(name: str) -> str | None:  # the nearest module a dotted name lies in
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_only(tree) if runtime else set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name]  # every module is a node, importing something or not
        for node in ast.walk(tree):
            targets: list[str | None] = []
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names if a.name.startswith("promcp")]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                if not source.startswith("promcp"):
                    continue
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else known(source)
                    for a in node.names
                ]
            graph[name].update(t for t in targets if t is not None and t != name)
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
    server): its recorder process, up to a ready recording, imports neither pyarrow nor pandas (the journal is
    JSONL; Parquet is written when the run is merged). Checked in a fresh interpreter, where nothing else loaded
    them first."""
    import os
    import subprocess
    import sys

    header = {
        "out": str(tmp_path), "run_id": "t", "chosen_by": "flag", "name": "cat", "command": "cat",
        "tokenizer": None, "timeout_s": None, "content": None, "max_content_bytes": -1,
        "max_frame": 1 << 20, "proxy_pid": 1,
    }  # fmt: skip
    code = (
        "import sys\n"
        "from promcp.proxy.mcp.stdio_recorder import _Session\n"
        f'rec = _Session({header!r}, "1-abcdef")\n'
        "rec.close()\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'pandas', 'duckdb', 'rich'))\n"
        "print(' '.join(heavy))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "", f"the MCP proxy's recorder imported {got.stdout.strip()}"
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
    """Sources measure and hand facts on; printing and options belong to the commands (``promcp.cli``): no module
    outside the CLI imports it (the program's entry point ``promcp.__main__`` aside)."""
    graph = _graph()
    reaching_up = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if not _under(src, "promcp.cli", "promcp.__main__")
        for dst in dsts
        if _under(dst, "promcp.cli")
    )
    assert reaching_up == []
    assert any(_under(d, "promcp.cli") for d in graph["promcp.cli.proxy"])  # the graph holds cli edges


def test_every_command_module_is_registered() -> None:
    """Strict command registration: every module of ``promcp/cli`` that defines a command (``add_parser``) is
    listed in ``COMMAND_MODULES`` — a new command is never silently left out of ``promcp --help`` — and every
    listed one exists (``build_parser`` imports each without a guard; tests/unit/test_cli.py runs their --help).
    ``proxy_<name>.py`` modules are ``promcp proxy``'s subcommands, which ``cli/proxy.py`` registers from the
    folder itself."""
    from promcp.cli import COMMAND_MODULES

    defining = sorted(
        path.stem
        for path in (REPO / "promcp" / "cli").glob("*.py")
        if not path.stem.startswith(("_", "proxy_"))
        and any(
            isinstance(node, ast.FunctionDef) and node.name == "add_parser"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
    )
    assert defining == sorted(COMMAND_MODULES)
    assert len(defining) >= 15


def test_the_graph_reads_relative_function_level_and_submodule_imports(tmp_path: Path) -> None:
    """The graph the rules below check is the one Python executes: a lazy import inside a function, a relative
    import and ``from package import module`` each give the edge they run, an ``if TYPE_CHECKING:`` import only
    when asked for (the layering rules count it, the cycle check does not)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from promcp.a import f\n"
    )
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text(
        "from .. import a\nfrom ..b import x\nimport promcp.sub\nfrom promcp import f\n"
    )
    graph = _graph({"promcp": pkg})
    assert graph["promcp"] == {"promcp.a"}
    assert graph["promcp.a"] == {"promcp.b"}
    assert graph["promcp.b"] == {"promcp.a"}
    assert graph["promcp.sub.c"] == {"promcp.a", "promcp.b", "promcp.sub", "promcp"}
    runtime = _graph({"promcp": pkg}, runtime=True)
    assert runtime["promcp.b"] == set()
    assert _cycle(graph, set(graph)) == ["promcp", "promcp.a", "promcp.b", "promcp.a"]
    assert _cycle(runtime, set(runtime)) is None


def test_no_import_cycle_anywhere() -> None:
    """No module imports one that (directly or not) imports it back — function-level imports included, so a
    lazy import cannot hide a cycle: every module can be imported first, alone, in a fresh interpreter."""
    graph = _graph(runtime=True)
    assert len(graph) > 150 and "promcp.store.parts" in graph["promcp.sinks"]  # the whole tree is read
    cycle = _cycle(graph, set(graph))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_store_applies_no_stage_rule() -> None:
    """The store keeps events; what a stage is (and the S2→S3 join of a run's parts) is decided in promcp/stages,
    and the caller that merges parts passes that join in (``link=``)."""
    graph = _graph()
    store_to_stages = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if _under(src, "promcp.store")
        for dst in dsts
        if _under(dst, "promcp.stages")
    )
    assert store_to_stages == []
    assert "promcp.stages.link" in graph["promcp.proxy.record"]  # a caller passes the join


def _stage_events_built(path: Path) -> list[int]:
    """Lines where ``path`` constructs a :class:`promcp.events.Event` — a call of whatever name the module bound
    to it (``from promcp.events import Event [as E]``, ``from promcp import events`` → ``events.Event``, ``import
    promcp.events`` → ``promcp.events.Event``) — or changes an event's stage or phase (``.replace(stage=…)``).
    (``threading.Event()`` and other ``Event`` classes are not it; decoding a stored event with
    ``msgspec.convert(row, Event)`` builds nothing new and is not a call of ``Event``.)"""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()  # local names of the class
    modules: set[str] = set()  # local names of the promcp.events module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "promcp.events":
            names.update(a.asname or a.name for a in node.names if a.name == "Event")
        elif isinstance(node, ast.ImportFrom) and node.module == "promcp":
            modules.update(a.asname or a.name for a in node.names if a.name == "events")
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name == "promcp.events")
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        builds = isinstance(func, ast.Name) and func.id in names
        builds |= (
            isinstance(func, ast.Attribute) and func.attr == "Event" and ast.unparse(func.value) in modules
        )
        builds |= (
            isinstance(func, ast.Attribute)
            and func.attr == "replace"
            and any(k.arg in ("stage", "phase") for k in node.keywords)
        )
        if builds:
            lines.append(node.lineno)
    return lines


def test_stage_events_are_built_only_in_stages() -> None:
    """A source hands facts to a builder of promcp/stages; it never decides an event's columns itself."""
    stages = REPO / "promcp" / "stages"
    built = {
        str(path.relative_to(REPO)): lines
        for folder in FOLDERS.values()
        for path in folder.rglob("*.py")
        if stages not in path.parents
        and path != REPO / "promcp" / "events.py"
        and (lines := _stage_events_built(path))
    }
    assert built == {}
    assert _stage_events_built(stages / "llm.py")  # the check really finds constructions


def test_the_check_finds_a_stage_event_built_outside_stages(tmp_path: Path) -> None:
    source = tmp_path / "source.py"
    source.write_text(
        "import threading\nfrom promcp import events as ev\nfrom promcp.events import Event as E, Stage\n"
        "threading.Event()\n"  # line 4: another Event class
        "E(stage=Stage.S3)\n"  # line 5
        "ev.Event(**{})\n"  # line 6: no stage keyword, still a construction
        "old.replace(stage=Stage.S4)\n"  # line 7
        "old.replace(seq=3)\n"  # line 8: numbering is not deciding a stage
    )
    assert _stage_events_built(source) == [5, 6, 7]


#: Modules a fresh interpreter imports for ``promcp proxy mcp -- SERVER`` up to the server's spawn and the relay's
#: start: the console script's fast path into ``promcp.proxy.mcp.stdio`` (standard library only). 97 measured on
#: 2026-11-27 (``python -X importtime``, Python 3.11, this test's code; a bare interpreter of the same venv: 64;
#: the full command line's path was 125), budget with room for a few small modules. A client waits for this on
#: every server it starts.
MCP_PROXY_ENTRY_MODULES = 105
#: What that entry point must not load: the recording path's heavy libraries (Parquet, dataframes, tokenizers).
HEAVY = ("pyarrow", "pandas", "numpy", "duckdb", "tiktoken", "rich")
#: the promcp modules of the relay (the recorder, the observer, the stage builders load in the recorder process)
RELAY_MODULES = {
    "promcp", "promcp._version", "promcp.cli", "promcp.proxy", "promcp.proxy._group", "promcp.proxy.mcp",
    "promcp.proxy.mcp.env_refs", "promcp.proxy.mcp.frame_journal", "promcp.proxy.mcp.frames",
    "promcp.proxy.mcp.stdio",
}  # fmt: skip


def test_the_mcp_proxy_entry_point_stays_within_its_import_budget(tmp_path: Path) -> None:
    """``python -X importtime`` of the ``promcp proxy mcp`` console script's path, run for real (it relays a
    server that exits at once): how many modules the relay imports (one ``import time:`` line each), that they
    are the relay's (no argparse, no command module, no ``typing``), and none of the heavy ones. Counted, not
    timed: a module count does not depend on the machine's load."""
    import os
    import subprocess
    import sys
    import time

    out = tmp_path / "ds"
    argv = ["promcp", "proxy", "mcp", "--out", str(out), "--run-id", "t", "--name", "t", "--", "true"]
    code = f"import sys\nsys.argv = {argv!r}\nfrom promcp.cli import main\nmain()\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert got.returncode == 0, got.stderr[-2000:]  # `true`'s exit code: the relay ran it
    imported = [
        line.rsplit("|", 1)[1].strip() for line in got.stderr.splitlines() if line.startswith("import time:")
    ][1:]  # the first line is the header
    run = out / "topology=c-ots" / "run_id=t" / "events.parquet"
    deadline = time.monotonic() + 60  # the detached recorder records the session: let it finish
    while not (run.exists() and not (out / "_journal" / "t.parts").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.exists(), "the session was not recorded"
    ours = {m for m in imported if m.split(".")[0] == "promcp"}
    assert ours == RELAY_MODULES, f"the relay imports {sorted(ours ^ RELAY_MODULES)} (un)expectedly"
    assert not {"argparse", "typing", "dataclasses", "inspect"} & set(imported)
    heavy = sorted({m for m in imported if m.split(".")[0] in HEAVY})
    assert heavy == [], f"the MCP proxy's entry point imports {heavy}"
    assert len(imported) <= MCP_PROXY_ENTRY_MODULES, (
        f"the MCP proxy's entry point imports {len(imported)} modules (budget {MCP_PROXY_ENTRY_MODULES})"
    )
