"""What a dataset has imported: source file identity and content hash → the run holding its events.

``promcp import`` asks this index, never the runs, whether a file is new, unchanged (same path, size and
modification time: not even read), a copy of content already imported (same SHA-256 under any name) or a changed
version of a file imported before (its earlier rows are replaced). The cost of that question is one dictionary
lookup and at most two ``stat`` calls, whatever the number of runs in the dataset.

Layout: ``DIR/_imports/index.jsonl``, append-only, one JSON object a line, written with one ``os.write`` on an
``O_APPEND`` descriptor per batch and fsync'd (a torn last line from a crash is ignored when read):

* ``{"path", "size", "mtime_ns", "sha256", "run_id", "topology", "format", "conversations"}`` — a file imported
  (or recognised as a copy: then ``conversations`` is empty); the last line of a path wins;
* ``{"gone": run_id, "sha256": h | null}`` — rows of that content (or, with ``sha256`` null, the whole run) were
  removed: entries that pointed there no longer count.

Entries are written once their run's journal is complete and fsync'd, before it is finalized: a crash mid-import
leaves either no entry (the file is imported again) or an entry whose run exists (as Parquet, or as a journal that
readers read in place and ``promcp finalize`` completes). A run deleted by hand is noticed on the lookup
(its file is gone) and the file is imported again. Datasets from before the index get one built once from the runs'
``input_sha256`` metadata (the only time the runs are scanned).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from promcp.store.files import make_dirs, open_private, storage_error
from promcp.store.journal import JOURNAL_DIR, JOURNAL_SUFFIX, _fsync_dir

INDEX_DIR: Final = "_imports"
INDEX_FILE: Final = "index.jsonl"


class Entry(msgspec.Struct, omit_defaults=True):
    """One imported source file: where it was, what it held, and which run got its events."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    #: the run holding its events ("" when it gave none: every conversation filtered out, traces only)
    run_id: str = ""
    topology: str = "c-ots"
    format: str = ""
    #: conversation ids it gave (rows whose task_id is ``<id>#<n>``); empty for a copy of other content
    conversations: list[str] = msgspec.field(default_factory=list)


class Gone(msgspec.Struct):
    gone: str
    sha256: str | None = None


_decode_entry = msgspec.json.Decoder(Entry)
_decode_gone = msgspec.json.Decoder(Gone)


def _decode_line(line: bytes) -> Entry | Gone:
    return _decode_gone.decode(line) if line.startswith(b'{"gone"') else _decode_entry.decode(line)


_encode = msgspec.json.Encoder()


def index_path(root: Path) -> Path:
    return root / INDEX_DIR / INDEX_FILE


