"""Benchmark file loading: errors name key and line, ${VAR} expansion, path resolution, policy defaults."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from promcp.errors import ConfigError
from promcp.host import config

REPO = Path(__file__).resolve().parents[2]

BASE = """\
name: t
servers:
  calc:
    command: python
    args: [-m, promcp.servers.scicalc]
tasks:
  - id: a
    prompt: "2+2?"
    servers: [calc]
    expected_tools: ["calc:calculate"]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bench.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_are_the_evaluation_card(tmp_path: Path) -> None:
    b = config.load(write(tmp_path, BASE))
    p = b.policy
    assert (p.max_rounds, p.retries, p.backoff_s, p.timeout_s) == (10, 3, (1.0, 2.0), 1500.0)
    assert (p.discovery_timeout_s, p.startup_timeout_s, p.tool_execution, p.streaming) == (
        10,
        30,
        "sequential",
        False,
    )
    assert b.servers["calc"].command is not None and b.servers["calc"].command.command == sys.executable
    assert b.llm.backend == "llama-cpp" and b.tasks[0].expected_tools == ("calc:calculate",)


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        (BASE.replace("    prompt:", "    promt:"), "tasks[0].promt", 8),
        (BASE.replace("servers: [calc]", "servers: [nope]"), "tasks[0].servers[0]", 9),
        (BASE.replace('"calc:calculate"', '"other:calculate"'), "tasks[0].expected_tools[0]", 10),
        (BASE + "policy: {max_rounds: 0}\n", "policy.max_rounds", 11),
        (BASE.replace("command: python", "command: ./missing/server"), "servers.calc.command", 4),
        (BASE + "  - {id: a, prompt: x, servers: [calc]}\n", "tasks[1].id", 11),
    ],
)
def test_errors_name_key_and_line(tmp_path: Path, text: str, key: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path, text))
    assert info.value.key == key
    assert info.value.line == line
    assert "bench.yaml" in str(info.value)


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path, BASE + "  - {id: b\n"))
    assert info.value.line is not None and info.value.line >= 11


def test_var_expansion_and_builtins(tmp_path: Path) -> None:
    text = BASE.replace('prompt: "2+2?"', 'prompt: "${GREETING} ${MISSING:-fallback} ${WORKSPACE}"')
    b = config.load(write(tmp_path, text), workspace=tmp_path / "ws", env={"GREETING": "hi"})
    assert b.tasks[0].prompt == f"hi fallback {(tmp_path / 'ws').resolve()}"
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path, text), env={})
    assert "GREETING" in str(info.value) and info.value.key == "tasks[0].prompt" and info.value.line == 8


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "srv"
    exe.write_text("#!/bin/sh\n")
    text = BASE.replace("command: python", "command: ./bin/srv\n    cwd: sub")
    b = config.load(write(tmp_path, text))
    cmd = b.servers["calc"].command
    assert (
        cmd is not None and cmd.command == str(exe.resolve()) and cmd.cwd == str((tmp_path / "sub").resolve())
    )


def test_http_server_port_auto_and_start(tmp_path: Path) -> None:
    text = BASE.replace(
        "  calc:\n    command: python\n    args: [-m, promcp.servers.scicalc]\n",
        "  calc:\n    transport: sse\n    port: auto\n    url: http://127.0.0.1:${PORT}/sse\n"
        "    start: {command: python, args: [-m, promcp.servers.scicalc, --port, '${PORT}']}\n",
    )
    s = config.load(write(tmp_path, text)).servers["calc"]
    assert s.port and s.url == f"http://127.0.0.1:{s.port}/sse"
    assert s.start is not None and s.start.args[-1] == str(s.port)


def test_select_tasks(tmp_path: Path) -> None:
    b = config.load(write(tmp_path, BASE + "  - {id: b, prompt: x, servers: [calc]}\n"))
    assert [t.id for t in b.select(["b"])] == ["b"]
    assert [t.id for t in b.select(None, 1)] == ["a"]
    with pytest.raises(ConfigError):
        b.select(["zzz"])


def test_default_benchmark_file_is_valid() -> None:
    b = config.load(REPO / "benchmark.yaml", workspace=REPO / "traces" / "ws-test")
    assert len(b.tasks) >= 12
    assert {"filesystem", "memory", "everything", "everything-http", "time", "git"} <= set(b.servers)
    assert b.servers["everything-http"].transport == "streamable_http"
    assert any(len(t.servers) > 1 for t in b.tasks)


