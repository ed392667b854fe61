"""Finalized runs: one Parquet file per run in a Hive-partitioned dataset.

Dataset layout (``DIR`` is what ``--out`` names)::

    DIR/topology=<topology>/run_id=<run_id>/events.parquet   the events of one run (all columns, identity included)
    DIR/topology=<topology>/pack-<id>.parquet                 the events of many runs, unchanged (promcp compact:
                                                             promcp/store/packs.py)
    DIR/_content/<run_id>.pq                                 captured content: blob hash, kind, text (optional)
    DIR/_journal/<run_id>.jsonl                              runs still being written, or left by a killed process
    DIR.scratch/{logs,workspaces}/<run_id>/                  beside the dataset: ``promcp run``'s server logs and
                                                             workspaces (:func:`scratch_dir`)

The only ``*.parquet`` files under ``DIR`` are the events, in the Hive layout: directories starting with ``_`` are
ignored by Parquet readers, the content files are Parquet named ``.pq`` (so no ``**/*.parquet`` glob mixes them
in), and nothing else lives inside. ``pandas.read_parquet(DIR)``, ``pyarrow.dataset.dataset(DIR)`` and DuckDB's
``read_parquet('DIR/**/*.parquet', hive_partitioning = 1)`` read the events directly. The identity columns are also
inside each file (dictionary-encoded, which is compatible with the partition keys as pandas and
``pyarrow.parquet`` infer them), so one file is self-describing. Older datasets (``_content/<run_id>.parquet``)
are still read.

Files are written to a temporary name, fsync'd and renamed into place: a reader never sees a half-written file.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from promcp._version import __version__
from promcp.errors import (
    JournalError,
    NotATraceError,
    PromcpWarning,
    RunInProgressError,
    SchemaVersionError,
    StorageError,
    TraceError,
)
from promcp.events import COLUMNS, SCHEMA_VERSION, Event
from promcp.store.files import describe, make_dirs, missing_reason, open_private, storage_error
from promcp.store.journal import (
    JOURNAL_DIR,
    Blob,
    JournalHeader,
    _fsync_dir,
    claim,
    is_journal,
    is_live,
    iter_journals,
    read_journal,
)

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


ROW_GROUP_ROWS: Final = 65_536

META_SCHEMA_VERSION: Final = b"promcp.schema_version"
META_VERSION: Final = b"promcp.version"
META_RUN: Final = b"promcp.run"

_DICT = pa.dictionary(pa.int32(), pa.string())
_PART = pa.struct([("origin", pa.string()), ("key", pa.string()), ("tokens", pa.int64())])

#: Arrow type of every event column. Low-cardinality strings are dictionary-encoded.
ARROW_FIELDS: Final[list[tuple[str, pa.DataType]]] = [
    ("run_id", _DICT),
    ("topology", _DICT),
    ("source", _DICT),
    ("benchmark", _DICT),
    ("task_id", pa.string()),
    ("round", pa.int32()),
    ("seq", pa.int64()),
    ("stage", _DICT),
    ("phase", _DICT),
    ("direction", _DICT),
    ("t_start_ns", pa.int64()),
    ("t_end_ns", pa.int64()),
    ("latency_ms", pa.float64()),
    ("timing_quality", _DICT),
    ("model", _DICT),
    ("provider", _DICT),
    ("server", _DICT),
    ("tool", _DICT),
    ("transport", _DICT),
    ("mcp_method", _DICT),
    ("jsonrpc_id", pa.string()),
    ("tool_call_id", pa.string()),
    ("protocol_version", _DICT),
    ("sdk_versions", _DICT),
    ("tokens_in", pa.int64()),
    ("tokens_out", pa.int64()),
    ("tokens_total", pa.int64()),
    ("token_source", _DICT),
    ("tokenizer", _DICT),
    ("footprint_tokens", pa.int64()),
    ("footprint_bytes", pa.int64()),
    ("in_system", pa.int64()),
    ("in_schemas", pa.int64()),
    ("in_user", pa.int64()),
    ("in_history", pa.int64()),
    ("in_tool_results", pa.int64()),
    ("parts", pa.list_(_PART)),
    ("context_window", pa.int64()),
    ("cache_read_tokens", pa.int64()),
    ("cache_write_tokens", pa.int64()),
    ("cache_write_5m_tokens", pa.int64()),
    ("cache_write_1h_tokens", pa.int64()),
    ("reasoning_tokens", pa.int64()),
    ("status", _DICT),
    ("error_type", _DICT),
    ("req_preview", pa.string()),
    ("resp_preview", pa.string()),
    ("trace_id", pa.string()),
    ("span_id", pa.string()),
    ("parent_span_id", pa.string()),
    ("attrs", pa.string()),
]
ARROW_SCHEMA: Final = pa.schema(ARROW_FIELDS)
if tuple(ARROW_SCHEMA.names) != COLUMNS:  # pragma: no cover - a developer error caught at import
    raise RuntimeError("ARROW_FIELDS must list the Event columns in declaration order")
#: Captured content: ``hash`` of the original text, ``kind`` (schema, result, prompt, answer), the stored ``text``,
#: ``mode`` it was stored in (``full`` or ``redacted``), ``original_bytes`` (UTF-8 size of the original) and
#: ``truncated`` (the stored text is a prefix cut at ``--max-content-bytes``).
CONTENT_SCHEMA: Final = pa.schema(
    [
        ("hash", pa.string()),
        ("kind", _DICT),
        ("text", pa.string()),
        ("mode", _DICT),
        ("original_bytes", pa.int64()),
        ("truncated", pa.bool_()),
    ]
)

_ENUM_COLUMNS = frozenset(
    {"topology", "stage", "phase", "direction", "timing_quality", "transport", "token_source", "status"}
)


_ATTRS_ENCODER = msgspec.json.Encoder()


def _column(name: str, values: Sequence[Any], typ: pa.DataType) -> pa.Array:
    if name == "parts":
        values = [None if v is None else [(p.origin.value, p.key, p.tokens) for p in v] for v in values]
    elif name == "attrs":
        values = [None if v is None else _ATTRS_ENCODER.encode(v).decode() for v in values]
    if typ == _DICT:  # enum members are str subclasses: Arrow stores their values
        return pa.array(values, type=pa.string()).dictionary_encode()
    return pa.array(values, type=typ)


def events_to_table(events: Sequence[Event]) -> pa.Table:
    """Events → an Arrow table with :data:`ARROW_SCHEMA` (one transpose in C, then one array per column)."""
    columns = list(zip(*map(msgspec.structs.astuple, events), strict=True)) if events else [()] * len(COLUMNS)
    arrays = [_column(name, columns[i], typ) for i, (name, typ) in enumerate(ARROW_FIELDS)]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def _atomic_write(table: pa.Table, dest: Path) -> None:
    """Write ``table`` to ``dest`` owner-only via a temporary file, fsync and rename (raises OSError)."""
    make_dirs(dest.parent)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
            # row groups of 64k rows let readers decode a big run on every core
            pq.write_table(table, fh, compression="zstd", row_group_size=ROW_GROUP_ROWS)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(OSError):  # a read-only or full disk must not hide the first error
            tmp.unlink(missing_ok=True)
    _fsync_dir(dest.parent)


def run_file(root: Path, topology: str, run_id: str) -> Path:
    return root / f"topology={topology}" / f"run_id={run_id}" / EVENTS_FILE


def run_table(
    header: JournalHeader, events: Sequence[Event], *, journal_lines: int | None = None
) -> pa.Table:
    """One run's events as an Arrow table in ``seq`` order, with the run header in its metadata."""
    events = sorted(events, key=lambda e: e.seq)
    table = events_to_table(events)
    run_meta = {
        "run_id": header.run_id,
        "topology": header.topology,
        "source": header.source,
        "benchmark": header.benchmark,
        "created_ns": header.created_ns,
        "meta": header.meta,
        "content": header.content,
        "max_content_bytes": header.max_content_bytes,
        "journal_lines": journal_lines,
        "events": len(events),
    }
    return table.replace_schema_metadata(
        {
            META_SCHEMA_VERSION: str(SCHEMA_VERSION).encode(),
            META_VERSION: __version__.encode(),
            META_RUN: json.dumps(run_meta, default=str).encode(),
        }
    )


