"""A dataset's run files as a reader scanned them (not loaded): what :func:`promcp.analysis.scan` returns and
the engine queries. Kept apart so that the engine and the loader share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

__all__ = ["ParquetEvents", "RunRef"]


@dataclass(frozen=True)
class RunRef:
    """One run file of a dataset: its id, when its recording started (journal header), and its header meta."""

    run_id: str
    path: Path
    created_ns: int | None = None
    topology: str | None = None
    #: a ``promcp run --dry-run`` (servers started and stopped, no task): not a run ``--latest`` or ``diff`` picks
    dry_run: bool = False


@dataclass(frozen=True, eq=False)
class ParquetEvents:
    """Events left on disk: the run files of a dataset, scanned by DuckDB column by column as a query needs them.

    Made by :func:`promcp.analysis.scan`; the fastest input for the tables (nothing is loaded up front).
    ``task_ids`` and ``dropped`` (run_id, task_id pairs left out) narrow the tasks a query sees (:func:`select`,
    :func:`complete`).
    """

    files: tuple[Path, ...]
    column_names: tuple[str, ...]
    runs: tuple[RunRef, ...] = ()
    task_ids: tuple[str, ...] | None = None
    dropped: pa.Table | None = None
    #: whether some non-INIT event lacks a task id (None: not known yet, normalize to be safe)
    untasked: bool | None = None
    #: only these runs' rows (set when a selected file is a pack holding other runs too; None: every row)
    run_ids: tuple[str, ...] | None = None
