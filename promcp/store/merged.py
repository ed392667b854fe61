"""Whether a journal's events are already inside a run file: a finalize or merge that died between writing the
run file and removing the journal leaves one behind, which is removed, never merged twice. No Parquet library is
imported until a run file's metadata is read."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from promcp.events import Event
from promcp.store.journal import JournalHeader
from promcp.store.layout import META_RUN

__all__ = ["Link", "already_in_run_file", "journal_header", "merged_already"]

#: The join a merge of a run's parts applies to its events, passed in by the caller (the stage rule:
#: :func:`promcp.stages.link.link_tool_calls`); the store decides no stage itself.
Link = Callable[[Sequence[Event]], list[Event]]


def journal_header(journal: Path) -> JournalHeader | None:
    """The header line of a journal (None when it has none that reads)."""
    try:
        with journal.open("rb") as fh:
            return msgspec.json.decode(fh.readline(), type=JournalHeader)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def merged_already(run: dict[str, Any], header: JournalHeader, name: str | None = None) -> bool:
    """Whether a run file's metadata ``run`` says the journal with ``header`` is already inside it: the run was
    finalized from that journal, or merged it as a part (named ``name`` when given). A merge or finalize that died
    between writing the run file and removing the journal leaves such a file; anything else must be merged."""
    if (
        name is None
        and run.get("created_ns") == header.created_ns
        and not (run.get("meta") or {}).get("parts")
    ):
        return True
    for part in (run.get("meta") or {}).get("parts") or []:
        if (
            isinstance(part, dict)
            and part.get("created_ns") == header.created_ns
            and (name is None or part.get("part") == name)
        ):
            return True
    return False


def already_in_run_file(journal: Path, existing: Path) -> bool:
    """Whether the run file ``existing`` already holds the journal's events."""
    import pyarrow.parquet as pq

    header = journal_header(journal)
    if header is None:
        return False
    run = json.loads((pq.read_schema(existing).metadata or {}).get(META_RUN, b"{}"))
    return merged_already(run, header)
