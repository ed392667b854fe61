"""Off-the-shelf clients' MCP configuration files, and the same files with every server wrapped by the proxy.

=================  ==============  ==========================================================================
client             servers under   where the file is (user level first; project level in brackets)
=================  ==============  ==========================================================================
``claude-desktop`` ``mcpServers``  macOS ``~/Library/Application Support/Claude/claude_desktop_config.json``,
                                   Windows ``%APPDATA%\\Claude\\claude_desktop_config.json``, Linux builds
                                   ``~/.config/Claude/claude_desktop_config.json`` (stdio servers only; remote
                                   ones are added as connectors in the app)
``claude-code``    ``mcpServers``  ``~/.claude.json``: user scope at the top level, local scope under
                                   ``projects.<path>.mcpServers`` [project scope: ``.mcp.json``]; entries
                                   ``{"type": "stdio"|"http"|"sse", "command", "args", "env" | "url",
                                   "headers"}``; ``claude --mcp-config FILE`` takes ``{"mcpServers": …}``
``cursor``         ``mcpServers``  ``~/.cursor/mcp.json`` [``.cursor/mcp.json``]; ``command``/``args``/``env``
                                   or ``url``/``headers``
``gemini``         ``mcpServers``  ``~/.gemini/settings.json`` [``.gemini/settings.json``]; JSON with comments;
                                   ``command``/``args``/``env``/``cwd``, ``url`` (SSE, or ``"type": "http"``)
                                   or ``httpUrl`` (streamable HTTP), ``headers``
``vscode``         ``servers``     the user profile's ``mcp.json`` (Linux ``~/.config/Code/User/mcp.json``,
                                   macOS ``~/Library/Application Support/Code/User/mcp.json``, Windows
                                   ``%APPDATA%\\Code\\User\\mcp.json``) [``.vscode/mcp.json``]; JSON with
                                   comments; ``type`` ``stdio``/``http``/``sse``; ``inputs`` kept as they are
``codex``          ``mcp_servers`` ``$CODEX_HOME/config.toml`` (default ``~/.codex/config.toml``), TOML:
                                   ``[mcp_servers.NAME]`` with ``command``/``args``/``env``/``env_vars`` or
                                   ``url``; written back with tomlkit (comments and layout kept), each wrapped
                                   stdio server given ``env_vars`` ``PROMCP_OUT``/``PROMCP_RUN_ID`` (Codex starts
                                   servers with a fixed environment; see promcp/proxy/codex.py)
=================  ==============  ==========================================================================

Wrapping a **stdio** server replaces its command by ``promcp proxy mcp --out DIR --name NAME -- COMMAND ARGS…``
(environment, working directory and every other key stay). An **HTTP** server's URL (``url``, or Gemini's
``httpUrl``, kept under its own key) becomes
``http://127.0.0.1:PORT/<same path>``, and the proxy that must listen there is returned as a command
(:attr:`Wrapped.http_proxies`) for the user or ``promcp record`` to start; headers stay in the client's config,
so the client keeps sending them (through the proxy, which forwards them and never records them). Servers already
wrapped are left alone, so wrapping twice changes nothing; so is ``promcp mcp`` (promcp's own server, which must
not record itself into the dataset it reads).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from promcp.errors import ConfigError

__all__ = [
    "CLIENTS",
    "ClientFormat",
    "Wrapped",
    "default_path",
    "load_config",
    "promcp_command",
    "wrap_config",
    "wrap_servers",
]

BACKUP_SUFFIX = ".promcp-backup"


@dataclass(frozen=True)
class ClientFormat:
    name: str
    servers_key: str
    #: (platform prefix, path with ~ and %APPDATA%) of the user-level file
    user_files: tuple[tuple[str, str], ...]
    project_file: str | None
    http_type: str | None  # the "type" an HTTP entry carries (None: the client infers it from "url")
    comments: bool = False  # the file may hold // and /* */ comments and trailing commas (JSONC)
    toml: bool = False  # the file is TOML (Codex)


CLIENTS: dict[str, ClientFormat] = {
    "claude-desktop": ClientFormat(
        "claude-desktop",
        "mcpServers",
        (
            ("darwin", "~/Library/Application Support/Claude/claude_desktop_config.json"),
            ("win", "%APPDATA%/Claude/claude_desktop_config.json"),
            ("", "~/.config/Claude/claude_desktop_config.json"),
        ),
        None,
        None,
    ),
    "claude-code": ClientFormat("claude-code", "mcpServers", (("", "~/.claude.json"),), ".mcp.json", "http"),
    "cursor": ClientFormat("cursor", "mcpServers", (("", "~/.cursor/mcp.json"),), ".cursor/mcp.json", None),
    "gemini": ClientFormat(
        "gemini",
        "mcpServers",
        (("", "~/.gemini/settings.json"),),
        ".gemini/settings.json",
        None,
        comments=True,
    ),
    "vscode": ClientFormat(
        "vscode",
        "servers",
        (
            ("darwin", "~/Library/Application Support/Code/User/mcp.json"),
            ("win", "%APPDATA%/Code/User/mcp.json"),
            ("", "~/.config/Code/User/mcp.json"),
        ),
        ".vscode/mcp.json",
        "http",
        comments=True,
    ),
    "codex": ClientFormat(
        "codex", "mcp_servers", (("", "~/.codex/config.toml"),), ".codex/config.toml", None, toml=True
    ),
}


def default_path(client: str, platform: str | None = None) -> Path:
    """The user-level config file of ``client`` on this platform."""
    fmt = CLIENTS[client]
    if client == "codex" and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"]).expanduser() / "config.toml"
    plat = sys.platform if platform is None else platform
    for prefix, template in fmt.user_files:
        if plat.startswith(prefix):
            expanded = template.replace("%APPDATA%", os.environ.get("APPDATA", "~/AppData/Roaming"))
            return Path(os.path.expanduser(expanded))
    raise AssertionError("every client lists a catch-all path")  # pragma: no cover


def promcp_command() -> list[str]:
    """How a client should start promcp: the ``promcp`` script beside this interpreter (clients do not share
    your shell's PATH), else ``python -m promcp.cli``."""
    script = Path(sys.executable).parent / "promcp"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "promcp.cli"]


