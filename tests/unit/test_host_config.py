"""Benchmark file loading: errors name key and line, ${VAR} expansion, path resolution, policy defaults."""

from __future__ import annotations

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
