"""The references ``promcp record`` writes instead of the servers' secrets (promcp/proxy/mcp/env_refs.py): each
literal piece of an ``env`` / ``headers`` value moves to a ``PROMCP_MCP_ENV_<n>`` variable, the user's own
references stay in place, and expanding the result the way the client does gives back the user's value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from promcp.proxy.mcp.env_refs import PREFIX, EnvRefs, without_refs
from promcp.proxy.record import RecordOptions, plan_launch
from promcp.recorder import Recorder


def _expand_once(text: str, env: dict[str, str], syntax: re.Pattern[str]) -> str:
    """One pass of the client's expansion (names only; a default is used when the name is unset)."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        body = token[2:-1] if token.startswith("${") else token[1:]
        name, _, default = body.partition(":-")
        return env.get(name, default if ":-" in body else token)

    return syntax.sub(one, text)


@pytest.mark.parametrize("client", ["claude-code", "gemini"])
@pytest.mark.parametrize(
    "value",
    [
        "ghp_plain0123456789",
        "a$b$$c$",  # literal dollars
        "Bearer ${TOKEN}",
        "pre${TOKEN}mid${MISSING:-dflt}post",
        "${TOKEN}",
        "",
        "x}{y",
    ],
)
def test_references_expand_back_to_the_value(client: str, value: str) -> None:
    refs = EnvRefs(client)
    written = refs.ref(value)
    user_env = {"TOKEN": "tok$en"}
    syntax = refs.syntax
    assert _expand_once(written, {**user_env, **refs.values}, syntax) == _expand_once(value, user_env, syntax)
    # no literal text is left in what is written, only references
    assert syntax.sub("", written) == ""
    assert all(name.startswith(PREFIX) for name in refs.values)


def test_gemini_keeps_its_bare_dollar_references() -> None:
    refs = EnvRefs("gemini")
    assert refs.ref("key-$API_KEY") == "${PROMCP_MCP_ENV_1}$API_KEY"
    assert refs.values == {"PROMCP_MCP_ENV_1": "key-"}
    claude = EnvRefs("claude-code")  # Claude Code does not expand $NAME: it is literal text there
    assert claude.ref("key-$API_KEY") == "${PROMCP_MCP_ENV_1}"


def test_servers_env_and_headers_are_referenced_other_keys_kept() -> None:
    refs = EnvRefs("claude-code")
    servers = {
        "a": {"command": "node", "args": ["x"], "env": {"T": "s3cret", "N": 3}},
        "b": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer s3cret2"}},
        "c": "not an entry",
    }
    out = refs.servers(servers)
    assert out["a"]["env"] == {"T": "${PROMCP_MCP_ENV_1}", "N": 3} and out["a"]["args"] == ["x"]
    assert out["b"]["headers"] == {"Authorization": "${PROMCP_MCP_ENV_2}"} and out["c"] == "not an entry"
    assert refs.values == {"PROMCP_MCP_ENV_1": "s3cret", "PROMCP_MCP_ENV_2": "Bearer s3cret2"}
    assert servers["a"]["env"]["T"] == "s3cret"  # the input is not changed
    assert without_refs({"PATH": "/bin", "PROMCP_MCP_ENV_1": "s3cret"}) == {"PATH": "/bin"}


def test_record_plan_writes_references_and_passes_values_in_the_environment(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    secret = "xoxb-planted-secret-123"
    servers = {"s": {"command": "python", "env": {"TOKEN": secret, "MIX": "${HOME}/" + secret}}}
    (home / ".claude.json").write_text(json.dumps({"mcpServers": servers}))
    with Recorder(tmp_path / "traces", run_id="r", part="llm") as rec:
        opts = RecordOptions(["claude", "-p", "hi"], rec, environ={"HOME": str(home)}, cwd=work)
        launch = plan_launch(opts, {"anthropic": "http://127.0.0.1:5555"}, tmp_path / "mcp.json")
    text = (tmp_path / "mcp.json").read_text()
    assert secret not in text and secret not in " ".join(launch.argv)
    env = json.loads(text)["mcpServers"]["s"]["env"]
    assert env == {"TOKEN": "${PROMCP_MCP_ENV_1}", "MIX": "${HOME}${PROMCP_MCP_ENV_2}"}
    assert launch.env["PROMCP_MCP_ENV_1"] == secret and launch.env["PROMCP_MCP_ENV_2"] == "/" + secret
