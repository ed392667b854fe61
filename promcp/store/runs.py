"""The runs a dataset holds, known from metadata alone (Parquet footers, journal headers), and removing one.

Writers use this to find out what is already there without loading any event: ``promcp import`` detects that a
file it is asked to import was imported before (same content hash), and ``--replace`` removes the earlier run.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pyarrow.parquet as pq

from promcp.errors import StorageError
from promcp.store.files import storage_error
from promcp.store.journal import JournalHeader, is_live, iter_journals
from promcp.store.layout import EVENTS_FILE, META_RUN, existing_content

_header = msgspec.json.Decoder(JournalHeader)


@dataclass
class RunInfo:
    """One run of a dataset: its id, source, ``meta`` (what the writer recorded) and its files."""

    run_id: str
    source: str | None
    meta: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    live: bool = False
    #: the pack holding its rows (promcp compact), when it has no file of its own
    pack: Path | None = None


def list_runs(root: Path) -> list[RunInfo]:
    """Every run under the dataset ``root`` (finalized or still a journal), from metadata only."""
    runs: dict[str, RunInfo] = {}
    if not root.is_dir():
        return []
    for path in sorted(root.glob(f"topology=*/run_id=*/{EVENTS_FILE}")):
        try:
            meta = pq.read_schema(path).metadata or {}
            run = json.loads(meta.get(META_RUN, b"{}"))
        except (OSError, ValueError):
            continue  # not readable: not ours to judge here (readers report it)
        run_id = str(run.get("run_id") or path.parent.name.removeprefix("run_id="))
        runs[run_id] = RunInfo(run_id, run.get("source"), dict(run.get("meta") or {}), [path])
    from promcp.store.packs import pack_files, pack_runs

    for pack in pack_files(root):
        try:
            entries = pack_runs(pack)
        except (OSError, ValueError):
            continue
        for entry in entries:
            run = dict(entry.get("run") or {})
            run_id = str(run.get("run_id"))
            if run_id not in runs:  # a run file a stopped compact left is the same run
                runs[run_id] = RunInfo(run_id, run.get("source"), dict(run.get("meta") or {}), pack=pack)
    for journal in iter_journals(root):
        try:
            with journal.open("rb") as fh:
                header = _header.decode(fh.readline())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue
        info = runs.setdefault(header.run_id, RunInfo(header.run_id, header.source, dict(header.meta)))
        info.files.append(journal)
        info.live = info.live or is_live(journal)
    for info in runs.values():
        if info.pack is not None:
            continue  # its content is in the pack's content file, shared with the other runs
        content = existing_content(root, info.run_id)
        if content is not None:
            info.files.append(content)
    return list(runs.values())


def remove_run(root: Path, run: RunInfo) -> None:
    """Delete a run's files (events, content, journal) and its empty partition directory."""
    if run.live:
        raise StorageError(f"run {run.run_id} is still being recorded; not removed", path=root)
    if not any(p.name == EVENTS_FILE and p.exists() for p in run.files):
        from promcp.store.packs import drop_rows

        drop_rows(root, run.run_id, lambda rows: [False] * rows.num_rows)  # a packed run: its rows out
    for path in run.files:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise storage_error(exc, path, f"cannot remove {path}: {{reason}}") from None
        if path.name == EVENTS_FILE:
            with contextlib.suppress(OSError):
                path.parent.rmdir()


def conversation_of(task_id: str | None) -> str | None:
    """The conversation an imported task belongs to (task ids are ``<conversation>#<n>``)."""
    return task_id.rpartition("#")[0] if task_id and "#" in task_id else task_id


def drop_conversations(root: Path, topology: str, run_id: str, conversations: set[str]) -> int:
    """Rewrite one finalized run without the rows of ``conversations`` (atomically); return the rows left.

    Every other row is written back unchanged (same columns, values and order; the run's metadata keeps its
    header, ``events`` updated). A run left without rows is removed. Used when a changed source file is imported
    again into another run.
    """
    from promcp.store.layout import run_file
    from promcp.store.packs import drop_rows
    from promcp.store.parquet import _atomic_write

    packed = drop_rows(
        root,
        run_id,
        lambda rows: [conversation_of(t) not in conversations for t in rows.column("task_id").to_pylist()],
    )
    if packed is not None:  # the run is in a pack (promcp compact): the pack is rewritten without those rows
        return packed
    path = run_file(root, topology, run_id)
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as exc:
        raise StorageError(
            f"cannot read run {run_id} to replace its changed rows ({exc})", path=path
        ) from None
    keep = [conversation_of(t) not in conversations for t in table.column("task_id").to_pylist()]
    if all(keep):
        return int(table.num_rows)
    if not any(keep):
        content = existing_content(root, run_id)
        remove_run(root, RunInfo(run_id, None, {}, [path] if content is None else [path, content]))
        return 0
    import pyarrow as pa

    kept = table.filter(pa.array(keep))
    meta = dict(table.schema.metadata or {})
    run = json.loads(meta.get(META_RUN, b"{}"))
    run["events"] = kept.num_rows
    meta[META_RUN] = json.dumps(run, default=str).encode()
    try:
        _atomic_write(kept.replace_schema_metadata(meta), path)
    except OSError as exc:
        raise storage_error(exc, path, f"cannot rewrite run {run_id}: {{reason}}") from None
    return int(kept.num_rows)
