"""Packs: many finalized runs of one topology in one Parquet file (``promcp compact``), every row unchanged.

A dataset written one run per session (imports before batching, thousands of short ``promcp run``/``record``
runs) is thousands of small files that every reader pays for. :func:`compact` merges them::

    DIR/topology=<topology>/pack-<id>.parquet     the rows of many runs, run after run, each row as it was
    DIR/_content/pack-<id>.pq                     their captured content (one row per blob hash)

A pack sits in its topology's folder, not in a ``run_id=`` folder: its rows keep their own ``run_id`` column,
which a ``run_id=`` directory name would override in pandas and DuckDB's Hive partitioning. Its metadata
(:data:`META_PACK`) lists each run's header (the ``promcp.run`` metadata of its former file, unchanged), its row
count and the size and modification time of the file it came from.

**Crash safety.** A pack is committed by one rename: its content file is written first, then its events file
(temporary name, fsync, rename), and only then are the runs' own files removed. Until that removal finishes, a
run's former file and its copy in a pack hold the same rows: readers skip a ``run_id=`` file that a pack lists
with the same size and modification time (:func:`superseded`), so nothing is counted twice, and the next
``promcp compact`` removes those files (and any content pack left without its events file). A kill at any step
leaves a dataset that reads completely and a compact that finishes.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from promcp.errors import StorageError
from promcp.store.files import storage_error
from promcp.store.journal import JOURNAL_DIR, _fsync_dir, iter_journals
from promcp.store.layout import (
    CONTENT_DIR,
    CONTENT_SUFFIX,
    EVENTS_FILE,
    META_RUN,
    META_SCHEMA_VERSION,
    META_VERSION,
    existing_content,
)
from promcp.store.parquet import _atomic_write, current_content

PACK_PREFIX: Final = "pack-"
#: Pack metadata: ``{"runs": [{"run": <the run's promcp.run header>, "rows": n, "schema_version": v,
#: "file": {"size": bytes, "mtime_ns": ns}}, ...]}`` in row order.
META_PACK: Final = b"promcp.pack"
#: Rows per pack: large enough that a year of sessions is a few files, small enough that one pack is built in a
#: few hundred MB (a run with more rows is a pack of its own).
PACK_ROWS: Final = 250_000
#: Captured content per pack, as the runs' content files measure on disk (compressed): the pack's content is
#: merged in memory, so a dataset recorded with ``--content full`` gets more, smaller packs instead of a huge one.
PACK_CONTENT_BYTES: Final = 64 * 2**20


def is_pack(path: Path) -> bool:
    """Whether ``path`` names a pack's events file (``topology=*/pack-*.parquet``)."""
    return (
        path.name.startswith(PACK_PREFIX)
        and path.suffix == ".parquet"
        and path.parent.name.startswith("topology=")
    )


def pack_files(root: Path) -> list[Path]:
    """The packs of dataset ``root`` (not those a later pack replaced: a merge stopped before removing them)."""
    packs = sorted(root.glob(f"topology=*/{PACK_PREFIX}*.parquet"))
    gone = replaced(packs)
    return [p for p in packs if p not in gone]


def _pack_meta(path: Path) -> dict[str, Any]:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(META_PACK)
    parsed = json.loads(raw) if raw is not None else {}
    return parsed if isinstance(parsed, dict) else {}


def pack_runs(path: Path) -> list[dict[str, Any]]:
    """The runs a pack holds, in row order (its metadata; nothing else is read)."""
    runs = _pack_meta(path).get("runs")
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


def replaced(packs: Iterable[Path]) -> set[Path]:
    """Packs that another of ``packs`` replaced (merged into it, every row unchanged): readers skip them."""
    packs = list(packs)
    by_stem = {p.stem: p for p in packs}
    out: set[Path] = set()
    for pack in packs:
        try:
            stems = _pack_meta(pack).get("replaces") or []
        except (OSError, ValueError, pa.ArrowInvalid):
            continue
        out.update(by_stem[s] for s in stems if isinstance(s, str) and s in by_stem and by_stem[s] != pack)
    return out


