"""Codex's configuration (promcp/proxy/codex.py): the provider and upstream ``record`` finds, the ``-c`` overrides it
puts in front of the user's arguments, and ``promcp proxy config --client codex`` writing TOML — nothing run."""

from __future__ import annotations

import argparse
import itertools
import tomllib
from pathlib import Path

import pytest

from promcp.cli.proxy import run_config
from promcp.errors import ConfigError
from promcp.proxy.codex import codex_setup, toml_value
from promcp.proxy.record import RecordOptions, plan_launch
from promcp.recorder import Recorder

CONFIG = """# my Codex config
model = "gpt-5"
model_provider = "corp"
mcp_optional_startup_grace_ms = 800

[model_providers.corp]
name = "Corp gateway"
base_url = "https://llm.corp.example/v1"
wire_api = "responses"
env_key = "CORP_KEY"

[mcp_servers.files]   # a stdio server
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/src"]
env = { "LOG" = "1" }
env_vars = ["GITHUB_TOKEN"]
required = true
startup_timeout_sec = 30

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "REMOTE_TOKEN"

[mcp_servers.off]
command = "never"
enabled = false
"""


def _home(tmp_path: Path, text: str = CONFIG) -> dict[str, str]:
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)
    return {"CODEX_HOME": str(home), "HOME": str(tmp_path), "PATH": "/usr/bin"}


def _overrides(argv: list[str]) -> dict[str, object]:
    """The ``-c key=value`` flags of an argv, values parsed as Codex parses them."""
    out: dict[str, object] = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "-c":
            key, _, raw = value.partition("=")
            out[key] = tomllib.loads(f"v = {raw}")["v"]
    return out


def test_custom_provider_and_every_server_redirected_by_overrides(tmp_path: Path) -> None:
    env = _home(tmp_path)
    before = (tmp_path / "codex-home" / "config.toml").read_bytes()
    setup = codex_setup(["codex", "exec", "hi"], env)
    assert (setup.provider, setup.upstream) == ("corp", "https://llm.corp.example/v1")
    rec = Recorder(tmp_path / "traces", topology="c-ots", source="proxy:llm")
    ports = iter([41001])

    class _Http:
        port = next(ports)

    launch = plan_launch(
        RecordOptions(["codex", "exec", "hi"], rec, environ={**env, "PYTHONPATH": "/src/promcp"}),
        {"openai": "http://127.0.0.1:40000/v1"},
        tmp_path / "unused.json",
        start_http=lambda name, url: _Http(),  # type: ignore[arg-type,return-value]
    )
    rec.close()
    assert launch.argv[0] == "codex" and launch.argv[-2:] == ["exec", "hi"]
    flags = _overrides(launch.argv)
    assert flags["model_providers.corp.base_url"] == "http://127.0.0.1:40000/v1"
    args = flags["mcp_servers.files.args"]
    assert isinstance(args, list) and args[args.index("--") + 1 :] == [
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/src",
    ]
    assert args[:2] == ["proxy", "mcp"] and "--run-id" in args and rec.run_id in args
    assert str(flags["mcp_servers.files.command"]).endswith("promcp")
    assert flags["mcp_servers.files.env_vars"] == ["GITHUB_TOKEN", "PYTHONPATH"]
    assert flags["mcp_servers.remote.url"] == "http://127.0.0.1:41001/mcp"
    assert flags["mcp_optional_startup_grace_ms"] == 800 + 1000
    assert not any(k.startswith("mcp_servers.off") for k in flags)
    # required, timeouts, env, headers: not touched (they stay as the user set them)
    assert not any(
        k.endswith(("required", "startup_timeout_sec", ".env", "bearer_token_env_var")) for k in flags
    )
    assert launch.wrapped == ["files", "remote"] and launch.unwrapped == ["off (disabled in the config)"]
    assert (tmp_path / "codex-home" / "config.toml").read_bytes() == before


def test_builtin_provider_user_overrides_and_profiles(tmp_path: Path) -> None:
    env = _home(tmp_path, 'model = "gpt-5"\n[profiles.fast]\nmodel_provider = "ollama"\n')
    setup = codex_setup(["codex", "exec", "hi"], env)
    assert (setup.provider, setup.upstream, setup.base_url_key) == (
        "openai",
        "https://api.openai.com/v1",
        "openai_base_url",
    )
    assert setup.llm_overrides("http://127.0.0.1:1/v1") == ["-c", 'openai_base_url="http://127.0.0.1:1/v1"']
    # a base URL the user gives on the command line is where the proxy forwards, and is not passed on
    mine = codex_setup(["codex", "-c", 'openai_base_url="http://gw.local/v1"', "exec", "hi"], env)
    assert mine.upstream == "http://gw.local/v1" and mine.rest == ["exec", "hi"]
    assert codex_setup(["codex", "-p", "fast", "exec"], env).upstream == "http://localhost:11434/v1"
    with pytest.raises(ConfigError, match="model provider 'nowhere' has no base_url"):
        codex_setup(["codex", "-c", "model_provider=nowhere", "exec"], env)
    (tmp_path / "codex-home" / "config.toml").write_text("model = [unclosed\n")
    with pytest.raises(ConfigError, match=r"config.toml:1: not TOML"):
        codex_setup(["codex"], env)


def test_toml_values_read_back() -> None:
    value = {"a b": ["x", 'q"uote', "\\back"], "n": 3, "t": True}
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


def _config_args(path: Path, **kw: object) -> argparse.Namespace:
    base = {"client": "codex", "file": path, "out": Path("traces"), "port": 8750, "tokenizer": None}
    return argparse.Namespace(**{**base, "write": False, "undo": False, "mcp_config": False, **kw})


def test_proxy_config_codex_writes_toml_keeping_comments_and_undoes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    assert run_config(_config_args(path)) == 0  # dry run: the wrapped config on stdout, file untouched
    printed = capsys.readouterr().out
    assert path.read_text() == CONFIG and "# my Codex config" in printed
    assert run_config(_config_args(path, write=True)) == 0
    written = path.read_text()
    assert "# my Codex config" in written and "# a stdio server" in written
    doc = tomllib.loads(written)
    files = doc["mcp_servers"]["files"]
    assert files["args"][:2] == ["proxy", "mcp"]
    assert files["args"][files["args"].index("--") + 1 :] == [
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/src",
    ]
    assert files["env_vars"] == ["GITHUB_TOKEN", "PROMCP_OUT", "PROMCP_RUN_ID"]
    assert files["required"] is True and files["startup_timeout_sec"] == 30 and files["env"] == {"LOG": "1"}
    assert doc["mcp_servers"]["remote"]["url"] == "http://127.0.0.1:8750/mcp"
    assert doc["model_providers"]["corp"]["base_url"] == "https://llm.corp.example/v1"
    with pytest.raises(ConfigError, match="backup"):  # wrapping twice needs --undo first
        run_config(_config_args(path, write=True))
    assert run_config(_config_args(path, undo=True)) == 0
    assert path.read_text() == CONFIG
    path.write_text("[mcp_servers.x\n")
    with pytest.raises(ConfigError, match="not TOML"):
        run_config(_config_args(path))
