"""Load promcp traces into pandas (and Arrow) for notebooks and tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from promcp.analysis.scanned import ParquetEvents, RunRef
from promcp.events import Event
from promcp.store.discovery import content_files, discover, journal_blobs
from promcp.store.parquet import ARROW_SCHEMA, CONTENT_SCHEMA, RunFile, content_table, current_content

if TYPE_CHECKING:  # imported when a frame is made: scanning a dataset needs no pandas
    import pandas as pd


def _link(events: Sequence[Event]) -> list[Event]:
    """The join of a run recorded by several processes (the stage rule, :mod:`promcp.stages.link`), loaded only
    when such a run is read: a plain report does not import the stage builders."""
    from promcp.stages.link import link_tool_calls

    return link_tool_calls(events)


def _unify(table: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    """Bring a run file's table to the current schema: missing columns (older writers) become nulls."""
    wanted = ARROW_SCHEMA if columns is None else pa.schema([ARROW_SCHEMA.field(c) for c in columns])
    arrays = []
    for field in wanted:
        if field.name in table.column_names:
            arrays.append(table.column(field.name).cast(field.type))
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=wanted)


def _read(run: RunFile, columns: Sequence[str] | None) -> pa.Table:
    if run.table is not None:  # a journal read in place
        return _unify(run.table, columns)
    present = pq.read_schema(run.path).names
    read_cols = [c for c in (columns or ARROW_SCHEMA.names) if c in present]
    return _unify(pq.read_table(run.path, columns=read_cols), columns)


def _tables(runs: Sequence[RunFile], columns: Sequence[str] | None) -> pa.Table:
    if columns is not None:
        unknown = [c for c in columns if c not in ARROW_SCHEMA.names]
        if unknown:
            raise KeyError(f"unknown event columns: {', '.join(unknown)}")
    read: set[Path] = set()
    tables = []
    for run in runs:
        if run.packed:  # a pack holds several runs: read once
            if run.path in read:
                continue
            read.add(run.path)
        tables.append(_read(run, columns))
    return pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()


def load_table(path: str | Path, columns: Sequence[str] | None = None) -> pa.Table:
    """All events under ``path`` as one Arrow table (only ``columns`` if given).

    ``path`` may be a dataset directory, a run directory, an ``events.parquet`` file or a journal. Reading never
    writes: journals left by a crashed run are read in place (``promcp finalize`` turns them into Parquet files).
    Unusable files are skipped with a warning logged (``promcp.store.discovery``) naming them.
    """
    return _tables(discover(Path(path), link=_link), columns)


def scan(path: str | Path) -> ParquetEvents | pa.Table:
    """The run files under ``path``, validated (schema version, promcp metadata) but not loaded.

    Pass the result to any table function: DuckDB then reads only the columns each query needs, on every core.
    When the dataset still holds journals (a crashed run, not finalized), they are read in place and everything is
    returned as one Arrow table instead (``promcp finalize DIR`` makes the dataset scannable again).
    """
    runs = discover(Path(path), link=_link)
    if any(run.from_journal for run in runs):
        return _tables(runs, None)
    names: dict[str, None] = {}
    for path in dict.fromkeys(run.path for run in runs):
        names.update(dict.fromkeys(pq.read_schema(path).names))
    refs = tuple(
        RunRef(
            run_id=str(run.run.get("run_id") or run.path.parent.name.removeprefix("run_id=")),
            path=run.path,
            created_ns=run.run.get("created_ns"),
            topology=run.run.get("topology"),
            dry_run=_dry_run(run.run),
        )
        for run in runs
    )
    files = tuple(dict.fromkeys(run.path for run in runs))  # a pack holds several runs
    return ParquetEvents(files=files, column_names=tuple(names), runs=refs)


def _dry_run(header: dict[str, Any]) -> bool:
    meta = header.get("meta")
    return isinstance(meta, dict) and meta.get("dry_run") is True


def attrs_of(value: Any) -> dict[str, Any]:
    """An event's ``attrs`` as a dict (the column holds a JSON object as text); empty when missing or not an
    object."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


@cache
def _nullable_ints() -> dict[pa.DataType, pd.api.extensions.ExtensionDtype]:
    """Arrow integer type → pandas nullable integer dtype (a missing token count stays missing, the column stays
    int)."""
    import pandas as pd

    return {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
    }


def _types_mapper(typ: pa.DataType) -> pd.api.extensions.ExtensionDtype | None:
    # nested columns (parts) stay Arrow-backed: no Python object per row
    if pa.types.is_list(typ) or pa.types.is_struct(typ):
        import pandas as pd

        return pd.ArrowDtype(typ)
    return _nullable_ints().get(typ)


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow events → pandas: integer columns (``round``, ``seq``, token counts, ``t_*_ns``) as nullable integers
    (``Int64``: a missing count is ``<NA>``, not a float NaN), dictionary columns as categoricals, ``parts``
    Arrow-backed, ``attrs`` as the JSON text it is stored as (``json.loads(df["attrs"][i])``; not pandas'
    own ``df.attrs`` metadata)."""
    return table.to_pandas(types_mapper=_types_mapper, split_blocks=True)


def load(path: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Events under ``path`` as a pandas DataFrame, one row per event (see docs/events.md for the columns).

    >>> import promcp.analysis as pa
    >>> df = pa.load("examples/default-run")
    >>> df.groupby(["topology", "phase"], observed=True)["tokens_in"].sum()
    """
    return to_frame(load_table(path, columns))


def _content_file(path: Path) -> pa.Table:
    """One ``_content`` file at the current schema."""
    return current_content(pq.read_table(path))


def load_content(path: str | Path) -> pd.DataFrame:
    """Captured content (tool schemas, results, prompts) of the dataset ``path`` belongs to.

    Columns: ``hash`` (of the original text), ``kind``, ``text`` (as stored), ``mode`` (``full`` or ``redacted``),
    ``original_bytes``, ``truncated``. Journals not finalized yet are read in place.
    """
    p = Path(path)
    tables = [_content_file(f) for f in content_files(p)]
    blobs = journal_blobs(p)
    if blobs:
        tables.append(content_table(blobs))
    if not tables:
        return CONTENT_SCHEMA.empty_table().to_pandas()
    table = pa.concat_tables(tables).unify_dictionaries()
    return table.to_pandas().drop_duplicates("hash", ignore_index=True)
