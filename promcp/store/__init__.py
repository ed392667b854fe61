"""The durable trace store: run journals (append, fsync) finalized into a Parquet dataset.

See :mod:`promcp.store.journal` for the journal format and :mod:`promcp.store.parquet` for the dataset layout
(written there; read back by :mod:`promcp.store.discovery`, journals finalized by :mod:`promcp.store.finalization`).
The names below are loaded on first use: importing a light submodule (``promcp.store.files``, the import index)
does not load pyarrow, which costs a command like ``promcp import`` of an unchanged folder most of its start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from promcp.store.discovery import discover, read_in_place
    from promcp.store.finalization import finalize, finalize_pending
    from promcp.store.journal import Blob, JournalContents, JournalHeader, JournalWriter, read_journal
    from promcp.store.parquet import ARROW_SCHEMA, RunFile, events_to_table, write_run

_HOME = {
    "Blob": "journal",
    "JournalContents": "journal",
    "JournalHeader": "journal",
    "JournalWriter": "journal",
    "read_journal": "journal",
    "ARROW_SCHEMA": "parquet",
    "RunFile": "parquet",
    "discover": "discovery",
    "events_to_table": "parquet",
    "finalize": "finalization",
    "finalize_pending": "finalization",
    "read_in_place": "discovery",
    "write_run": "parquet",
}

__all__ = [
    "ARROW_SCHEMA",
    "Blob",
    "JournalContents",
    "JournalHeader",
    "JournalWriter",
    "RunFile",
    "discover",
    "events_to_table",
    "finalize",
    "finalize_pending",
    "read_in_place",
    "read_journal",
    "write_run",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"promcp.store.{home}"), name)