def packed_run_ids(root: Path) -> dict[str, Path]:
    """Run id → the pack holding it, for every pack of ``root`` (one footer read per pack)."""
    out: dict[str, Path] = {}
    for pack in pack_files(root):
        with contextlib.suppress(OSError, ValueError, pa.ArrowInvalid):
            for entry in pack_runs(pack):
                out[str((entry.get("run") or {}).get("run_id"))] = pack
    return out


def _run_dir_file(root: Path, topology: str, run_id: str) -> Path:
    return root / f"topology={topology}" / f"run_id={run_id}" / EVENTS_FILE


def _same_file(path: Path, recorded: Any) -> bool:
    if not isinstance(recorded, dict):
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_size == recorded.get("size") and st.st_mtime_ns == recorded.get("mtime_ns")


def superseded(root: Path, packs: Iterable[Path] | None = None) -> set[Path]:
    """``run_id=`` files whose rows a pack already holds (a compact stopped before removing them): readers skip
    them. A file rewritten since (another size or modification time) is not skipped."""
    out: set[Path] = set()
    for pack in pack_files(root) if packs is None else packs:
        try:
            entries = pack_runs(pack)
        except (OSError, ValueError, pa.ArrowInvalid):
            continue
        topology = pack.parent.name.removeprefix("topology=")
        for entry in entries:
            run_id = str((entry.get("run") or {}).get("run_id"))
            path = _run_dir_file(root, topology, run_id)
            if _same_file(path, entry.get("file")):
                out.add(path)
    return out


def read_run(pack: Path, run_id: str, columns: list[str] | None = None) -> pa.Table:
    """The rows of one run of a pack (row groups whose statistics exclude it are not decoded)."""
    table = pq.read_table(pack, columns=columns, filters=[("run_id", "=", run_id)])
    return table


# -- compaction -------------------------------------------------------------------------------------------------


@dataclass
class _Run:
    run_id: str
    topology: str
    path: Path
    rows: int
    header: dict[str, Any]
    schema_version: int
    #: the file's Arrow schema as text: runs of one schema share packs (older writers lacked some columns)
    schema: str
    size: int
    mtime_ns: int
    content: Path | None
    content_bytes: int = 0


@dataclass
class CompactSummary:
    """What :func:`compact` did."""

    runs: int = 0
    rows: int = 0
    packs: list[Path] = field(default_factory=list)
    files_before: int = 0
    files_after: int = 0
    #: run files left as they are, with why (another event schema, unreadable)
    left: list[str] = field(default_factory=list)
    #: files a compact stopped earlier had not removed yet, removed now
    recovered: int = 0
    #: packs made by merging small packs (each later import adds one)
    merged: list[Path] = field(default_factory=list)


#: Called between the steps of writing one pack (``content``, ``events``, ``removed``); tests replace it to stop
#: the compact there the way a kill would.
def _step(step: str, pack: Path) -> None:
    return None


def _dataset_files(root: Path) -> int:
    """Parquet files of the dataset: events (outside hidden folders) and content."""
    events = sum(
        1
        for p in root.rglob("*.parquet")
        if not any(x.startswith(("_", ".")) for x in p.relative_to(root).parts)
    )
    cdir = root / CONTENT_DIR
    content = sum(1 for p in cdir.glob("*") if p.suffix in (".pq", ".parquet")) if cdir.is_dir() else 0
    return events + content


def pending_writes(root: Path) -> list[Path]:
    """Journals and journal parts not finalized yet (compact refuses while there are any)."""
    pending = list(iter_journals(root))
    jdir = root / JOURNAL_DIR
    if jdir.is_dir():
        pending += [
            p for p in jdir.iterdir() if p.is_dir() and p.name.endswith(".parts") and any(p.iterdir())
        ]
    return pending


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise storage_error(exc, path, f"cannot remove {path}: {{reason}}") from None


def _remove_run_files(run_file: Path, content: Path | None) -> None:
    if content is not None:
        _unlink(content)
    _unlink(run_file)
    with contextlib.suppress(OSError):
        run_file.parent.rmdir()