@dataclass
class ImportIndex:
    """The index of the dataset ``root``, read once (:meth:`open`); lookups are in memory."""

    root: Path
    by_path: dict[str, Entry] = field(default_factory=dict)
    by_hash: dict[str, Entry] = field(default_factory=dict)
    #: run id → paths whose current entry points into it
    by_run: dict[str, set[str]] = field(default_factory=dict)
    _alive: dict[str, bool] = field(default_factory=dict)
    _packed_ids: set[str] | None = None

    @classmethod
    def open(cls, root: Path) -> ImportIndex:
        """The index of ``root`` (built once from the runs' metadata when the dataset predates it)."""
        index = cls(root)
        path = index_path(root)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            index._migrate()
            return index
        except OSError as exc:
            raise storage_error(exc, path, f"cannot read the import index {path}: {{reason}}") from None
        for line in data.splitlines():
            try:
                index._apply(_decode_line(line))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # a torn last line (killed mid-write) or a foreign line: not an entry
        return index

    def _apply(self, item: Entry | Gone) -> None:
        if isinstance(item, Gone):
            self._alive.pop(item.gone, None)
            if item.sha256 is None and self._packed_ids is not None:
                self._packed_ids.discard(item.gone)
            for p in list(self.by_run.get(item.gone, ())):
                entry = self.by_path.get(p)
                if entry is not None and (item.sha256 is None or entry.sha256 == item.sha256):
                    self._drop(entry)
            for digest, entry in list(self.by_hash.items()):
                if entry.run_id == item.gone and (item.sha256 is None or digest == item.sha256):
                    del self.by_hash[digest]
            return
        old = self.by_path.get(item.path)
        if old is not None:
            self._drop(old)
        self.by_path[item.path] = item
        self.by_run.setdefault(item.run_id, set()).add(item.path)
        if item.conversations or item.sha256 not in self.by_hash:
            self.by_hash[item.sha256] = item

    def _drop(self, entry: Entry) -> None:
        if self.by_path.get(entry.path) is entry:
            del self.by_path[entry.path]
        paths = self.by_run.get(entry.run_id)
        if paths is not None:
            paths.discard(entry.path)
            if not paths:
                del self.by_run[entry.run_id]
        if self.by_hash.get(entry.sha256) is entry:
            del self.by_hash[entry.sha256]

    def _migrate(self) -> None:
        """Entries for the runs ``promcp import`` wrote before the index existed (content hash only)."""
        if not self.root.is_dir():
            return
        from promcp.store.runs import list_runs  # reads every run's schema: once, for an old dataset

        items: list[Entry | Gone] = []
        for run in list_runs(self.root):
            digest = run.meta.get("input_sha256")
            if isinstance(digest, str) and run.source and run.source.startswith("import:"):
                items.append(
                    Entry(
                        path=f"(before the index) {run.meta.get('input', run.run_id)}#{run.run_id}",
                        size=-1,
                        mtime_ns=-1,
                        sha256=digest,
                        run_id=run.run_id,
                        format=str(run.meta.get("format", "")),
                    )
                )
        self.append(items, create=True)  # even empty: the runs are scanned once, not on every import

    def alive(self, entry: Entry) -> bool:
        """Whether the run ``entry`` points to still exists (its Parquet file or its journal)."""
        if not entry.run_id:
            return True
        known = self._alive.get(entry.run_id)
        if known is None:
            run_dir = self.root / f"topology={entry.topology}" / f"run_id={entry.run_id}"
            known = (run_dir / "events.parquet").exists() or (
                self.root / JOURNAL_DIR / f"{entry.run_id}{JOURNAL_SUFFIX}"
            ).exists()
            if not known:  # moved into a pack by `promcp compact`: one footer read per pack, once
                known = entry.run_id in self._packed()
            self._alive[entry.run_id] = known
        return known

    def _packed(self) -> set[str]:
        if self._packed_ids is None:
            if any(self.root.glob("topology=*/pack-*.parquet")):
                from promcp.store.packs import packed_run_ids  # pyarrow: only for a compacted dataset

                self._packed_ids = set(packed_run_ids(self.root))
            else:
                self._packed_ids = set()
        return self._packed_ids

    def unchanged(self, path: str, size: int, mtime_ns: int) -> Entry | None:
        """The entry of ``path`` if the file still has the size and modification time it was imported with."""
        entry = self.by_path.get(path)
        if entry is not None and entry.size == size and entry.mtime_ns == mtime_ns and self.alive(entry):
            return entry
        return None

    def holding(self, sha256: str) -> Entry | None:
        """The entry whose run holds this content, if that run still exists."""
        entry = self.by_hash.get(sha256)
        return entry if entry is not None and self.alive(entry) else None

    def previous(self, path: str) -> Entry | None:
        """The last entry of ``path`` (whatever its content), if its run still exists."""
        entry = self.by_path.get(path)
        return entry if entry is not None and self.alive(entry) else None

    def sharing(self, entry: Entry) -> set[str]:
        """Paths other than ``entry``'s whose current entries point into the same run."""
        return {p for p in self.by_run.get(entry.run_id, ()) if p != entry.path}

    def append(self, items: list[Entry | Gone], *, create: bool = False) -> None:
        """Record ``items`` durably (one write, fsync), then apply them in memory."""
        if not items and not create:
            return
        path = index_path(self.root)
        payload = b"".join(_encode.encode(item) + b"\n" for item in items)
        try:
            make_dirs(path.parent)
            fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise storage_error(exc, path, f"cannot write the import index {path}: {{reason}}") from None
        with contextlib.suppress(OSError):
            _fsync_dir(path.parent)
        for item in items:
            self._apply(item)
        for item in items:
            if isinstance(item, Entry) and item.run_id:
                self._alive[item.run_id] = True