@dataclass
class Wrapped:
    """A config with its servers wrapped, and the HTTP proxies the wrapped URLs point to."""

    config: dict[str, Any]
    wrapped: list[str] = field(default_factory=list)  # server names wrapped now
    kept: list[str] = field(default_factory=list)  # already wrapped, or neither stdio nor HTTP
    http_proxies: list[list[str]] = field(default_factory=list)  # commands to start, one per HTTP server

    def mcp_servers(self, fmt: ClientFormat, project: str | None = None) -> dict[str, Any]:
        """The wrapped servers as ``{"mcpServers": …}`` (top level, plus ``projects[project]`` for Claude Code)."""
        servers = dict(self.config.get(fmt.servers_key) or {})
        projects = self.config.get("projects")
        if project and isinstance(projects, Mapping) and isinstance(projects.get(project), Mapping):
            servers.update(projects[project].get("mcpServers") or {})
        return {"mcpServers": servers}


def is_wrapped(entry: Mapping[str, Any]) -> bool:
    """Whether a server entry already starts ``promcp proxy mcp``."""
    return _is_wrapped(entry)


def _is_wrapped(entry: Mapping[str, Any]) -> bool:
    """Already a promcp proxy — or ``promcp mcp`` itself, which is never wrapped (docs/mcp.md)."""
    args = [str(a) for a in entry.get("args") or []]
    command = str(entry.get("command") or "")
    words = [command, *args]
    promcp = any("promcp" in w for w in words[:3])
    proxied = any(words[i : i + 2] == ["proxy", "mcp"] for i in range(len(words) - 1))
    own_server = any(words[i] == "mcp" and "promcp" in words[i - 1] for i in range(1, min(len(words), 4)))
    return promcp and (proxied or own_server)


def _options(out: Path, name: str, tokenizer: str | None, run_id: str | None) -> list[str]:
    opts = ["--out", str(out.absolute()), "--name", name]
    if tokenizer:
        opts += ["--tokenizer", tokenizer]
    if run_id:
        opts += ["--run-id", run_id]
    return opts