def recover(root: Path) -> int:
    """Finish what a stopped compact left: remove the run files packs already hold, and content packs whose events
    pack was never written. Returns the files removed."""
    removed = 0
    everything = sorted(root.glob(f"topology=*/{PACK_PREFIX}*.parquet"))
    for old in sorted(replaced(everything)):  # merged into a newer pack that is in place
        _unlink(root / CONTENT_DIR / f"{old.stem}{CONTENT_SUFFIX}")
        _unlink(old)
        removed += 1
    packs = pack_files(root)
    names = {p.stem for p in packs}
    cdir = root / CONTENT_DIR
    if cdir.is_dir():
        for content in cdir.glob(f"{PACK_PREFIX}*{CONTENT_SUFFIX}"):
            if content.stem not in names:  # written before a kill, its events pack never committed
                _unlink(content)
                removed += 1
    for path in sorted(superseded(root, packs)):
        run_id = path.parent.name.removeprefix("run_id=")
        _remove_run_files(path, existing_content(root, run_id))
        removed += 1
    if removed and cdir.is_dir():
        with contextlib.suppress(OSError):
            _fsync_dir(cdir)
    return removed


def _candidates(root: Path, summary: CompactSummary) -> list[_Run]:
    runs: list[_Run] = []
    for path in sorted(root.glob(f"topology=*/run_id=*/{EVENTS_FILE}")):
        try:
            schema = pq.read_schema(path)
            meta = schema.metadata or {}
            st = path.stat()
            rows = pq.ParquetFile(path).metadata.num_rows
        except (OSError, ValueError, pa.ArrowInvalid) as exc:
            summary.left.append(f"{path}: not readable ({exc}); left as it is")
            continue
        if META_SCHEMA_VERSION not in meta:
            summary.left.append(f"{path}: no promcp metadata (not written by promcp); left as it is")
            continue
        header = json.loads(meta.get(META_RUN, b"{}"))
        run_id = str(header.get("run_id") or path.parent.name.removeprefix("run_id="))
        runs.append(
            _Run(
                run_id=run_id,
                topology=path.parent.parent.name.removeprefix("topology="),
                path=path,
                rows=rows,
                header=header,
                schema_version=int(meta[META_SCHEMA_VERSION]),
                schema=schema.remove_metadata().to_string(),
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                content=(content := existing_content(root, run_id)),
                content_bytes=_size(content),
            )
        )
    return runs


