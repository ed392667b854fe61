"""Reading a dataset: the runs a path stands for (:func:`discover`), a run file's metadata, journals and parts
read in place (readers never write), and the captured-content files.

The layout is described in :mod:`promcp.store.parquet` (which writes it). A run several processes recorded is
merged in memory with the join the caller passes (``link``: the stage rule lives in :mod:`promcp.stages.link`;
the store applies none of its own).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from promcp.errors import (
    NotATraceError,
    RunInProgressError,
    SchemaVersionError,
    TraceError,
)
from promcp.events import SCHEMA_VERSION
from promcp.store.files import missing_reason
from promcp.store.finalization import finalize, finalize_pending
from promcp.store.journal import JOURNAL_DIR, Blob, is_journal, is_live, iter_journals, read_journal
from promcp.store.layout import (
    CONTENT_DIR,
    CONTENT_SUFFIXES,
    META_RUN,
    META_SCHEMA_VERSION,
    finalized_run_file,
)
from promcp.store.merged import Link, already_in_run_file
from promcp.store.parquet import RunFile, gc_paused, run_table

__all__ = ["content_files", "discover", "inspect_file", "inspect_pack", "journal_blobs", "read_in_place"]

log = logging.getLogger(__name__)


def inspect_file(path: Path) -> RunFile:
    """Read a run file's promcp metadata; refuse files from a newer schema or without promcp metadata."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceError(f"not a readable Parquet file ({exc})", path=path) from exc
    raw = meta.get(META_SCHEMA_VERSION)
    if raw is None:
        raise NotATraceError("Parquet file without promcp metadata (not written by promcp)", path=path)
    version = int(raw)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"written with event schema v{version}; this promcp reads up to v{SCHEMA_VERSION} (upgrade promcp)",
            path=path,
        )
    run = json.loads(meta.get(META_RUN, b"{}"))
    return RunFile(path=path, schema_version=version, run=run)


def inspect_pack(path: Path) -> list[RunFile]:
    """The runs of a pack (``promcp compact``), one :class:`RunFile` each (same ``path``, ``packed``)."""
    from promcp.store.packs import iter_pack_runs  # compact's module: loaded only when a pack is found

    first = inspect_file(path)  # schema version and promcp metadata, as for a run file
    try:
        runs = list(iter_pack_runs(path))
    except (ValueError, TypeError, AttributeError) as exc:
        raise TraceError(f"a pack whose list of runs does not read ({exc})", path=path) from None
    return [
        RunFile(
            path=path, schema_version=version or first.schema_version, run=header, packed=True, origin=origin
        )
        for header, version, origin in runs
    ]


def _inspect(path: Path) -> list[RunFile]:
    from promcp.store.packs import is_pack

    return inspect_pack(path) if is_pack(path) else [inspect_file(path)]


def read_in_place(journal: Path) -> RunFile:
    """A journal's run as a :class:`RunFile` holding its events in memory: nothing is written anywhere.

    Raises :class:`RunInProgressError` when a live process is still recording it.
    """
    if is_live(journal):
        raise RunInProgressError("a process is still recording this run", path=journal)
    with gc_paused():
        contents = read_journal(journal)
        table = run_table(contents.header, contents.events, journal_lines=contents.lines)
    run = json.loads(table.schema.metadata[META_RUN])
    return RunFile(path=journal, schema_version=contents.header.schema_version, run=run, table=table)


def _groups_in_place(root: Path, link: Link) -> Iterator[RunFile]:
    """The runs several processes recorded whose journal parts are not merged yet, each read in place."""
    jdir = root / JOURNAL_DIR
    if not jdir.is_dir() or not any(p.name.endswith(".parts") for p in jdir.iterdir()):
        return  # none (the common case): the merge machinery is not even imported
    from promcp.store.parts import pending_groups, read_group_in_place

    for run_id in pending_groups(root):
        try:
            run = read_group_in_place(root, run_id, link=link)
        except RunInProgressError as exc:
            log.warning("%s; its events are not included yet", exc)
            continue
        except TraceError as exc:
            log.warning("%s; parts skipped", exc)
            continue
        if run is not None:
            yield run


def _run_dir_in_place(run_dir: Path, link: Link) -> RunFile | None:
    """A run directory (``DATASET/topology=…/run_id=…``) whose run has journal parts waiting in its dataset's
    ``_journal`` (a process of the run was killed after an earlier merge): the run file and the parts, read in place
    as one run. None when nothing waits."""
    if not run_dir.name.startswith("run_id=") or not run_dir.parent.name.startswith("topology="):
        return None  # (checked before importing the parts merge: a plain report does not load it)
    from promcp.store.parts import parts_dir, read_group_in_place

    root, run_id = run_dir.parent.parent, run_dir.name[len("run_id=") :]
    if not parts_dir(root, run_id).is_dir():
        return None
    try:
        return read_group_in_place(root, run_id, link=link)
    except RunInProgressError as exc:
        log.warning("%s; its newest events are not included yet", exc)
    except TraceError as exc:
        log.warning("%s; parts skipped", exc)
    return None


