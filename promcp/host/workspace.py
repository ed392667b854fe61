"""The run's workspace: the scratch directory a benchmark file fills with ``workspace.files`` and ``git_repos``.

Every path comes from the benchmark file, so every path is checked twice: when the file is loaded (relative, no
``..``, nothing under a repository's ``.git``; :mod:`promcp.host.config`), and here, right before writing, after
symbolic links are resolved: a path that leads outside the workspace (a symlink left in a reused workspace) is
refused with the file, key and line instead of being written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from promcp.errors import ConfigError
from promcp.host.config import Benchmark
from promcp.store.files import describe, make_dirs

_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "promcp",
    "GIT_AUTHOR_EMAIL": "promcp@localhost",
    "GIT_COMMITTER_NAME": "promcp",
    "GIT_COMMITTER_EMAIL": "promcp@localhost",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
}


def _inside(root: Path, rel: str, bench: Benchmark, key: str) -> Path:
    """``root / rel`` if it resolves (symlinks followed) inside ``root``; else a ConfigError naming the key."""
    path = root / rel
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise bench.error(f"{rel!r} leads outside the workspace (to {resolved}); refused", key)
    return path


def _write(root: Path, rel: str, text: str, bench: Benchmark, key: str) -> None:
    path = _inside(root, rel, bench, key)
    try:
        make_dirs(path.parent)
        _inside(root, rel, bench, key)  # the directories just made cannot have added a link, but be exact
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise bench.error(f"cannot write workspace file {path}: {describe(exc)}", key) from None


def prepare_workspace(bench: Benchmark, workspace: Path) -> None:
    """Create the run's scratch directory: the files and git repositories the benchmark file lists."""
    try:
        make_dirs(workspace / ".home")
    except OSError as exc:
        raise ConfigError(f"cannot create the workspace {workspace}: {describe(exc)}") from None
    for rel, text in bench.workspace_files.items():
        _write(workspace, rel, text, bench, f"workspace.files.{rel}")
    for repo_rel, files in bench.workspace_git_repos.items():
        key = f"workspace.git_repos.{repo_rel}"
        repo = _inside(workspace, repo_rel, bench, key)
        for name, text in files.items():
            _write(repo, name, text, bench, f"{key}.{name}")
        _commit(repo, workspace, bench, key)


def _commit(repo: Path, workspace: Path, bench: Benchmark, key: str) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workspace / ".home"), **_GIT_ENV}
    make_dirs(repo)
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "--allow-empty", "-m", "Initial commit"],
    ):
        try:
            subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True, text=True)
        except FileNotFoundError:
            raise bench.error("git is not installed (needed for workspace.git_repos)", key) from None
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or exc.stdout or "").strip().splitlines()
            raise bench.error(
                f"{' '.join(argv[:2])} failed in {repo}: {detail[-1] if detail else f'exit {exc.returncode}'}",
                key,
            ) from None