def wrap_servers(
    servers: Mapping[str, Any],
    fmt: ClientFormat,
    *,
    out: Path,
    promcp: Sequence[str] | None = None,
    tokenizer: str | None = None,
    run_id: str | None = None,
    port: int = 8750,
    result: Wrapped | None = None,
    listen: Callable[[str, str], str] | None = None,
) -> tuple[dict[str, Any], int]:
    """``servers`` (one client's ``name → entry`` map) with each entry wrapped; returns it and the next free
    port. Wrapped names and HTTP proxy commands are added to ``result``. ``listen(name, url)``, when given, starts
    the HTTP server's proxy itself and returns its ``host:port`` (``promcp record``); else HTTP servers get
    ``127.0.0.1:port``, ``port + 1``… and the commands that start their proxies."""
    promcp = list(promcp or promcp_command())
    res = result if result is not None else Wrapped({})
    out_servers: dict[str, Any] = {}
    for name, entry in servers.items():
        if not isinstance(entry, Mapping) or _is_wrapped(entry):
            out_servers[name] = entry
            res.kept.append(name)
            continue
        new = dict(entry)
        if entry.get("command"):
            new["command"] = promcp[0]
            new["args"] = [
                *promcp[1:],
                "proxy",
                "mcp",
                *_options(out, name, tokenizer, run_id),
                "--",
                str(entry["command"]),
                *[str(a) for a in entry.get("args") or []],
            ]
            res.wrapped.append(name)
        elif entry.get("url") or entry.get("httpUrl"):
            url_key = "url" if entry.get("url") else "httpUrl"
            upstream = str(entry[url_key])
            parts = urlsplit(upstream)
            if listen is not None:
                address = listen(name, upstream)
            else:
                address = f"127.0.0.1:{port}"
                port += 1
            new[url_key] = urlunsplit(("http", address, parts.path or "/", parts.query, ""))
            if fmt.http_type and "type" not in new:
                new["type"] = fmt.http_type
            res.http_proxies.append(
                [
                    *promcp,
                    "proxy",
                    "mcp",
                    "--upstream",
                    upstream,
                    "--listen",
                    address,
                    *_options(out, name, tokenizer, run_id),
                ]
            )
            res.wrapped.append(name)
        else:
            res.kept.append(name)
        out_servers[name] = new
    return out_servers, port


def wrap_config(
    config: Mapping[str, Any],
    client: str,
    *,
    out: Path,
    promcp: Sequence[str] | None = None,
    tokenizer: str | None = None,
    run_id: str | None = None,
    port: int = 8750,
) -> Wrapped:
    """A whole client config with every server wrapped (Claude Code: the top level and every project)."""
    fmt = CLIENTS[client]
    result = Wrapped(dict(config))
    servers = config.get(fmt.servers_key)
    if isinstance(servers, Mapping):
        result.config[fmt.servers_key], port = wrap_servers(
            servers, fmt, out=out, promcp=promcp, tokenizer=tokenizer, run_id=run_id, port=port, result=result
        )
    projects = config.get("projects") if client == "claude-code" else None
    if isinstance(projects, Mapping):
        new_projects: dict[str, Any] = {}
        for path, project in projects.items():
            if isinstance(project, Mapping) and isinstance(project.get("mcpServers"), Mapping):
                project = dict(project)
                project["mcpServers"], port = wrap_servers(
                    project["mcpServers"],
                    fmt,
                    out=out,
                    promcp=promcp,
                    tokenizer=tokenizer,
                    run_id=run_id,
                    port=port,
                    result=result,
                )
            new_projects[path] = project
        result.config["projects"] = new_projects
    return result


def strip_jsonc(text: str) -> str:
    """JSON with comments (``//``, ``/* */``) and trailing commas → JSON (strings left untouched)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "]}":
                i += 1  # a trailing comma
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_config(path: Path, client: str) -> dict[str, Any]:
    """A client's config file as a dict (ConfigError naming the file, line and column when it is not JSON)."""
    if CLIENTS[client].toml:
        from promcp.proxy._toml import load_toml

        if not path.is_file():
            raise ConfigError("no such file (give the config file's path as FILE)", source=path)
        return load_toml(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file (give the config file's path as FILE)", source=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=path) from None
    if CLIENTS[client].comments:
        text = strip_jsonc(text)
    try:
        config = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg} (column {exc.colno})", source=path, line=exc.lineno) from None
    if not isinstance(config, dict):
        raise ConfigError("not a JSON object", source=path)
    return config


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.promcp-tmp-{os.getpid()}")
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
