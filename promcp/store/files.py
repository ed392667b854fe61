"""Owner-only files and directories for everything promcp writes, and the one-line wording of OS errors.

A trace can hold whole conversations (previews, captured content, server logs), so promcp creates its files
``0600`` and its directories ``0700`` whatever the umask. ``PROMCP_FILE_MODE`` (octal, e.g. ``640``) tells it
otherwise: directories then get the matching execute bits (``640`` → ``750``). Existing directories (a dataset root
you made yourself) keep their mode.
"""

from __future__ import annotations

import errno as errno_
import os
from pathlib import Path
from typing import Final

from promcp.errors import ConfigError, StorageError

DEFAULT_FILE_MODE: Final = 0o600
_ENV = "PROMCP_FILE_MODE"


def file_mode() -> int:
    """Mode of files promcp creates (``PROMCP_FILE_MODE`` or 0600)."""
    raw = os.environ.get(_ENV, "").strip()
    if not raw:
        return DEFAULT_FILE_MODE
    try:
        mode = int(raw, 8)
    except ValueError:
        raise ConfigError(f"{_ENV}={raw!r} is not an octal file mode such as 600 or 640") from None
    if not 0 <= mode <= 0o777 or not mode & 0o600 == 0o600:
        raise ConfigError(f"{_ENV}={raw!r}: the owner must keep read and write (e.g. 600, 640, 644)")
    return mode


def dir_mode() -> int:
    """Mode of directories promcp creates: the file mode plus execute wherever it can read."""
    mode = file_mode()
    return mode | ((mode & 0o444) >> 2)


def make_dirs(path: Path) -> None:
    """``mkdir -p`` with :func:`dir_mode` for every directory it creates (``Path.mkdir`` would give the parents
    the umask's mode)."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    mode = dir_mode()
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:
            continue
        os.chmod(directory, mode)  # mkdir's mode is filtered by the umask


def open_private(path: Path, flags: int) -> int:
    """``os.open`` creating the file with :func:`file_mode` (not filtered by the umask)."""
    mode = file_mode()
    fd = os.open(path, flags, mode)
    if flags & os.O_CREAT:
        try:
            os.fchmod(fd, mode)
        except OSError:
            os.close(fd)
            raise
    return fd


def describe(exc: OSError) -> str:
    """The OS's reason in words (``No space left on device``), never a Python repr."""
    if exc.errno is not None:
        name = errno_.errorcode.get(exc.errno, "")
        return f"{exc.strerror or os.strerror(exc.errno)}{f' ({name})' if name else ''}"
    return str(exc) or type(exc).__name__


def storage_error(exc: OSError, path: Path, template: str) -> StorageError:
    """The one-line error for an OS refusal: ``template`` with ``{reason}`` replaced by :func:`describe`."""
    return StorageError(template.replace("{reason}", describe(exc)), path=path, errno=exc.errno)


def missing_reason(path: Path) -> str:
    """Why ``path`` cannot be used: "no such file or directory", "a symlink loop", "permission denied", …"""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno_.ELOOP:
            return "a symlink loop (too many levels of symbolic links)"
        if exc.errno == errno_.ENOENT and path.is_symlink():
            return f"a dangling symlink (to {os.readlink(path)})"
        if exc.errno == errno_.ENOENT:
            return "no such file or directory"
        return describe(exc).lower()
    return "exists"
