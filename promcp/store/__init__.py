"""The durable trace store: run journals (append, fsync) finalized into a Parquet dataset.

See :mod:`promcp.store.journal` for the journal format and :mod:`promcp.store.parquet` for the dataset layout.
"""

from typing import Any

from promcp.store.journal import Blob, JournalContents, JournalHeader, JournalWriter, read_journal

#: names of :mod:`promcp.store.parquet`, imported on first use (pyarrow is not needed to append to a journal)
_PARQUET = frozenset(
    {
        "ARROW_SCHEMA",
        "RunFile",
        "discover",
        "events_to_table",
        "finalize",
        "finalize_pending",
        "read_in_place",
        "write_run",
    }
)


def __getattr__(name: str) -> Any:
    if name in _PARQUET:
        from promcp.store import parquet

        return getattr(parquet, name)
    raise AttributeError(f"module 'promcp.store' has no attribute {name!r}")


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
