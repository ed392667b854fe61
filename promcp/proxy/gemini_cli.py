"""The Gemini CLI's settings, as ``promcp record -- gemini`` needs them: which MCP servers it would start, and a
session view of its home folder in which each of them starts through ``promcp proxy mcp``, with no file of the
user's edited.

The Gemini CLI merges four settings files (later wins; ``mcpServers`` merges name by name): system defaults, the
user's ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME`` instead of the home folder when set), the workspace's
``.gemini/settings.json`` (only when the workspace is trusted), and the system file
(``$GEMINI_CLI_SYSTEM_SETTINGS_PATH``, else ``/etc/gemini-cli/settings.json``).

Why a private home and not a settings override: the CLI has a variable for its system settings path, but it skips
a system settings (or defaults) file unless that file and every folder above it are owned by root and writable by
no one else — an ordinary user cannot make such a file. ``GEMINI_CLI_HOME`` is honoured as is, so promcp makes a
private folder whose ``.gemini`` holds the user's settings with the servers wrapped and a symbolic link to every
other entry of the real ``~/.gemini`` (credentials, ``tmp/`` with the session logs ``promcp import`` reads, history,
trusted folders, extensions, memory; and the home folder's ``.env``): the session sees the user's own files and writes its logs where it always
does. The real ``~/.gemini/tmp`` is created first when missing, so even a first session's logs land there.

What cannot be wrapped without editing a file: a server that a trusted workspace's or the system settings define
(those layers come after the user's and would replace the wrapped entry). It is listed as not recorded, with the
file that defines it. Servers of the system defaults are wrapped (the user layer comes after them).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.errors import ConfigError
from promcp.proxy.mcp.clients import load_config

__all__ = ["GeminiSettings", "gemini_settings", "is_gemini", "trusted"]

HOME_VAR = "GEMINI_CLI_HOME"
_NAMES = frozenset({"gemini", "gemini-cli"})


def is_gemini(command: list[str]) -> bool:
    return bool(command) and Path(command[0]).name in _NAMES


def _system_path(env: Mapping[str, str], platform: str) -> Path:
    if env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH"):
        return Path(env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"])
    if platform == "darwin":
        return Path("/Library/Application Support/GeminiCli/settings.json")
    if platform.startswith("win"):
        return Path("C:/ProgramData/gemini-cli/settings.json")
    return Path("/etc/gemini-cli/settings.json")


def gemini_dir(env: Mapping[str, str]) -> Path:
    """The CLI's user folder: ``$GEMINI_CLI_HOME/.gemini``, else ``~/.gemini``."""
    home = env.get(HOME_VAR) or env.get("HOME") or str(Path.home())
    return Path(home).expanduser() / ".gemini"


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    return load_config(path, "gemini")


def _servers(doc: Mapping[str, Any], source: Path) -> dict[str, Any]:
    servers = doc.get("mcpServers")
    if servers is None:
        return {}
    if not isinstance(servers, Mapping):
        raise ConfigError("mcpServers is not an object", source=source)
    return dict(servers)


def _is_subpath(parent: str, child: str) -> bool:
    try:
        return os.path.commonpath([parent, child]) == parent
    except ValueError:
        return False


def trusted(env: Mapping[str, str], cwd: Path, folder_trust: bool) -> bool:
    """Whether the Gemini CLI trusts the workspace ``cwd`` (its ``checkPathTrust``): ``GEMINI_CLI_TRUST_WORKSPACE``,
    folder trust switched off, else the longest matching rule of ``trustedFolders.json``; no rule: not trusted."""
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return False
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true" or not folder_trust:
        return True
    path = Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or gemini_dir(env) / "trustedFolders.json")
    try:
        rules = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return False  # the CLI refuses to start on a broken file; promcp counts no workspace server
    here = os.path.realpath(cwd)
    best, level = -1, None
    for rule, trust in rules.items() if isinstance(rules, dict) else ():
        effective = os.path.dirname(rule) if trust == "TRUST_PARENT" else rule
        if _is_subpath(os.path.realpath(effective), here) and len(rule) > best:
            best, level = len(rule), trust
    return level in ("TRUST_FOLDER", "TRUST_PARENT")


def _folder_trust(doc: Mapping[str, Any]) -> Any:
    security = doc.get("security")
    folder = security.get("folderTrust") if isinstance(security, Mapping) else None
    return folder.get("enabled") if isinstance(folder, Mapping) else None


@dataclass
class GeminiSettings:
    """What the Gemini CLI would start in a session: the servers promcp can wrap (``servers``), those it cannot
    (``fixed``: name → the file that defines them), and the user's settings they go back into."""

    servers: dict[str, Any]
    user: dict[str, Any]
    user_dir: Path
    workspace_trusted: bool
    fixed: dict[str, Path] = field(default_factory=dict)

    def private_home(self, folder: Path, wrapped: Mapping[str, Any]) -> dict[str, str]:
        """Make ``folder`` the session's home (see the module) with ``wrapped`` as the user's servers; returns the
        environment that points the CLI at it."""
        real = self.user_dir
        (real / "tmp").mkdir(parents=True, exist_ok=True, mode=0o700)
        mine = folder / ".gemini"
        mine.mkdir(parents=True, mode=0o700)
        for entry in real.iterdir():
            if entry.name != "settings.json":
                (mine / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        home_env = real.parent / ".env"  # the CLI's last place to look for a .env file: the home folder's
        if home_env.is_file():
            (folder / ".env").symlink_to(home_env)
        doc = {**self.user, "mcpServers": dict(wrapped)}
        fd = os.open(mine / "settings.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
        return {HOME_VAR: str(folder)}


def gemini_settings(env: Mapping[str, str], cwd: Path, platform: str | None = None) -> GeminiSettings:
    """The Gemini CLI's settings layers for a session in ``cwd`` (ConfigError naming a file that is not JSON)."""
    plat = sys.platform if platform is None else platform
    system_path = _system_path(env, plat)
    defaults_path = Path(
        env.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH") or system_path.parent / "system-defaults.json"
    )
    user_dir = gemini_dir(env)
    user_path = user_dir / "settings.json"
    defaults, user, system = _read(defaults_path), _read(user_path), _read(system_path)
    workspace_path = cwd / ".gemini" / "settings.json"
    same = workspace_path.exists() and user_path.exists() and workspace_path.resolve() == user_path.resolve()
    workspace = {} if same else _read(workspace_path)
    folder_trust = True
    for doc in (defaults, user, system):  # later layers win; a workspace cannot trust itself
        value = _folder_trust(doc)
        if isinstance(value, bool):
            folder_trust = value
    is_trusted = trusted(env, cwd, folder_trust)
    servers = {**_servers(defaults, defaults_path), **_servers(user, user_path)}
    fixed: dict[str, Path] = {}
    later = [(workspace_path, workspace)] if is_trusted else []
    for path, doc in [*later, (system_path, system)]:
        for name in _servers(doc, path):
            fixed[name] = path
            servers.pop(name, None)
    return GeminiSettings(servers, user, user_dir, is_trusted, fixed)