def _size(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _plan(runs: list[_Run], pack_rows: int) -> list[list[_Run]]:
    """Runs grouped by topology (and event schema: a pack's rows are stored exactly as they were) in recording
    order, cut into packs of at most ``pack_rows`` rows and :data:`PACK_CONTENT_BYTES` of content files."""
    by_topology: dict[tuple[str, str], list[_Run]] = {}
    for run in runs:
        by_topology.setdefault((run.topology, run.schema), []).append(run)
    plan: list[list[_Run]] = []
    for key in sorted(by_topology):
        group = sorted(by_topology[key], key=lambda r: (int(r.header.get("created_ns") or 0), r.run_id))
        current: list[_Run] = []
        rows = content = 0
        for run in group:
            if current and (rows + run.rows > pack_rows or content + run.content_bytes > PACK_CONTENT_BYTES):
                plan.append(current)
                current, rows, content = [], 0, 0
            current.append(run)
            rows += run.rows
            content += run.content_bytes
        if current:
            plan.append(current)
    return plan


def _content_of(runs: list[_Run]) -> pa.Table | None:
    tables = []
    for run in runs:
        if run.content is None:
            continue
        table = pq.read_table(run.content)
        tables.append(current_content(table))
    if not tables:
        return None
    return _dedupe_hash(pa.concat_tables(tables).unify_dictionaries().combine_chunks())


def _dedupe_hash(table: pa.Table) -> pa.Table:
    """One row per blob hash (the first): runs share texts (the same tool schemas, the same prompts)."""
    seen: set[str | None] = set()
    keep = []
    for h in table.column("hash").to_pylist():
        keep.append(h not in seen)
        seen.add(h)
    return table if all(keep) else table.filter(pa.array(keep))


def _pack_name() -> str:
    return f"{PACK_PREFIX}{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(4)}"


def _write_pack(root: Path, runs: list[_Run]) -> Path:
    from promcp._version import __version__

    name = _pack_name()
    dest = root / f"topology={runs[0].topology}" / f"{name}.parquet"
    content = _content_of(runs)
    if content is not None and content.num_rows:
        _atomic_write(content, root / CONTENT_DIR / f"{name}{CONTENT_SUFFIX}")
    _step("content", dest)
    tables = [pq.read_table(run.path).replace_schema_metadata(None) for run in runs]
    table = pa.concat_tables(tables)
    meta = {
        "runs": [
            {
                "run": run.header,
                "rows": run.rows,
                "schema_version": run.schema_version,
                "file": {"size": run.size, "mtime_ns": run.mtime_ns},
            }
            for run in runs
        ]
    }
    table = table.replace_schema_metadata(
        {
            META_SCHEMA_VERSION: str(max(r.schema_version for r in runs)).encode(),
            META_VERSION: __version__.encode(),
            META_PACK: json.dumps(meta, default=str).encode(),
        }
    )
    _atomic_write(table, dest)  # the commit: from here on readers take these runs from the pack
    _step("events", dest)
    for run in runs:
        _remove_run_files(run.path, run.content)
    _fsync_dir(dest.parent)
    if (root / CONTENT_DIR).is_dir():
        _fsync_dir(root / CONTENT_DIR)
    _step("removed", dest)
    return dest


def _merge_small_packs(root: Path, pack_rows: int) -> list[Path]:
    """Packs of less than half ``pack_rows`` rows (one per later import) merged with each other, per topology and
    schema, every row and every run entry unchanged; the new pack names those it replaces, which are removed once it
    is in place (until then readers skip them)."""
    from promcp._version import __version__

    groups: dict[tuple[str, str], list[tuple[Path, int]]] = {}
    for pack in pack_files(root):
        try:
            meta = pq.ParquetFile(pack).metadata
            schema = pq.read_schema(pack).remove_metadata().to_string()
            if not pack_runs(pack):
                continue
        except (OSError, ValueError, pa.ArrowInvalid):
            continue  # a damaged pack is left as it is (readers name it)
        content = root / CONTENT_DIR / f"{pack.stem}{CONTENT_SUFFIX}"
        if meta.num_rows < pack_rows // 2 and _size(content) < PACK_CONTENT_BYTES // 2:
            groups.setdefault((pack.parent.name, schema), []).append((pack, meta.num_rows))
    written: list[Path] = []
    for small in groups.values():
        batches: list[list[Path]] = [[]]
        rows = 0
        for pack, n in small:
            if batches[-1] and rows + n > pack_rows:
                batches.append([])
                rows = 0
            batches[-1].append(pack)
            rows += n
        for batch in batches:
            if len(batch) < 2:
                continue
            name = _pack_name()
            dest = batch[0].parent / f"{name}.parquet"
            contents = [root / CONTENT_DIR / f"{p.stem}{CONTENT_SUFFIX}" for p in batch]
            tables = [current_content(pq.read_table(c)) for c in contents if c.exists()]
            if tables:
                merged = _dedupe_hash(pa.concat_tables(tables).unify_dictionaries().combine_chunks())
                _atomic_write(merged, root / CONTENT_DIR / f"{name}{CONTENT_SUFFIX}")
            _step("content", dest)
            events = pa.concat_tables([pq.read_table(p).replace_schema_metadata(None) for p in batch])
            entries = [entry for p in batch for entry in pack_runs(p)]
            versions = [int(e.get("schema_version") or 0) for e in entries]
            events = events.replace_schema_metadata(
                {
                    META_SCHEMA_VERSION: str(max(versions, default=0)).encode(),
                    META_VERSION: __version__.encode(),
                    META_PACK: json.dumps(
                        {"runs": entries, "replaces": [p.stem for p in batch]}, default=str
                    ).encode(),
                }
            )
            _atomic_write(events, dest)  # the commit: readers skip the packs it replaces from here on
            _step("events", dest)
            for old, content in zip(batch, contents, strict=True):
                _unlink(content)
                _unlink(old)
            _fsync_dir(dest.parent)
            _step("removed", dest)
            written.append(dest)
    return written


def compact(
    root: Path,
    *,
    pack_rows: int = PACK_ROWS,
    progress: Callable[[int, int, int], None] | None = None,
) -> CompactSummary:
    """Merge the finalized runs of dataset ``root`` into packs of up to ``pack_rows`` rows; return what was done.

    Runs still journaling (or journals not finalized) make it refuse (:class:`StorageError` naming them and
    ``promcp finalize``); run files of an older event schema are left as they are (listed in the summary).
    ``progress(packs_done, packs_total, runs_done)`` is called after each pack.
    """
    from promcp.store.parts import group_lock

    summary = CompactSummary()
    pending = pending_writes(root)
    if pending:
        raise StorageError(
            f"{len(pending)} journal(s) not finalized (first: {pending[0]}); run `promcp finalize {root}` "
            "first (a run still recording: wait until it ends)",
            path=root,
        )
    with group_lock(root):  # no merge of journal parts while runs move
        summary.files_before = _dataset_files(root)
        summary.recovered = recover(root)
        try:
            summary.merged = _merge_small_packs(root, pack_rows)
        except OSError as exc:
            raise storage_error(
                exc, root, "cannot merge packs: {reason}; every run is still readable; run it again"
            ) from None
        plan = _plan(_candidates(root, summary), pack_rows)
        done = 0
        for i, runs in enumerate(plan, start=1):
            try:
                summary.packs.append(_write_pack(root, runs))
            except OSError as exc:
                raise storage_error(
                    exc,
                    root,
                    "cannot write a pack: {reason}; every run is still readable (a run is removed only once its "
                    f"pack is in place); make room, then run `promcp compact {root}` again",
                ) from None
            done += len(runs)
            summary.runs += len(runs)
            summary.rows += sum(r.rows for r in runs)
            if progress is not None:
                progress(i, len(plan), done)
        summary.files_after = _dataset_files(root)
    return summary


# -- rewriting a pack (an import replacing a changed session's rows) --------------------------------------------


def drop_rows(root: Path, run_id: str, keep: Callable[[pa.Table], list[bool]]) -> int | None:
    """Rewrite the pack holding ``run_id`` without the rows of that run ``keep`` rejects (atomically; the other
    runs' rows and every header unchanged, the run's row count updated). Returns the run's rows left, or None when
    no pack holds the run."""
    pack = packed_run_ids(root).get(run_id)
    if pack is None:
        return None
    for stale in superseded(root, [pack]):  # a stopped compact's copy: finish removing it first
        if stale.parent.name == f"run_id={run_id}":
            _remove_run_files(stale, existing_content(root, run_id))
    try:
        table = pq.read_table(pack)
    except (OSError, ValueError, pa.ArrowInvalid) as exc:
        raise StorageError(f"cannot read the pack holding run {run_id} ({exc})", path=pack) from None
    runs = table.column("run_id").to_pylist()
    mine = [r == run_id for r in runs]
    decided = iter(keep(table.filter(pa.array(mine))))
    mask = [True if not m else bool(next(decided)) for m in mine]
    left = sum(1 for m, k in zip(mine, mask, strict=True) if m and k)
    if all(mask):
        return left
    meta = dict(table.schema.metadata or {})
    pack_meta = json.loads(meta[META_PACK])
    entries = []
    for entry in pack_meta["runs"]:
        if str((entry.get("run") or {}).get("run_id")) == run_id:
            if left == 0:
                continue
            # the run's rows changed: its former file no longer stands for them (export fingerprints, recover)
            entry = {
                **entry,
                "rows": left,
                "run": {**entry["run"], "events": left},
                "file": {"size": -1, "mtime_ns": time.time_ns()},
            }
        entries.append(entry)
    if not entries:
        _unlink(pack)
        content = root / CONTENT_DIR / f"{pack.stem}{CONTENT_SUFFIX}"
        _unlink(content)
        return 0
    meta[META_PACK] = json.dumps({**pack_meta, "runs": entries}, default=str).encode()
    try:
        _atomic_write(table.filter(pa.array(mask)).replace_schema_metadata(meta), pack)
    except OSError as exc:
        raise storage_error(exc, pack, f"cannot rewrite pack {pack}: {{reason}}") from None
    return left


def iter_pack_runs(path: Path) -> Iterator[tuple[dict[str, Any], int, str | None]]:
    """(header, schema version, former file as ``size:mtime_ns``) of each run of a pack."""
    for entry in pack_runs(path):
        former = entry.get("file")
        origin = f"{former.get('size')}:{former.get('mtime_ns')}" if isinstance(former, dict) else None
        yield dict(entry.get("run") or {}), int(entry.get("schema_version") or 0), origin