def content_table(blobs: Iterable[Blob]) -> pa.Table:
    """Captured content as an Arrow table with :data:`CONTENT_SCHEMA`."""
    blob_list = list(blobs)
    return pa.Table.from_arrays(
        [
            pa.array([b.blob for b in blob_list], pa.string()),
            pa.array([b.kind for b in blob_list], pa.string()).dictionary_encode(),
            pa.array([b.text for b in blob_list], pa.string()),
            pa.array([b.mode for b in blob_list], pa.string()).dictionary_encode(),
            pa.array([b.original_bytes for b in blob_list], pa.int64()),
            pa.array([b.truncated for b in blob_list], pa.bool_()),
        ],
        schema=CONTENT_SCHEMA,
    )


def current_content(table: pa.Table) -> pa.Table:
    """A content table at :data:`CONTENT_SCHEMA` (files written before ``mode``/``original_bytes``/``truncated``
    existed held full text)."""
    n = table.num_rows
    defaults = {
        "mode": pa.array(["full"] * n, pa.string()).dictionary_encode(),
        "original_bytes": pa.nulls(n, pa.int64()),
        "truncated": pa.array([False] * n, pa.bool_()),
    }
    arrays = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else defaults[f.name]
        for f in CONTENT_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=CONTENT_SCHEMA)


