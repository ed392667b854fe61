"""Where a dataset keeps what: the names and paths of run files, content files and scratch folders.

No Parquet library is imported here: a recording process (a proxy appending to its journal part) and the merge
machinery name files through this module without loading pyarrow. The layout itself is described in
:mod:`promcp.store.parquet`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

EVENTS_FILE: Final = "events.parquet"
CONTENT_DIR: Final = "_content"
#: The suffix of a content file: Parquet, but not ``.parquet``, so globs for the events never pick it up.
CONTENT_SUFFIX: Final = ".pq"
#: Suffixes content files had, newest first (``.parquet`` before 0.2).
CONTENT_SUFFIXES: Final = (CONTENT_SUFFIX, ".parquet")
#: Suffix of the directory beside a dataset that holds a run's scratch (server logs, workspaces).
SCRATCH_SUFFIX: Final = ".scratch"


def content_path(root: Path, run_id: str) -> Path:
    """Where a run's captured content is written."""
    return root / CONTENT_DIR / f"{run_id}{CONTENT_SUFFIX}"


def existing_content(root: Path, run_id: str) -> Path | None:
    """A run's content file in either layout (None when it has none)."""
    for suffix in CONTENT_SUFFIXES:
        path = root / CONTENT_DIR / f"{run_id}{suffix}"
        if path.exists():
            return path
    return None


def scratch_dir(root: Path, kind: str, run_id: str) -> Path:
    """``DIR.scratch/<kind>/<run_id>``: a run's non-Parquet files (``logs``, ``workspaces``), beside the dataset
    ``DIR`` so that the dataset holds only Parquet."""
    root = root.absolute()
    return root.with_name(root.name + SCRATCH_SUFFIX) / kind / run_id


META_SCHEMA_VERSION: Final = b"promcp.schema_version"
META_VERSION: Final = b"promcp.version"
META_RUN: Final = b"promcp.run"


def run_file(root: Path, topology: str, run_id: str) -> Path:
    """Where run ``run_id``'s events are written: ``ROOT/topology=<t>/run_id=<r>/events.parquet``."""
    return root / f"topology={topology}" / f"run_id={run_id}" / EVENTS_FILE


def dataset_root_of_journal(journal: Path) -> Path:
    """The dataset folder a journal (``ROOT/_journal/<run_id>.jsonl``) belongs to."""
    return journal.parent.parent


def finalized_run_file(journal: Path) -> Path | None:
    """The run file of a journal's run id under the dataset root, if that run was finalized."""
    root = dataset_root_of_journal(journal)
    matches = list(root.glob(f"topology=*/run_id={journal.stem}/{EVENTS_FILE}"))
    return matches[0] if matches else None
