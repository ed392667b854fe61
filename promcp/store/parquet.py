"""Finalized runs: one Parquet file per run in a Hive-partitioned dataset.

Dataset layout (``DIR`` is what ``--out`` names)::

    DIR/topology=<topology>/run_id=<run_id>/events.parquet   the events of one run (all columns, identity included)
    DIR/topology=<topology>/pack-<id>.parquet                 the events of many runs, unchanged (promcp compact:
                                                             promcp/store/packs.py)
    DIR/_content/<run_id>.pq                                 captured content: blob hash, kind, text (optional)
    DIR/_journal/<run_id>.jsonl                              runs still being written, or left by a killed process
    DIR.scratch/{logs,workspaces}/<run_id>/                  beside the dataset: ``promcp run``'s server logs and
                                                             workspaces (:func:`scratch_dir`)
                                                             workspaces (:func:`promcp.store.layout.scratch_dir`)

The only ``*.parquet`` files under ``DIR`` are the events, in the Hive layout: directories starting with ``_`` are
ignored by Parquet readers, the content files are Parquet named ``.pq`` (so no ``**/*.parquet`` glob mixes them
in), and nothing else lives inside. ``pandas.read_parquet(DIR)``, ``pyarrow.dataset.dataset(DIR)`` and DuckDB's
``read_parquet('DIR/**/*.parquet', hive_partitioning = 1)`` read the events directly. The identity columns are also
inside each file (dictionary-encoded, which is compatible with the partition keys as pandas and
``pyarrow.parquet`` infer them), so one file is self-describing. Older datasets (``_content/<run_id>.parquet``)
are still read.

Files are written to a temporary name, fsync'd and renamed into place: a reader never sees a half-written file.
This module writes: the Arrow schema, a run's table and content table, the atomic write. The file and folder names
are in :mod:`promcp.store.layout`; reading a dataset back is :mod:`promcp.store.discovery`, turning a journal into
its run file :mod:`promcp.store.finalization`, the runs several processes record :mod:`promcp.store.parts`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from promcp._version import __version__
from promcp.events import COLUMNS, SCHEMA_VERSION, Event
from promcp.store.files import make_dirs, open_private
from promcp.store.journal import Blob, JournalHeader, _fsync_dir
from promcp.store.layout import META_RUN, META_SCHEMA_VERSION, META_VERSION, content_path, run_file

__all__ = [
    "ARROW_FIELDS",
    "ARROW_SCHEMA",
    "CONTENT_SCHEMA",
    "ROW_GROUP_ROWS",
    "RunFile",
    "content_table",
    "current_content",
    "events_to_table",
    "gc_paused",
    "run_table",
    "write_run",
]

ROW_GROUP_ROWS: Final = 65_536

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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