def _unfinalized(root: Path) -> Iterator[Path]:
    """Journals under ``root`` whose events are not in a Parquet file yet (live ones included)."""
    for journal in iter_journals(root):
        existing = finalized_run_file(journal)
        if existing is None or not already_in_run_file(journal, existing):
            yield journal


def discover(path: Path, *, link: Link, finalize_journals: bool = False) -> list[RunFile]:
    """The runs a path stands for: a dataset directory, a run directory, an events file or a journal.

    ``link`` joins the events of a run several processes recorded (their parts merged in memory or, with
    ``finalize_journals``, on disk): the caller passes the stage rule (:func:`promcp.stages.link.link_tool_calls`).

    Reading never writes: a journal left by a crashed or killed run is read in place (its :class:`RunFile` holds
    the events, ``table``); a run still recording is skipped with a warning. ``finalize_journals=True`` finalizes
    them into Parquet files first instead (what ``promcp finalize`` does). A run directory (or its events file)
    whose run has journal parts waiting — a process of the run killed after an earlier merge — is read together
    with them, as the dataset would be. Files that cannot be used are skipped
    with a warning on the ``promcp.store.discovery`` logger naming file and problem; if nothing usable remains, :class:`NotATraceError` (or
    the single file's own error) is raised.
    """
    path = Path(path)
    if not path.exists():
        raise NotATraceError(missing_reason(path), path=path)
    runs: list[RunFile] = []
    in_place: list[RunFile] = []
    candidates: list[Path]
    if path.is_file():
        if is_journal(path):
            if finalize_journals:
                candidates = [finalize(path, link=link)]
            else:
                return [read_in_place(path)]
        elif path.suffix == ".parquet":
            grouped = None if finalize_journals else _run_dir_in_place(path.parent, link)
            return [grouped] if grouped is not None else _inspect(path)
        else:
            raise NotATraceError(
                "not a promcp trace: expected a dataset directory, an events.parquet file "
                "or a journal (.jsonl)",
                path=path,
            )
    else:
        grouped = None if finalize_journals else _run_dir_in_place(path, link)
        if grouped is not None:  # a run directory whose run has parts waiting: read with them
            return [grouped]
        if finalize_journals:
            finalize_pending(path, link=link)
        else:
            in_place.extend(_groups_in_place(path, link))
            for journal in _unfinalized(path):
                try:
                    runs.append(read_in_place(journal))
                except RunInProgressError as exc:
                    log.warning("%s; its events are not included yet", exc)
                except TraceError as exc:
                    log.warning("%s; journal skipped", exc)
        runs.extend(in_place)
        merged_again = {f"run_id={run.run.get('run_id')}" for run in in_place}  # their Parquet file is inside
        candidates = sorted(
            p
            for p in path.rglob("*.parquet")
            if not _hidden(p.relative_to(path)) and p.parent.name not in merged_again
        )
        candidates = _without_packed(path, candidates)
    for candidate in candidates:
        try:
            runs.extend(_inspect(candidate))
        except TraceError as exc:
            log.warning("%s; file skipped", exc)
    if not runs:
        raise NotATraceError(
            "no promcp events found (expected events.parquet files or _journal/*.jsonl)", path=path
        )
    return runs


def _without_packed(root: Path, candidates: list[Path]) -> list[Path]:
    """Leave out the run files a pack already holds (a compact stopped before removing them)."""
    from promcp.store.packs import is_pack, replaced, superseded

    packs = [p for p in candidates if is_pack(p)]
    if not packs:
        return candidates
    gone = replaced(packs)  # merged into a newer pack that is in place
    skip = superseded(root, [p for p in packs if p not in gone]) | gone
    return [p for p in candidates if p not in skip]


def journal_blobs(path: Path) -> list[Blob]:
    """Captured content still in the journals (not finalized, not live) of the dataset ``path`` belongs to."""
    root = path if path.is_dir() else path.parent
    journals = [path] if path.is_file() and is_journal(path) else list(_unfinalized(root))
    blobs: list[Blob] = []
    for journal in journals:
        if is_live(journal):
            continue
        try:
            blobs.extend(read_journal(journal, warn=False).blobs.values())
        except TraceError:
            continue  # reported by discover when the events are read
    return blobs


def _hidden(rel: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in rel.parts)


def content_files(path: Path) -> list[Path]:
    """Captured-content files of the dataset a path belongs to."""
    root = path if path.is_dir() else path.parent
    for candidate in (root, *root.parents[:3]):
        cdir = candidate / CONTENT_DIR
        if cdir.is_dir():
            return sorted(p for suffix in CONTENT_SUFFIXES for p in cdir.glob(f"*{suffix}"))
    return []