def write_run(
    root: Path,
    header: JournalHeader,
    events: Sequence[Event],
    blobs: Iterable[Blob] = (),
    *,
    journal_lines: int | None = None,
) -> Path:
    """Write one run's events (and captured content) atomically into the dataset at ``root`` (raises OSError)."""
    table = run_table(header, events, journal_lines=journal_lines)
    dest = run_file(root, header.topology, header.run_id)
    content = content_table(blobs)
    if content.num_rows:
        _atomic_write(content, content_path(root, header.run_id))
    _atomic_write(table, dest)
    return dest


def dataset_root_of_journal(journal: Path) -> Path:
    return journal.parent.parent


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def finalize(journal: Path, *, keep_journal: bool = False) -> Path:
    """Turn a journal (finished, interrupted or killed) into the run's Parquet file; return its path.

    Valid lines are kept and problems are reported as :class:`PromcpWarning`. The journal is removed only after
    the Parquet file is safely in place (``keep_journal`` keeps it). A disk that refuses the write raises
    :class:`StorageError` and leaves the journal as it was.
    """
    adopted = _merge_into_existing_run(journal)
    if adopted is not None:
        return adopted
    with claim(journal) as free:
        if not free:
            if not journal.exists():  # finalized meanwhile by someone else: that run file is the answer
                done = _finalized_run_file(journal)
                if done is not None:
                    return done
                raise TraceError("journal disappeared before it was finalized", path=journal)
            raise RunInProgressError("a process is still recording this run", path=journal)
        root = dataset_root_of_journal(journal)
        # Hundreds of thousands of small objects live at once here: the cyclic GC would rescan them over and
        # over (measured: 2.5x slower). None of them form cycles, so pause it for the duration.
        with _gc_paused():
            contents = read_journal(journal)
            n_events = len(contents.events)
            try:
                dest = write_run(
                    root,
                    contents.header,
                    contents.events,
                    contents.blobs.values(),
                    journal_lines=contents.lines,
                )
            except OSError as exc:
                raise storage_error(
                    exc,
                    root,
                    "cannot write the run's Parquet file: {reason}; nothing was lost: the journal "
                    f"{journal} keeps all {n_events} event(s); make room (or make the folder writable), then "
                    f"run `promcp finalize {root}`",
                ) from None
            finally:
                del contents
        if not keep_journal:
            try:
                journal.unlink()
            except OSError as exc:
                raise StorageError(
                    f"the run was written to {dest}, but its journal could not be removed ({describe(exc)}); "
                    "readers use the Parquet file and ignore the journal; delete it when the disk allows",
                    path=journal,
                    errno=exc.errno,
                ) from None
            _fsync_dir(journal.parent)
    return dest


def journal_header(journal: Path) -> JournalHeader | None:
    """The header line of a journal (None when it has none that reads)."""
    try:
        with journal.open("rb") as fh:
            return msgspec.json.decode(fh.readline(), type=JournalHeader)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _already_in_run_file(journal: Path, existing: Path) -> bool:
    from promcp.store.parts import merged_already  # parts builds on this module

    header = journal_header(journal)
    if header is None:
        return False
    run = json.loads((pq.read_schema(existing).metadata or {}).get(META_RUN, b"{}"))
    return merged_already(run, header)


