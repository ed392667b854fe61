"""One run written by several processes: a journal *part* per process, merged into the run when the last ends.

An off-the-shelf client starts one ``promcp proxy mcp`` process per MCP server (and ``promcp record`` adds an LLM
proxy); all of them belong to one client session, so they write one run. Each process appends to its own journal
part (single ``os.write`` per line, its own ``flock``, exactly like a run journal), so no line of one process can
interleave with another's::

    DIR/_journal/<run_id>.parts/<part>.jsonl      one per process (a run journal's format, same run id)

While a part is created and while parts are merged, the process holds an exclusive ``flock`` on the ``_journal``
folder itself (so a part is never merged between its creation and its writer's lock, and two merges never race).

:func:`finalize_group` merges the parts when none is still being written (the last process to end does it, and
``promcp finalize`` does it for parts left by killed processes): the events of every part — and those of the run's
Parquet file when an earlier merge already wrote one — are ordered by start time (ties keep each process's own
order), the caller's ``link`` joins them (an LLM proxy's tool calls to the MCP proxies' ``tools/call`` events:
:func:`promcp.stages.link.link_tool_calls`, idempotent; the store applies no stage rule itself), the events are numbered again (``seq``), and written as
the run's one Parquet file through :func:`write_run`; merged parts are removed only after that file is in place. A part created while a merge runs is left for the next merge.

Readers never write: a run whose parts are all finished but not yet merged is read in place as one run
(:func:`read_group_in_place`), the way a crashed run's journal is; a run still being written is skipped with a
warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from promcp.errors import RunInProgressError, TraceError
from promcp.events import Event
from promcp.store.files import make_dirs
from promcp.store.journal import (
    JOURNAL_DIR,
    JOURNAL_SUFFIX,
    Blob,
    JournalContents,
    JournalHeader,
    _fsync_dir,
    is_live,
    read_journal,
)
from promcp.store.layout import META_RUN, dataset_root_of_journal, existing_content, run_file
from promcp.store.merged import Link, merged_already

if TYPE_CHECKING:  # the Parquet side (pyarrow) is imported when a merge or a read needs it: a recording proxy
    # appends to its journal part without it (docs/proxy.md "start-up")
    from promcp.store.parquet import RunFile

__all__ = [
    "PARTS_SUFFIX",
    "adopt_journal",
    "finalize_group",
    "finalize_groups",
    "group_lock",
    "new_part_path",
    "parts_dir",
    "pending_groups",
    "read_group_in_place",
]

log = logging.getLogger(__name__)

PARTS_SUFFIX = ".parts"


def parts_dir(root: Path, run_id: str) -> Path:
    """The folder holding the journal parts of run ``run_id`` under dataset ``root``."""
    return Path(root) / JOURNAL_DIR / f"{run_id}{PARTS_SUFFIX}"


def new_part_path(root: Path, run_id: str, name: str) -> Path:
    """A fresh part path for one process: ``<name>-<pid>-<random>.jsonl`` (``name`` is made file-safe)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or "part"
    return parts_dir(root, run_id) / f"{safe}-{os.getpid()}-{secrets.token_hex(3)}{JOURNAL_SUFFIX}"


