"""Reading a TOML configuration file (Codex's ``config.toml``) with errors that name the file and line: shared by
the Codex launcher (:mod:`promcp.proxy.codex`) and the client configurations (:mod:`promcp.proxy.mcp.clients`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from promcp.errors import ConfigError

__all__ = ["load_toml"]


def load_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict ({} when it is not there); ConfigError naming the file and line when unreadable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=path) from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", source=path) from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise ConfigError(
            f"not TOML: {exc}", source=path, line=int(line.group(1)) if line else None
        ) from None
