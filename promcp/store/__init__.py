"""The durable trace store: run journals (append, fsync) finalized into a Parquet dataset.

See :mod:`promcp.store.journal` for the journal format and :mod:`promcp.store.parquet` for the dataset layout.
"""

from promcp.store.journal import Blob, JournalContents, JournalHeader, JournalWriter, read_journal
from promcp.store.parquet import (
    ARROW_SCHEMA,
    RunFile,
    discover,
    events_to_table,
    finalize,
    finalize_pending,
    read_in_place,
    write_run,
)

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