@contextlib.contextmanager
def group_lock(root: Path) -> Iterator[None]:
    """Exclusive lock on the dataset's ``_journal`` folder (waits): held while a part is created and while parts
    are merged. Merges are rare and short, so one lock for every run of a dataset is enough."""
    jdir = Path(root) / JOURNAL_DIR
    make_dirs(jdir)  # owner-only, like every folder promcp creates (promcp/store/files.py)
    fd = os.open(jdir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def adopt_journal(journal: Path) -> Path | None:
    """Move a run journal an earlier process left (killed, not finalized) into its run's parts folder, so it is
    merged with the run's Parquet file and the parts written since instead of being overwritten or removed; the
    new path, or None when a live process still writes it (nothing is moved). A restarted ``promcp collect`` and
    ``promcp finalize`` of a journal whose run already has a Parquet file use it."""
    root = dataset_root_of_journal(journal)
    with group_lock(root):
        if not journal.exists() or is_live(journal):
            return None
        dest = new_part_path(root, journal.stem, f"adopted-{journal.stem}")
        make_dirs(dest.parent)
        os.replace(journal, dest)
        _fsync_dir(dest.parent)
        _fsync_dir(journal.parent)
    return dest


def _parts(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == JOURNAL_SUFFIX and not p.name.startswith("."))


def events_from_table(table: Any) -> list[Event]:
    """Events back from a run's Arrow table (a Parquet file written by :func:`write_run`)."""
    events: list[Event] = []
    for row in table.to_pylist():
        clean = {k: v for k, v in row.items() if v is not None}
        if "attrs" in clean:
            clean["attrs"] = json.loads(clean["attrs"])
        if "parts" in clean:
            clean["parts"] = [[p["origin"], p["key"], p["tokens"]] for p in clean["parts"]]
        events.append(msgspec.convert(clean, Event))
    return events


def _drop_merged(root: Path, contents: list[JournalContents], *, remove: bool) -> list[JournalContents]:
    """Parts an earlier merge already wrote into the run file (it died before removing them): never merged twice
    (``remove``: deleted, what a merge does; readers leave them)."""
    if not contents:
        return contents
    import pyarrow.parquet as pq

    header = contents[0].header
    path = run_file(root, header.topology, header.run_id)
    if not path.exists():
        return contents
    run = json.loads((pq.read_schema(path).metadata or {}).get(META_RUN, b"{}"))
    kept = []
    for c in contents:
        if merged_already(run, c.header, c.path.stem):
            if remove:
                c.path.unlink(missing_ok=True)
        else:
            kept.append(c)
    return kept


def _existing(root: Path, topology: str, run_id: str) -> tuple[list[Event], dict[str, Any], list[Blob]]:
    """The events, run metadata and content of an earlier merge of this run (empty when there is none)."""
    import pyarrow.parquet as pq

    path = run_file(root, topology, run_id)
    if not path.exists():
        return [], {}, []
    table = pq.read_table(path)
    run = json.loads((table.schema.metadata or {}).get(META_RUN, b"{}"))
    blobs: list[Blob] = []
    content = existing_content(root, run_id)
    if content is not None:
        for row in pq.read_table(content, columns=["hash", "kind", "text"]).to_pylist():
            blobs.append(Blob(blob=row["hash"], kind=row["kind"], text=row["text"]))
    return events_from_table(table), run, blobs


def _start(event: Event) -> int:
    if event.t_start_ns is not None:
        return event.t_start_ns
    return event.t_end_ns if event.t_end_ns is not None else 0


def _merge_header(contents: list[JournalContents], earlier: dict[str, Any]) -> JournalHeader:
    headers = [c.header for c in contents]
    sources = sorted({h.source for h in headers} | ({earlier["source"]} if earlier.get("source") else set()))
    parts_meta: list[dict[str, Any]] = list((earlier.get("meta") or {}).get("parts", []))
    for c in contents:
        h = c.header
        parts_meta.append(
            {
                "part": c.path.stem,
                "source": h.source,
                "created_ns": h.created_ns,
                "events": len(c.events),
                **h.meta,
            }
        )
    created = [h.created_ns for h in headers] + ([earlier["created_ns"]] if earlier.get("created_ns") else [])
    first = headers[0]
    return JournalHeader(
        run_id=first.run_id,
        topology=first.topology,
        source=sources[0] if len(sources) == 1 else "+".join(sources),
        benchmark=next((h.benchmark for h in headers if h.benchmark), earlier.get("benchmark")),
        created_ns=min(created),
        promcp_version=first.promcp_version,
        meta={"parts": parts_meta},
        content=first.content,
        max_content_bytes=first.max_content_bytes,
    )


def _read_parts(parts: list[Path]) -> list[JournalContents]:
    contents: list[JournalContents] = []
    for part in parts:
        try:
            contents.append(read_journal(part))
        except TraceError as exc:  # an empty or foreign file: say so, keep it for a human to look at
            log.warning("%s; part left in place", exc)
    contents.sort(key=lambda c: c.header.created_ns)
    return contents


def _merged(
    root: Path, run_id: str, contents: list[JournalContents], link: Link
) -> tuple[JournalHeader, list[Event], list[Blob], int]:
    """The run the parts (and an earlier merge's Parquet file) make together: header, events joined and numbered
    again, content, journal lines. Writes nothing."""
    topology = contents[0].header.topology
    earlier_events, earlier_run, blobs = _existing(root, topology, run_id)
    ranked: list[tuple[int, int, int, Event]] = [(_start(e), 0, e.seq, e) for e in earlier_events]
    for rank, c in enumerate(contents, start=1):
        ranked.extend((_start(e), rank, e.seq, e) for e in c.events)
        blobs.extend(c.blobs.values())
    ranked.sort(key=lambda item: item[:3])
    linked = link([e for *_, e in ranked])  # the caller's join (promcp/stages/link.py)
    events = [e.replace(seq=i) for i, e in enumerate(linked)]
    unique = {b.blob: b for b in blobs}
    lines = sum(c.lines for c in contents) + int(earlier_run.get("journal_lines") or 0)
    return _merge_header(contents, earlier_run), events, list(unique.values()), lines


def read_group_in_place(root: Path, run_id: str, *, link: Link) -> RunFile | None:
    """Run ``run_id``'s parts (not yet merged, none still written) as one :class:`RunFile` held in memory, as
    :func:`finalize_group` would write it; nothing is written. ``None`` when no part is readable; raises
    :class:`RunInProgressError` while a part is still being written."""
    from promcp.store.parquet import RunFile, run_table

    root = Path(root)
    parts = _parts(parts_dir(root, run_id))
    if any(is_live(p) for p in parts):
        raise RunInProgressError("a process is still recording this run", path=parts_dir(root, run_id))
    contents = _drop_merged(root, _read_parts(parts), remove=False)
    if not contents:
        return None
    header, events, _blobs, lines = _merged(root, run_id, contents, link)
    table = run_table(header, events, journal_lines=lines)
    run = json.loads(table.schema.metadata[META_RUN])
    return RunFile(path=parts_dir(root, run_id), schema_version=header.schema_version, run=run, table=table)


def finalize_group(root: Path, run_id: str, *, link: Link) -> Path | None:
    """Merge run ``run_id``'s parts into its Parquet file; ``None`` while a part is still being written (its
    process merges when it ends) or when there is nothing to merge and no run file."""
    from promcp.store.parquet import write_run

    root = Path(root)
    folder = parts_dir(root, run_id)
    with group_lock(root):
        parts = _parts(folder)
        if any(is_live(p) for p in parts):
            return None
        contents = _drop_merged(root, _read_parts(parts), remove=True)
        if not contents:
            done = list(root.glob(f"topology=*/run_id={run_id}/events.parquet"))
            return done[0] if done else None
        header, events, blobs, lines = _merged(root, run_id, contents, link)
        dest = write_run(root, header, events, blobs, journal_lines=lines)
        for c in contents:
            c.path.unlink()
        with contextlib.suppress(OSError):  # empty now: a later part creates it again (under the same lock)
            folder.rmdir()
        _fsync_dir(folder.parent)
    return dest


def pending_groups(root: Path) -> list[str]:
    """Run ids with journal parts waiting under dataset ``root``."""
    jdir = Path(root) / JOURNAL_DIR
    if not jdir.is_dir():
        return []
    return sorted(
        p.name[: -len(PARTS_SUFFIX)] for p in jdir.iterdir() if p.is_dir() and p.name.endswith(PARTS_SUFFIX)
    )


def finalize_groups(root: Path, *, link: Link) -> list[Path]:
    """Merge every run whose parts are all finished (``promcp finalize``, readers); live runs are left alone."""
    done: list[Path] = []
    for run_id in pending_groups(root):
        dest = finalize_group(root, run_id, link=link)
        if dest is not None:
            done.append(dest)
    return done