def _merge_into_existing_run(journal: Path) -> Path | None:
    """A journal whose run already has a Parquet file holding other events (a collector restarted after a kill
    wrote one for the same run id): merged into it as a part, never written over it; None when the run has no
    Parquet file yet or already holds this journal (the caller finalizes or removes it as usual)."""
    existing = _finalized_run_file(journal)
    if existing is None or not journal.exists() or _already_in_run_file(journal, existing):
        return None
    from promcp.store.parts import adopt_journal, finalize_group  # parts builds on this module

    if adopt_journal(journal) is None:
        raise RunInProgressError("a process is still recording this run", path=journal)
    return finalize_group(dataset_root_of_journal(journal), journal.stem) or existing


def _finalized_run_file(journal: Path) -> Path | None:
    """The run file of a journal's run id under the dataset root, if that run was finalized."""
    root = dataset_root_of_journal(journal)
    matches = list(root.glob(f"topology=*/run_id={journal.stem}/{EVENTS_FILE}"))
    return matches[0] if matches else None


def finalize_pending(root: Path) -> list[Path]:
    """Finalize every journal left under dataset ``root`` that no live process is writing; return the run files.

    This is the explicit step (``promcp finalize DIR``): readers never finalize, they read journals in place.
    A journal whose run file already holds it (a finalize interrupted after the rename) is removed; one whose run
    file holds other events (a restarted process wrote it) is merged into it, never dropped; the journal parts
    of runs several processes recorded are merged (promcp/store/parts.py).
    """
    done: list[Path] = []
    for journal in iter_journals(root):
        if is_live(journal):
            warnings.warn(
                f"{journal}: a process is still recording this run; left for it to finalize",
                PromcpWarning,
                stacklevel=2,
            )
            continue
        existing = _finalized_run_file(journal)
        if existing is not None and _already_in_run_file(journal, existing):
            try:
                journal.unlink()
            except OSError as exc:
                raise storage_error(
                    exc,
                    journal,
                    f"already finalized as {existing}, but the journal could not be removed ({{reason}})",
                ) from None
            done.append(existing)
            continue
        try:
            done.append(finalize(journal))
        except (JournalError, SchemaVersionError) as exc:
            warnings.warn(f"{exc}; journal left in place", PromcpWarning, stacklevel=2)
    from promcp.store.parts import finalize_groups  # parts builds on this module

    return done + finalize_groups(root)  # runs several processes recorded, once none of them is still writing


@dataclass
class RunFile:
    """One run a reader found: a finalized ``events.parquet`` file, or a journal read in place (``table``)."""

    path: Path
    schema_version: int
    run: dict[str, Any] = field(default_factory=dict)
    #: the run's events when ``path`` is a journal read in place (not finalized; nothing was written)
    table: pa.Table | None = None
    #: ``path`` is a pack (promcp/store/packs.py): it holds this run's rows among other runs' (``run_id`` column)
    packed: bool = False
    #: a packed run's former file as ``size:mtime_ns`` (what its rows were before the pack took them unchanged)
    origin: str | None = None

    @property
    def from_journal(self) -> bool:
        return self.table is not None


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
    from promcp.store.packs import iter_pack_runs  # packs builds on this module

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
    from promcp.store.packs import is_pack  # packs builds on this module

    return inspect_pack(path) if is_pack(path) else [inspect_file(path)]


def read_in_place(journal: Path) -> RunFile:
    """A journal's run as a :class:`RunFile` holding its events in memory: nothing is written anywhere.

    Raises :class:`RunInProgressError` when a live process is still recording it.
    """
    if is_live(journal):
        raise RunInProgressError("a process is still recording this run", path=journal)
    with _gc_paused():
        contents = read_journal(journal)
        table = run_table(contents.header, contents.events, journal_lines=contents.lines)
    run = json.loads(table.schema.metadata[META_RUN])
    return RunFile(path=journal, schema_version=contents.header.schema_version, run=run, table=table)


