"""OpenAI's Codex CLI (npm ``@openai/codex``): where its configuration is, which LLM API it talks to, and the
``-c key=value`` overrides that put promcp between it and that API and its MCP servers (docs/record.md "Codex").

Codex reads ``$CODEX_HOME/config.toml`` (default ``~/.codex/config.toml``), then the profile layer
``$CODEX_HOME/<name>.config.toml`` of ``-p NAME``, then its ``-c key=value`` flags (a dotted key, a TOML value).
``promcp record -- codex …`` adds ``-c`` flags in front of the user's arguments and edits no file:

* the LLM API: ``openai_base_url`` for the built-in ``openai`` provider (Codex ignores ``OPENAI_BASE_URL``), else
  ``model_providers.<provider>.base_url`` for the provider in use (``model_provider``) — the proxy's URL, which
  forwards to the provider's own ``base_url``;
* each enabled ``[mcp_servers.NAME]``: a stdio server's ``command`` / ``args`` become ``promcp proxy mcp --out …
  --run-id … -- COMMAND ARGS…``, an HTTP server's ``url`` the loopback URL of an HTTP MCP proxy started by
  ``record``. Every other key (``env``, ``env_vars``, ``cwd``, ``required``, ``startup_timeout_sec``,
  ``tool_timeout_sec``, ``enabled_tools``, headers and bearer-token variables) stays as the user set it. The run's
  identity goes in the proxy's arguments: Codex starts servers with a fixed environment (HOME, PATH, LANG…), so
  ``PROMCP_OUT`` / ``PROMCP_RUN_ID`` would not reach them; servers already wrapped by ``promcp proxy config``
  get them through ``env_vars``.

Why overrides and not a private copy of ``CODEX_HOME``: the copy would have to carry ``auth.json`` (a credential
written to a second place on disk), Codex's session files and history would land in the copy instead of the user's
own folder, and anything Codex writes back (trusted projects, logins) would be lost with it. ``-c`` changes only
this one process.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promcp.errors import ConfigError
from promcp.proxy._group import ENV_OUT, ENV_RUN_ID
from promcp.proxy._toml import load_toml

if TYPE_CHECKING:
    from promcp.proxy.mcp.clients import Wrapped

__all__ = [
    "BUILTIN_BASE_URLS",
    "CodexSetup",
    "codex_home",
    "codex_setup",
    "is_codex",
    "load_toml",
    "toml_value",
]

_NAMES = frozenset({"codex"})
#: the providers Codex has built in, and the base URL each uses when the config does not say
BUILTIN_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
}
#: the built-in provider's base URL when Codex is signed in with ChatGPT (no API key)
CHATGPT_BASE_URL = "https://chatgpt.com/backend-api/codex"
#: the variables that carry a run's identity to a wrapped server (``env_vars`` passes them through)
IDENTITY_VARS = (ENV_OUT, ENV_RUN_ID)
_KEY_OK = re.compile(r"^[A-Za-z0-9_-]+$")
#: how long Codex waits for MCP servers that are not ``required`` before its first turn, when the config does not
#: say (``mcp_optional_startup_grace_ms``); measured with 0.169.0 and a server that answers ``initialize`` after a
#: delay: 0.5 s made the first turn, 0.7 s did not (docs/record.md "Codex")
CODEX_STARTUP_GRACE_MS = 500
#: what a wrapped stdio server may take longer to answer ``initialize`` (a Python interpreter's start, then
#: promcp's own imports): the grace ``record`` adds, so the first turn sees the tools it would have seen
#: (tests/perf/bench_mcp_startup.py, docs/proxy.md)
PROXY_STARTUP_ALLOWANCE_MS = 1000


def is_codex(command: Sequence[str]) -> bool:
    return bool(command) and Path(command[0]).name in _NAMES


def codex_home(env: Mapping[str, str]) -> Path:
    """``$CODEX_HOME``, else ``~/.codex`` (``~`` from the client's own ``HOME``)."""
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"]).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".codex"


def toml_value(value: Any) -> str:
    """``value`` as an inline TOML value (the ``value`` of a ``-c key=value`` flag)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML value for {type(value).__name__}")


def _key(name: str) -> str:
    return name if _KEY_OK.match(name) else json.dumps(name)


def _parse_value(raw: str) -> Any:
    """A ``-c`` value as Codex reads it: TOML, else the raw string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


@dataclass
class _Args:
    """What of the user's own arguments matters here."""

    rest: list[str]  # the arguments after argv[0], without the overrides promcp replaces
    overrides: dict[str, Any] = field(default_factory=dict)  # -c key=value given by the user
    profile: str | None = None


_REPLACED = re.compile(r"^(openai_base_url|model_providers\.[^.]+\.base_url)$")


def _read_args(argv: Sequence[str]) -> _Args:
    out = _Args([])
    i = 0
    words = list(argv)
    while i < len(words):
        word = words[i]
        if word == "--":
            out.rest += words[i:]
            break
        value: str | None = None
        if word in ("-c", "--config") and i + 1 < len(words):
            value, i = words[i + 1], i + 1
            flag = [word, value]
        elif word.startswith("--config="):
            value, flag = word.split("=", 1)[1], [word]
        else:
            if word in ("-p", "--profile") and i + 1 < len(words):
                out.profile = words[i + 1]
            elif word.startswith("--profile="):
                out.profile = word.split("=", 1)[1]
            out.rest.append(word)
            i += 1
            continue
        key, sep, raw = value.partition("=")
        if sep:
            out.overrides[key.strip()] = _parse_value(raw.strip())
        if not (
            sep and _REPLACED.match(key.strip())
        ):  # a base URL the user set: the proxy's upstream instead
            out.rest += flag
        i += 1
    return out


def _set_dotted(doc: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass
class CodexSetup:
    """The configuration Codex will run with, and what promcp changes of it."""

    config: dict[str, Any]  # the merged configuration (file, profile layer, the user's -c flags)
    provider: str  # the model provider in use
    upstream: str  # the provider's base URL: where the LLM proxy forwards
    base_url_key: str  # the -c key that points the provider at the proxy
    rest: list[str]  # the user's arguments (after argv[0]) to keep
    files: list[Path] = field(default_factory=list)  # the config files read

    @property
    def servers(self) -> dict[str, Any]:
        servers = self.config.get("mcp_servers")
        return dict(servers) if isinstance(servers, Mapping) else {}

    def llm_overrides(self, proxy_url: str) -> list[str]:
        return ["-c", f"{self.base_url_key}={toml_value(proxy_url)}"]


def _auth_is_chatgpt(home: Path, env: Mapping[str, str]) -> bool:
    """Whether the built-in provider will use ChatGPT sign-in (no API key anywhere): only which fields
    ``auth.json`` fills is read, never a value."""
    if env.get("OPENAI_API_KEY") or env.get("CODEX_API_KEY"):
        return False
    try:
        auth = json.loads((home / "auth.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(auth, dict) and not auth.get("OPENAI_API_KEY") and bool(auth.get("tokens"))


def codex_setup(argv: Sequence[str], env: Mapping[str, str]) -> CodexSetup:
    """Read the configuration ``codex ARGV…`` would run with (ConfigError for a file that is not TOML or a
    custom provider without a ``base_url``)."""
    home = codex_home(env)
    args = _read_args(argv[1:])
    files = [home / "config.toml"]
    config = load_toml(files[0])
    if args.profile:
        files.append(home / f"{args.profile}.config.toml")
        config = _merge(config, load_toml(files[-1]))
        legacy = config.get("profiles")  # the older [profiles.NAME] tables
        if isinstance(legacy, Mapping) and isinstance(legacy.get(args.profile), Mapping):
            config = _merge(config, legacy[args.profile])
    for key, value in args.overrides.items():
        _set_dotted(config, key, value)
    provider = str(config.get("model_provider") or "openai")
    providers = config.get("model_providers") if isinstance(config.get("model_providers"), Mapping) else {}
    assert isinstance(providers, Mapping)
    entry = providers.get(provider) if isinstance(providers.get(provider), Mapping) else {}
    assert isinstance(entry, Mapping)
    if provider == "openai":
        key = "openai_base_url"
        url = config.get(key) or entry.get("base_url")
        if not url:
            url = CHATGPT_BASE_URL if _auth_is_chatgpt(home, env) else BUILTIN_BASE_URLS["openai"]
    else:
        key = f"model_providers.{_key(provider)}.base_url"
        url = entry.get("base_url") or BUILTIN_BASE_URLS.get(provider)
        if not url:
            raise ConfigError(
                f"model provider {provider!r} has no base_url: give --upstream URL", source=files[0]
            )
    return CodexSetup(config, provider, str(url), key, args.rest, [f for f in files if f.is_file()])


def _is_wrapped(entry: Mapping[str, Any]) -> bool:
    from promcp.proxy.mcp.clients import is_wrapped

    return is_wrapped(entry)


def _retarget(args: Sequence[Any], out: Path, run_id: str) -> list[str]:
    """The arguments of a server ``promcp proxy config`` wrapped, writing this run instead."""
    words = [str(a) for a in args]
    new: list[str] = []
    i = 0
    while i < len(words):
        if words[i] in ("--out", "--run-id") and i + 1 < len(words):
            i += 2
            continue
        if words[i] == "mcp" and i and words[i - 1] == "proxy":
            new += ["mcp", "--out", str(out.absolute()), "--run-id", run_id]
            i += 1
            continue
        new.append(words[i])
        i += 1
    return new


@dataclass
class McpPlan:
    overrides: list[str] = field(default_factory=list)
    wrapped: list[str] = field(default_factory=list)
    unwrapped: list[str] = field(default_factory=list)


def mcp_overrides(
    servers: Mapping[str, Any],
    *,
    out: Path,
    run_id: str,
    tokenizer: str | None,
    listen: Callable[[str, str], str] | None,
    startup_grace: int | None = None,
    passthrough: Sequence[str] = (),
) -> McpPlan:
    """The ``-c`` flags that send every enabled server of ``servers`` through ``promcp proxy mcp``; when a stdio
    server is wrapped, Codex's start-up grace (``startup_grace``, the config's ``mcp_optional_startup_grace_ms``)
    grows by the proxy's own start-up allowance. ``passthrough``: variables each wrapped stdio server's ``env_vars``
    gains (``record`` passes ``PYTHONPATH`` when it has one, so the proxy imports the promcp that ``record`` runs)."""
    from promcp.proxy.mcp.clients import CLIENTS, Wrapped, wrap_servers

    plan = McpPlan()
    todo: dict[str, Any] = {}
    for name, entry in servers.items():
        if not _KEY_OK.match(name):
            plan.unwrapped.append(f"{name} (a name a -c override cannot address)")
        elif not isinstance(entry, Mapping):
            plan.unwrapped.append(f"{name} (not a table)")
        elif entry.get("enabled") is False:
            plan.unwrapped.append(f"{name} (disabled in the config)")
        elif entry.get("url") and listen is None:
            plan.unwrapped.append(f"{name} (an HTTP server: no proxy started)")
        elif _is_wrapped(entry):  # wrapped by 'promcp proxy config': write this run
            base = f"mcp_servers.{name}"
            plan.overrides += [
                "-c",
                f"{base}.args={toml_value(_retarget(entry.get('args') or [], out, run_id))}",
            ]
            plan.wrapped.append(name)
        else:
            todo[name] = entry
    done = Wrapped({})
    wrapped, _ = wrap_servers(
        todo, CLIENTS["codex"], out=out, tokenizer=tokenizer, run_id=run_id, result=done, listen=listen
    )
    for name in done.wrapped:
        before, after = todo[name], wrapped[name]
        for key in ("command", "args", "url"):
            if after.get(key) is not None and after.get(key) != before.get(key):
                plan.overrides += ["-c", f"mcp_servers.{name}.{key}={toml_value(after[key])}"]
        if before.get("command") and passthrough:
            env_vars = identity_env_vars(before, passthrough)
            if env_vars is not None:
                plan.overrides += ["-c", f"mcp_servers.{name}.env_vars={toml_value(env_vars)}"]
    plan.wrapped += done.wrapped
    plan.unwrapped += [f"{k} (neither a command nor a URL)" for k in done.kept]
    if any(isinstance(servers[n], Mapping) and servers[n].get("command") for n in plan.wrapped):
        grace = startup_grace if startup_grace is not None else CODEX_STARTUP_GRACE_MS
        plan.overrides += ["-c", f"mcp_optional_startup_grace_ms={int(grace) + PROXY_STARTUP_ALLOWANCE_MS}"]
    return plan


def identity_env_vars(entry: Mapping[str, Any], names: Sequence[str] = IDENTITY_VARS) -> list[Any] | None:
    """The ``env_vars`` of a wrapped server with ``names`` added (default: the run's identity, so it reaches the
    proxy through Codex's fixed server environment); None when it has them all."""
    current = list(entry.get("env_vars") or [])
    have = {v if isinstance(v, str) else v.get("name") if isinstance(v, Mapping) else None for v in current}
    missing = [v for v in names if v not in have]
    return [*current, *missing] if missing else None


def wrap_toml(text: str, *, out: Path, tokenizer: str | None, port: int) -> tuple[str, Wrapped]:
    """``promcp proxy config --client codex``: the config ``text`` with every ``[mcp_servers.NAME]`` wrapped, its
    comments and layout kept (tomlkit); each wrapped stdio server also passes the run's identity through
    ``env_vars``."""
    import tomlkit

    from promcp.proxy.mcp.clients import wrap_config

    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"not TOML: {exc}", line=exc.line) from None
    result = wrap_config(doc.unwrap(), "codex", out=out, tokenizer=tokenizer, port=port)
    tables: Any = doc.get("mcp_servers")  # tomlkit tables: edited in place, comments kept
    for name in result.wrapped:
        new = result.config["mcp_servers"][name]
        table = tables[name]
        for key in ("command", "args", "url"):
            if key in new and new[key] != table.get(key):
                table[key] = new[key]
        if "command" in new:
            env_vars = identity_env_vars(new)
            if env_vars is not None:
                table["env_vars"] = env_vars
    return tomlkit.dumps(doc), result
