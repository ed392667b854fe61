"""What an export has sent already, per destination and run: a small JSON file (``<DATASET>.promcp-export.json``
beside the dataset by default, ``--state FILE`` otherwise), rewritten atomically after every acknowledged request,
so an interrupted export resumes where the destination stopped acknowledging.

It holds no secret: a destination is keyed by its URL without user info or query string, and headers are never
written. ``{"version": 1, "destinations": {"http/protobuf http://host:4318/v1/traces": {"<run id>":
{"fingerprint": "<size>:<mtime>", "sent": N, "total": M}}}}``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from promcp.errors import ConfigError
from promcp.store.files import describe, open_private, storage_error

__all__ = ["ExportState", "default_state_path", "destination_key"]

VERSION: Final = 1


def default_state_path(dataset: Path) -> Path:
    """``<dataset>.promcp-export.json`` beside the dataset (never inside it: a dataset holds only promcp's files)."""
    resolved = dataset.resolve()
    return resolved.parent / f"{resolved.name}.promcp-export.json"


def destination_key(protocol: str, url: str) -> str:
    """The destination as the state file names it: protocol and URL, user info and query left out."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return f"{protocol} {urlunsplit((parts.scheme, netloc, parts.path, '', ''))}"


class ExportState:
    """The runs one destination has acknowledged, and how far."""

    def __init__(self, path: Path, destination: str) -> None:
        self.path, self.destination = path, destination
        self._doc: dict[str, Any] = {"version": VERSION, "destinations": {}}
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"cannot read the export state: {describe(exc)}", source=path) from None
            except ValueError as exc:
                raise ConfigError(
                    f"the export state is not JSON ({exc}); remove it or pass --force", source=path
                ) from None
            if not isinstance(doc, dict) or not isinstance(doc.get("destinations"), dict):
                raise ConfigError(
                    "not a promcp export state file; remove it or pass --state elsewhere", source=path
                )
            self._doc = doc
        self._runs: dict[str, Any] = self._doc["destinations"].setdefault(destination, {})

    def sent(self, run_id: str, fingerprint: str) -> int:
        """Spans of the run the destination acknowledged (0 when the run changed since)."""
        entry = self._runs.get(run_id)
        if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
            return 0
        n = entry.get("sent")
        return n if isinstance(n, int) and n >= 0 else 0

    def record(self, run_id: str, fingerprint: str, sent: int, total: int) -> None:
        """Note and save (atomically) that ``sent`` spans of the run were acknowledged."""
        self._runs[run_id] = {"fingerprint": fingerprint, "sent": sent, "total": total}
        self._save()

    def forget(self) -> None:
        """Start this destination over (``--force``)."""
        self._runs.clear()

    def _save(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        data = json.dumps(self._doc, indent=1, sort_keys=True).encode()
        try:
            fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            raise storage_error(
                exc, self.path, "cannot write the export state ({reason}); what was sent is sent"
            ) from None