def _groups_in_place(root: Path) -> Iterator[RunFile]:
    """The runs several processes recorded whose journal parts are not merged yet, each read in place."""
    jdir = root / JOURNAL_DIR
    if not jdir.is_dir() or not any(p.name.endswith(".parts") for p in jdir.iterdir()):
        return  # none (the common case): the merge machinery is not even imported
    from promcp.store.parts import pending_groups, read_group_in_place  # parts builds on this module

    for run_id in pending_groups(root):
        try:
            run = read_group_in_place(root, run_id)
        except RunInProgressError as exc:
            warnings.warn(f"{exc}; its events are not included yet", PromcpWarning, stacklevel=2)
            continue
        except TraceError as exc:
            warnings.warn(f"{exc}; parts skipped", PromcpWarning, stacklevel=2)
            continue
        if run is not None:
            yield run


def _run_dir_in_place(run_dir: Path) -> RunFile | None:
    """A run directory (``DATASET/topology=…/run_id=…``) whose run has journal parts waiting in its dataset's
    ``_journal`` (a process of the run was killed after an earlier merge): the run file and the parts, read in place
    as one run. None when nothing waits."""
    if not run_dir.name.startswith("run_id=") or not run_dir.parent.name.startswith("topology="):
        return None  # (checked before importing the parts merge: a plain report does not load it)
    from promcp.store.parts import parts_dir, read_group_in_place  # parts builds on this module

    root, run_id = run_dir.parent.parent, run_dir.name[len("run_id=") :]
    if not parts_dir(root, run_id).is_dir():
        return None
    try:
        return read_group_in_place(root, run_id)
    except RunInProgressError as exc:
        warnings.warn(f"{exc}; its newest events are not included yet", PromcpWarning, stacklevel=3)
    except TraceError as exc:
        warnings.warn(f"{exc}; parts skipped", PromcpWarning, stacklevel=3)
    return None


def _unfinalized(root: Path) -> Iterator[Path]:
    """Journals under ``root`` whose events are not in a Parquet file yet (live ones included)."""
    for journal in iter_journals(root):
        existing = _finalized_run_file(journal)
        if existing is None or not _already_in_run_file(journal, existing):
            yield journal


def discover(path: Path, *, finalize_journals: bool = False) -> list[RunFile]:
    """The runs a path stands for: a dataset directory, a run directory, an events file or a journal.

    Reading never writes: a journal left by a crashed or killed run is read in place (its :class:`RunFile` holds
    the events, ``table``); a run still recording is skipped with a warning. ``finalize_journals=True`` finalizes
    them into Parquet files first instead (what ``promcp finalize`` does). A run directory (or its events file)
    whose run has journal parts waiting — a process of the run killed after an earlier merge — is read together
    with them, as the dataset would be. Files that cannot be used are skipped
    with a :class:`PromcpWarning` naming file and problem; if nothing usable remains, :class:`NotATraceError` (or
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
                candidates = [finalize(path)]
            else:
                return [read_in_place(path)]
        elif path.suffix == ".parquet":
            grouped = None if finalize_journals else _run_dir_in_place(path.parent)
            return [grouped] if grouped is not None else _inspect(path)
        else:
            raise NotATraceError(
                "not a promcp trace: expected a dataset directory, an events.parquet file "
                "or a journal (.jsonl)",
                path=path,
            )
    else:
        grouped = None if finalize_journals else _run_dir_in_place(path)
        if grouped is not None:  # a run directory whose run has parts waiting: read with them
            return [grouped]
        if finalize_journals:
            finalize_pending(path)
        else:
            in_place.extend(_groups_in_place(path))
            for journal in _unfinalized(path):
                try:
                    runs.append(read_in_place(journal))
                except RunInProgressError as exc:
                    warnings.warn(f"{exc}; its events are not included yet", PromcpWarning, stacklevel=2)
                except TraceError as exc:
                    warnings.warn(f"{exc}; journal skipped", PromcpWarning, stacklevel=2)
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
            warnings.warn(f"{exc}; file skipped", PromcpWarning, stacklevel=2)
    if not runs:
        raise NotATraceError(
            "no promcp events found (expected events.parquet files or _journal/*.jsonl)", path=path
        )
    return runs


def _without_packed(root: Path, candidates: list[Path]) -> list[Path]:
    """Leave out the run files a pack already holds (a compact stopped before removing them)."""
    from promcp.store.packs import is_pack, replaced, superseded  # packs builds on this module

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
