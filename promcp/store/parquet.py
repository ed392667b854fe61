"""Finalized runs: one Parquet file per run in a Hive-partitioned dataset.

Dataset layout (``DIR`` is what ``--out`` names)::

    DIR/topology=<topology>/run_id=<run_id>/events.parquet   the events of one run (all columns, identity included)
    DIR/_content/<run_id>.parquet                            captured content: blob hash, kind, text (optional)
    DIR/_journal/<run_id>.jsonl                              runs still being written, or left by a killed process

Directories starting with ``_`` are ignored by Parquet readers, so ``pandas.read_parquet(DIR)`` and DuckDB's
``read_parquet('DIR/*/*/*.parquet')`` read the events directly. The identity columns are also inside each file
(dictionary-encoded, which is compatible with the partition keys), so one file is self-describing.

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
from promcp.errors import NotATraceError, PromcpWarning, RunInProgressError, SchemaVersionError, TraceError
from promcp.events import COLUMNS, SCHEMA_VERSION, Event
from promcp.store.journal import (
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
CONTENT_SCHEMA: Final = pa.schema([("hash", pa.string()), ("kind", _DICT), ("text", pa.string())])

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
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        # row groups of 64k rows let readers decode a big run on every core
        pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(dest.parent)


def run_file(root: Path, topology: str, run_id: str) -> Path:
    return root / f"topology={topology}" / f"run_id={run_id}" / EVENTS_FILE


def write_run(
    root: Path,
    header: JournalHeader,
    events: Sequence[Event],
    blobs: Iterable[Blob] = (),
    *,
    journal_lines: int | None = None,
) -> Path:
    """Write one run's events (and captured content) atomically into the dataset at ``root``."""
    events = sorted(events, key=lambda e: e.seq)
    table = events_to_table(events)
    run_meta = {
        "run_id": header.run_id,
        "topology": header.topology,
        "source": header.source,
        "benchmark": header.benchmark,
        "created_ns": header.created_ns,
        "meta": header.meta,
        "journal_lines": journal_lines,
        "events": len(events),
    }
    table = table.replace_schema_metadata(
        {
            META_SCHEMA_VERSION: str(SCHEMA_VERSION).encode(),
            META_VERSION: __version__.encode(),
            META_RUN: json.dumps(run_meta, default=str).encode(),
        }
    )
    dest = run_file(root, header.topology, header.run_id)
    blob_list = list(blobs)
    if blob_list:
        content = pa.Table.from_arrays(
            [
                pa.array([b.blob for b in blob_list], pa.string()),
                pa.array([b.kind for b in blob_list], pa.string()).dictionary_encode(),
                pa.array([b.text for b in blob_list], pa.string()),
            ],
            schema=CONTENT_SCHEMA,
        )
        _atomic_write(content, root / CONTENT_DIR / f"{header.run_id}.parquet")
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
    the Parquet file is safely in place (``keep_journal`` keeps it).
    """
    with claim(journal) as free:
        if not free:
            if not journal.exists():  # finalized meanwhile by someone else: that run file is the answer
                done = _finalized_run_file(journal)
                if done is not None:
                    return done
                raise TraceError("journal disappeared before it was finalized", path=journal)
            raise RunInProgressError("a process is still recording this run", path=journal)
        # Hundreds of thousands of small objects live at once here: the cyclic GC would rescan them over and
        # over (measured: 2.5x slower). None of them form cycles, so pause it for the duration.
        with _gc_paused():
            contents = read_journal(journal)
            root = dataset_root_of_journal(journal)
            dest = write_run(
                root, contents.header, contents.events, contents.blobs.values(), journal_lines=contents.lines
            )
            del contents
        if not keep_journal:
            journal.unlink()
            _fsync_dir(journal.parent)
    return dest


def _finalized_run_file(journal: Path) -> Path | None:
    """The run file of a journal that no longer exists, found by run id under the dataset root."""
    root = dataset_root_of_journal(journal)
    matches = list(root.glob(f"topology=*/run_id={journal.stem}/{EVENTS_FILE}"))
    return matches[0] if matches else None


def finalize_pending(root: Path) -> list[Path]:
    """Finalize every journal left under dataset ``root`` (a run still writing would be finalized too: only call
    this on datasets no live process is writing)."""
    from promcp.store.parts import finalize_groups  # parts builds on this module

    return [finalize(j) for j in iter_journals(root) if not is_live(j)] + finalize_groups(root)


@dataclass
class RunFile:
    path: Path
    schema_version: int
    run: dict[str, Any] = field(default_factory=dict)


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


def discover(path: Path, *, finalize_journals: bool = True) -> list[RunFile]:
    """The run files a path stands for: a dataset directory, a run directory, an events file or a journal.

    Journals found on the way are finalized first (``promcp report`` on an unfinalized journal finalizes it).
    Files that cannot be used are skipped with a :class:`PromcpWarning` naming file and problem; if nothing usable
    remains, :class:`NotATraceError` (or the single file's own error) is raised.
    """
    path = Path(path)
    if not path.exists():
        raise NotATraceError("no such file or directory", path=path)
    candidates: list[Path]
    if path.is_file():
        if is_journal(path):
            if not finalize_journals:
                raise NotATraceError("an unfinalized journal", path=path)
            candidates = [finalize(path)]
        elif path.suffix == ".parquet":
            return [inspect_file(path)]
        else:
            raise NotATraceError(
                "not a promcp trace: expected a dataset directory, an events.parquet file "
                "or a journal (.jsonl)",
                path=path,
            )
    else:
        if finalize_journals:
            from promcp.store.parts import finalize_groups  # parts builds on this module

            finalize_groups(path)  # runs several processes recorded, once none of them is still writing
            for journal in iter_journals(path):
                try:
                    finalize(journal)
                except RunInProgressError as exc:
                    warnings.warn(f"{exc}; its events are not included yet", PromcpWarning, stacklevel=2)
                except TraceError as exc:
                    warnings.warn(f"{exc}; journal left in place", PromcpWarning, stacklevel=2)
        candidates = sorted(p for p in path.rglob("*.parquet") if not _hidden(p.relative_to(path)))
    runs: list[RunFile] = []
    for candidate in candidates:
        try:
            runs.append(inspect_file(candidate))
        except TraceError as exc:
            warnings.warn(f"{exc}; file skipped", PromcpWarning, stacklevel=2)
    if not runs:
        raise NotATraceError(
            "no promcp events found (expected events.parquet files or _journal/*.jsonl)", path=path
        )
    return runs


def _hidden(rel: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in rel.parts)


def content_files(path: Path) -> list[Path]:
    """Captured-content files of the dataset a path belongs to."""
    root = path if path.is_dir() else path.parent
    for candidate in (root, *root.parents[:3]):
        cdir = candidate / CONTENT_DIR
        if cdir.is_dir():
            return sorted(cdir.glob("*.parquet"))
    return []