def _cli(args: list[str], limit_mb: int = 2048) -> subprocess.CompletedProcess[str]:
    """``promcp`` in a subprocess whose address space is capped: a file that expands without bound fails here."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    return subprocess.run(
        [sys.executable, "-m", "promcp.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
    )


def test_an_alias_bomb_is_refused_at_its_line(tmp_path: Path) -> None:
    """Nine levels of nine aliases (9**9 nodes if expanded) under a key promcp does not even know."""
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        levels.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    bomb = write(tmp_path, "\n".join(["unknown:", *("  " + x for x in levels)]) + "\n" + BASE)
    assert bomb.stat().st_size < 1100
    proc = _cli(["run", str(bomb), "--dry-run"])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(r"bench\.yaml:\d+: aliases expand to more than 10,000 nodes", proc.stderr), proc.stderr
    with pytest.raises(ConfigError, match="alias") as info:
        config.load(bomb)
    assert info.value.line is not None and 2 <= info.value.line <= 11


def test_aliases_within_the_budget_still_work(tmp_path: Path) -> None:
    text = BASE.replace(
        "    args: [-m, promcp.servers.scicalc]", "    args: &args [-m, promcp.servers.scicalc]"
    )
    text += "  - {id: b, prompt: x, servers: [calc]}\n"
    assert config.load(write(tmp_path, text)).servers["calc"].command is not None


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deep_nesting_is_refused_at_its_line(tmp_path: Path, depth: int) -> None:
    text = BASE + "description: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(ConfigError, match="nested more than 64 levels") as info:
        config.load(write(tmp_path, text))
    assert info.value.line == 11


@pytest.mark.parametrize(
    ("workspace", "key"),
    [
        (
            '  git_repos:\n    repo:\n      "../../../../outside.txt": "x"\n',
            "workspace.git_repos.repo.../../../../outside.txt",
        ),
        ('  git_repos:\n    "../repo": {"a.txt": "x"}\n', "workspace.git_repos.../repo"),
        (
            '  git_repos:\n    repo: {".git/hooks/pre-commit": "x"}\n',
            "workspace.git_repos.repo..git/hooks/pre-commit",
        ),
        ('  files:\n    "/etc/passwd-copy": "x"\n', "workspace.files./etc/passwd-copy"),
        ('  files:\n    "a/../../b": "x"\n', "workspace.files.a/../../b"),
    ],
)
def test_workspace_paths_must_stay_inside(tmp_path: Path, workspace: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path, BASE + "workspace:\n" + workspace))
    assert info.value.key == key and info.value.line is not None and info.value.line >= 12


@pytest.mark.parametrize("section", ["files", "git_repos"])
def test_a_symlink_out_of_the_workspace_is_refused_when_writing(tmp_path: Path, section: str) -> None:
    from promcp.host.workspace import prepare_workspace

    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link").symlink_to(outside)
    entry = '    "link/x.txt": "x"\n' if section == "files" else '    link: {"x.txt": "x"}\n'
    bench = config.load(write(tmp_path, BASE + f"workspace:\n  {section}:\n" + entry), workspace=ws)
    with pytest.raises(ConfigError, match="leads outside the workspace") as info:
        prepare_workspace(bench, ws)
    assert info.value.line == 13 and "bench.yaml" in str(info.value)
    assert list(outside.iterdir()) == [], "nothing was written outside"


def test_every_schema_problem_is_listed_with_its_key_path(tmp_path: Path) -> None:
    text = BASE + "policy:\n  max_rounds: x\n  retries: -1\nsampling:\n  temperature: hot\n"
    proc = _cli(["run", str(write(tmp_path, text)), "--dry-run"])
    assert proc.returncode == 2
    lines = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert [re.search(r"\[(.*?)\]", x).group(1) for x in lines] == [  # type: ignore[union-attr]
        "policy.max_rounds",
        "policy.retries",
        "sampling.temperature",
    ]
    assert [re.search(r"bench\.yaml:(\d+) ", x).group(1) for x in lines] == ["12", "13", "15"]  # type: ignore[union-attr]
