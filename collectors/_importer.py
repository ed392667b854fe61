"""The import driver: paths → conversations (streamed) → events → batched runs, with an index of what was imported.

Many input files go into one run (a new run every :data:`BATCH_EVENTS` events, so finalizing stays bounded);
conversations stay addressable by their task ids (``<conversation>#<n>``). What a dataset has imported is kept in
its import index (promcp/store/import_index.py): a file unchanged since its import is not even read, a copy of
imported content is skipped, a changed file (a Claude Code session that grew) is imported again and its earlier
rows are removed from the run that held them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promcp import tokenizers
from promcp.collectors._build import Builder
from promcp.collectors._detect import detect_format
from promcp.collectors._formats import FORMATS, ReadContext, bug, parse_guarded
from promcp.collectors._model import Conversation
from promcp.collectors._problems import INTERNAL, Problems
from promcp.collectors._stream import SanitizedReader, to_ns
from promcp.content import DEFAULT_MAX_CONTENT_BYTES
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ImportFormatError
from promcp.events import Event, Topology

if TYPE_CHECKING:
    from promcp.recorder import Recorder
    from promcp.store.import_index import Entry, Gone, ImportIndex

__all__ = ["BATCH_EVENTS", "ImportSummary", "events_of", "import_path", "parse_guarded", "parse_path"]

#: progress(bytes read so far, conversations seen so far)
Progress = Callable[[int, int], None]

#: files up to this size are read once (hashed, then parsed from memory); larger ones are streamed twice
READ_ONCE_BYTES = 16 << 20

#: a run takes the events of many input files, up to this many (finalizing holds one run in memory)
BATCH_EVENTS = 100_000


@dataclass
class ImportSummary:
    """What one ``import_path`` did."""

    path: Path
    format: str
    imported: int = 0
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    tasks: int = 0
    events: int = 0
    bytes: int = 0
    problems: Problems = field(default_factory=Problems)
    datasets: list[Path] = field(default_factory=list)
    #: input files read (parsed)
    files: int = 0
    #: input files not read: same path, size and modification time as when they were imported
    unchanged: int = 0
    #: (input file name, run id): files skipped because that run already holds the same content
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    #: input files imported again because they changed since (their earlier rows were replaced)
    changed: list[str] = field(default_factory=list)
    #: run ids whose rows were removed or rewritten because their input was imported again
    replaced: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1


def input_files(path: Path, fmt: str) -> list[Path]:
    """The files one import reads: the path itself, or every file of the format below a folder (subagents too)."""
    if path.is_dir():
        suffixes = FORMATS[fmt].folder_suffixes
        if not suffixes:
            folder_formats = [f.name for f in FORMATS.values() if f.folder_suffixes]
            raise ImportFormatError(f"{path}: a folder can only be imported as {' or '.join(folder_formats)}")
        return sorted(p for s in suffixes for p in path.rglob(f"*{s}") if p.is_file())
    return [path]


def _file_conversations(
    file: Path,
    fmt: str,
    problems: Problems,
    progress: Progress | None,
    done: list[int],
    on_spans: Callable[[Any, int], None] | None = None,
    data: bytes | None = None,
) -> Iterator[Conversation]:
    """The conversations of one file; ``data``: its bytes when the caller already read them (small files)."""
    base = done[0]
    problems.file = file.name

    def on_bytes(n: int) -> None:
        done[0] += n

    def seen() -> None:
        done[1] += 1
        if progress:
            progress(done[0], done[1])

    with io.BytesIO(data) if data is not None else file.open("rb") as raw:
        reader = SanitizedReader(raw, problems, file.name, on_bytes)
        yield from FORMATS[fmt].read(ReadContext(file, reader, problems, seen, on_spans))
    done[0] = max(done[0], base)


def build_guarded(builder: Builder, conv: Conversation, problems: Problems) -> list[Event] | None:
    """The events of one conversation, or None (reported as ``internal_error``) when they cannot be built."""
    try:
        return list(builder.events(conv))
    except Exception as exc:  # the boundary, as in parse_guarded
        problems.add(INTERNAL, bug("events could not be built", exc), conversation=conv.id)
        return None


def parse_path(
    path: str | Path,
    fmt: str | None = None,
    *,
    problems: Problems | None = None,
    progress: Progress | None = None,
) -> Iterator[Conversation]:
    """The normalized conversations of an export, streamed (no events, no recorder)."""
    p = Path(path)
    fmt = _check(p, fmt)
    probs = problems if problems is not None else Problems()
    done = [0, 0]
    for file in input_files(p, fmt):
        yield from _file_conversations(file, fmt, probs, progress, done)


def _check(p: Path, fmt: str | None) -> str:
    if not p.exists():
        from promcp.store.files import missing_reason

        raise ImportFormatError(f"{p}: {missing_reason(p)}")
    fmt = fmt or detect_format(p)
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def parse_since(value: str | None) -> int | None:
    """``--since`` (ISO date or date-time, UTC when no zone) → ns."""
    if value is None:
        return None
    text = value if "T" in value else value + "T00:00:00"
    if not (text.endswith(("Z", "z")) or "+" in text[10:] or text[10:].count("-") > 0):
        text += "Z"
    ns = to_ns(text)
    if ns is None:
        raise ImportFormatError(f"--since {value!r} is not an ISO date or date-time (e.g. 2026-01-31)")
    return ns


def _when(conv: Conversation) -> int:
    first = next((t.at for t in conv.tasks if t.at is not None), None)
    return conv.updated or conv.created or first or 0


def import_path(
    path: str | Path,
    out: str | Path | None = None,
    *,
    fmt: str | None = None,
    tokenizer: str | None = None,
    since: str | None = None,
    conversation: str | None = None,
    progress: Progress | None = None,
    sink: Callable[[Event], Any] | None = None,
    content: str = "redacted",
    max_content_bytes: int | None = DEFAULT_MAX_CONTENT_BYTES,
    replace: bool = False,
    batch_events: int = BATCH_EVENTS,
) -> ImportSummary:
    """Import an export (a file or a folder) into the dataset ``out`` and return what happened.

    The events of many files share a run (a new one after ``batch_events`` events). ``since`` keeps conversations
    updated at or after it; ``conversation`` keeps one id. ``content`` and ``max_content_bytes`` say how the texts
    behind the counts are stored (see :class:`~promcp.recorder.Recorder`). With ``sink`` the events go there
    instead of a dataset (tests, notebooks; no index). Otherwise the dataset's import index decides per file
    (promcp/store/import_index.py): unchanged since imported → not read (``summary.unchanged``); content already
    held → skipped (``summary.duplicates``), or with ``replace`` imported again and the earlier rows removed;
    changed → imported again and its earlier rows removed (``summary.changed``).
    """
    p = Path(path)
    fmt = _check(p, fmt)
    since_ns = parse_since(since)
    spec = FORMATS[fmt]
    tok = tokenizers.get(tokenizer or spec.tokenizer)
    summary = ImportSummary(path=p, format=fmt)
    if sink is None and out is None:
        raise ImportFormatError("import_path needs an output directory or a sink")
    root = Path(out) if out is not None else Path()
    batch = (
        None
        if sink is not None
        else _Batch(root, summary, fmt, tok.name, p.name, content, max_content_bytes, batch_events)
    )
    done = [0, 0]
    try:
        for file in input_files(p, fmt):
            if batch is not None and not batch.wants(file, replace, done, progress):
                continue
            recorder = batch.recorder() if batch is not None else None
            builder = Builder(tok, provider=spec.provider, put_text=recorder.put_text if recorder else None)
            spans = _SpanImport(root, summary, sink, content, max_content_bytes) if fmt == "otlp" else None
            convs: list[str] = []
            events_before = summary.events
            summary.files += 1
            try:
                for conv in _file_conversations(
                    file,
                    fmt,
                    summary.problems,
                    progress,
                    done,
                    spans.request if spans else None,
                    batch.take_data() if batch is not None else None,
                ):
                    if conversation is not None and conv.id != conversation:
                        summary.skip("not the requested --conversation")
                        continue
                    if since_ns is not None and _when(conv) < since_ns:
                        summary.skip("older than --since")
                        continue
                    if not conv.tasks:
                        summary.skip("no user prompt or reply on the active branch")
                        continue
                    events = build_guarded(builder, conv, summary.problems)
                    if events is None:
                        summary.skip("events could not be built (internal error)")
                        continue
                    if recorder is not None:
                        recorder.emit_many(events)  # one journal write per conversation
                    else:
                        assert sink is not None
                        for event in events:
                            sink(event)
                    convs.append(conv.id)
                    summary.events += len(events)
                    summary.tasks += len({e.task_id for e in events})
                    summary.imported += 1
            finally:
                if spans is not None:
                    summary.datasets.extend(spans.close())
            if batch is not None:
                batch.imported(file, convs, summary.events > events_before)
    except BaseException:
        if batch is not None:
            batch.abort()
        raise
    if batch is not None:
        batch.close()
        _keep_packed(root, summary)
    summary.bytes = done[0]
    unparsed = sum(
        1 for x in summary.problems.items if x.kind in ("skipped", INTERNAL) and "not parsed" in x.message
    )
    if unparsed:
        summary.skipped += unparsed
        summary.skip_reasons["not a valid conversation object"] = unparsed
    return summary


def _keep_packed(root: Path, summary: ImportSummary) -> None:
    """A compacted dataset (``promcp compact``) stays packs only: the runs just written join a pack, so plain
    Parquet readers keep seeing one layout (DuckDB's Hive reading refuses a mix of ``run_id=`` folders and packs).
    Left as run files while another process still writes the dataset (the next compact packs them)."""
    if not summary.datasets or not any(root.glob("topology=*/pack-*.parquet")):
        return
    from promcp.store.packs import compact, pending_writes

    if pending_writes(root):
        return
    packed = compact(root).packs
    if packed:
        summary.datasets = packed


class _Batch:
    """The run the imported files go into (a new one every ``limit`` events) and the index entries they make."""

    def __init__(
        self,
        root: Path,
        summary: ImportSummary,
        fmt: str,
        tokenizer: str,
        input_name: str,
        content: str,
        max_content_bytes: int | None,
        limit: int,
    ) -> None:
        from promcp.store.import_index import ImportIndex

        self.root = root
        self.summary = summary
        self.fmt = fmt
        self.meta = {"input": input_name, "format": fmt, "tokenizer": tokenizer}
        self.content = content
        self.max_content_bytes = max_content_bytes
        self.limit = max(1, limit)
        self.index: ImportIndex = ImportIndex.open(root)
        self.run: Recorder | None = None
        #: index lines waiting for the current run to be in place
        self.entries: list[Entry | Gone] = []
        #: earlier entries whose rows go once the current run is in place
        self.superseded: list[Entry] = []
        #: path, size, mtime_ns and SHA-256 of the file being read
        self.file: tuple[str, int, int, str] | None = None
        self.data: bytes | None = None  # its bytes, when small enough to be read once

    def wants(self, file: Path, replace: bool, done: list[int], progress: Progress | None) -> bool:
        """Whether ``file`` must be read (noting why not in the summary when it need not)."""
        from promcp.store.import_index import Entry

        try:
            st = file.stat()
        except OSError as exc:
            raise ImportFormatError(f"{file}: cannot read: {exc.strerror or exc}") from None
        key = os.path.abspath(file)
        if not replace and self.index.unchanged(key, st.st_size, st.st_mtime_ns) is not None:
            self.summary.unchanged += 1
            self._skipped_bytes(st.st_size, done, progress)
            return False
        if st.st_size <= READ_ONCE_BYTES:  # read once: hashed here, parsed from memory
            try:
                self.data = file.read_bytes()
            except OSError as exc:
                raise ImportFormatError(f"{file}: cannot read: {exc.strerror or exc}") from None
            digest = hashlib.sha256(self.data).hexdigest()
        else:
            self.data = None
            digest = file_digest(file)
        holder = self.index.holding(digest)
        if holder is not None and not replace:
            if (
                holder.path != key
            ):  # a copy under another name: remembered, so it is not even hashed next time
                copy = Entry(
                    key, st.st_size, st.st_mtime_ns, digest, holder.run_id, holder.topology, self.fmt
                )
                self.entries.append(copy)
                self.summary.duplicates.append((file.name, holder.run_id))
            else:  # touched, same bytes: unchanged, remembered with its new time
                self.entries.append(
                    Entry(
                        key,
                        st.st_size,
                        st.st_mtime_ns,
                        digest,
                        holder.run_id,
                        holder.topology,
                        self.fmt,
                        holder.conversations,
                    )
                )
                self.summary.unchanged += 1
            self.data = None
            self._skipped_bytes(st.st_size, done, progress)
            return False
        previous = self.index.previous(key)
        if previous is not None and previous.sha256 != digest:
            self.superseded.append(previous)
            self.summary.changed.append(file.name)
        elif holder is not None:  # --replace: the same content again
            self.superseded.append(holder)
        self.file = (key, st.st_size, st.st_mtime_ns, digest)
        return True

    def take_data(self) -> bytes | None:
        data, self.data = self.data, None
        return data

    def _skipped_bytes(self, size: int, done: list[int], progress: Progress | None) -> None:
        done[0] += size
        if progress:
            progress(done[0], done[1])

    def recorder(self) -> Recorder:
        if self.run is None:
            from promcp.recorder import Recorder

            self.run = Recorder(
                self.root,
                topology=Topology.C_OTS,
                source=f"import:{self.fmt}",
                meta=self.meta,
                # the input files are the durable copy until the run is finalized (fsync'd then); a crash before
                # leaves no index entry, so the next import reads those files again
                fsync="never",
                content=self.content,
                max_content_bytes=self.max_content_bytes,
            )
        return self.run

    def imported(self, file: Path, conversations: list[str], got_events: bool) -> None:
        """``file`` was read: its entry waits for the run; a full run is closed."""
        from promcp.store.import_index import Entry

        assert self.file is not None
        key, size, mtime_ns, digest = self.file
        run_id = self.run.run_id if self.run is not None and got_events else ""
        self.entries.append(Entry(key, size, mtime_ns, digest, run_id, "c-ots", self.fmt, conversations))
        self.file = None
        if self.run is not None and self.run.events >= self.limit:
            self._close_run()

    def _close_run(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            if run.events:
                from promcp.stages.link import link_tool_calls
                from promcp.store.finalization import finalize

                run.close(finalize_run=False)  # the journal is fsync'd and closed
                # the entries point at the run, its journal until finalized: a finalize the disk refuses leaves
                # a journal the index knows (`promcp finalize` completes it; importing again does not double it)
                self.index.append(self.entries)
                self.entries = []
                self.summary.datasets.append(finalize(run.journal_path, link=link_tool_calls))
            else:
                run.discard()  # nothing from these files (filtered, or traces only: written by _SpanImport)
        self._commit_entries()

    def _commit_entries(self) -> None:
        """The run is in place: record its entries (if not yet), then remove the rows they replace."""
        from promcp.store.import_index import Gone
        from promcp.store.runs import RunInfo, drop_conversations, remove_run

        self.index.append(self.entries)
        self.entries = []
        gone: list[Entry | Gone] = []
        for old in self.superseded:
            if not old.run_id:
                continue
            if old.conversations:
                left = drop_conversations(self.root, old.topology, old.run_id, set(old.conversations))
                gone.append(Gone(old.run_id, None if left == 0 else old.sha256))
            elif old.size == -1:  # a run from before the index: one run per input file
                run_dir = self.root / f"topology={old.topology}" / f"run_id={old.run_id}"
                from promcp.store.layout import existing_content

                content = existing_content(self.root, old.run_id)
                files = [run_dir / "events.parquet", *([content] if content is not None else [])]
                remove_run(self.root, RunInfo(old.run_id, None, {}, files))
                gone.append(Gone(old.run_id, None))
            else:  # a copy of content another file brought: nothing of its own to remove
                continue
            if old.run_id not in self.summary.replaced:
                self.summary.replaced.append(old.run_id)
        self.superseded = []
        self.index.append(gone)

    def close(self) -> None:
        self._close_run()

    def abort(self) -> None:
        """An error stopped the import: the files read completely stay in the run's journal, which is left for
        ``promcp finalize`` (as the error says) and recorded in the index; the error itself is what the user sees."""
        run, self.run = self.run, None
        with contextlib.suppress(Exception):
            if run is not None:  # kept even without events: the lines before the error (content) stay
                run.close(finalize_run=False)
            self._commit_entries()


class _SpanImport:
    """The trace requests of an OTLP file: into the collector's runs (collectors/otlp_runs.py), or ``sink``."""

    def __init__(
        self,
        root: Path,
        summary: ImportSummary,
        sink: Callable[[Event], Any] | None,
        content: str,
        max_content_bytes: int | None,
    ) -> None:
        from promcp.collectors.otlp_runs import OtlpRuns
        from promcp.collectors.otlp_spans import SpanMapper

        self.summary = summary
        self.emit: Callable[[Event], Any] = sink or (lambda _event: None)
        self.runs = None if sink else OtlpRuns(root, content=content, max_content_bytes=max_content_bytes)
        self.mapper = SpanMapper(tokenizers.get(DEFAULT_TOKENIZER))
        self.tasks: set[str | None] = set()  # the tasks (traces) that got events

    def request(self, request: Any, line: int) -> None:
        from promcp.collectors import otlp_spans

        def problem(exc: Exception) -> None:
            self.summary.problems.add("bad_span", str(exc), line=line)

        spans = otlp_spans.span_records(request)
        for resource, rows, mapped in otlp_spans.request_batches(spans, self.mapper, problem):
            events = rows.rows if rows else mapped
            if self.runs is not None:
                written = self.runs.carried(rows) if rows else self.runs.mapped(resource, events)
            else:
                for event in events:
                    self.emit(event)
                written = len(events)
            self.summary.events += written
            if written:
                self.tasks.update(e.task_id for e in events)

    def close(self) -> list[Path]:
        self.summary.tasks += len(self.tasks)
        if self.runs is None:
            return []
        written = self.runs.close()
        if self.runs.duplicates:
            self.summary.skip_reasons["span events already in the dataset"] = self.runs.duplicates
        return written


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (read 1 MiB at a time)."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return h.hexdigest()


def events_of(path: str | Path, fmt: str | None = None, tokenizer: str | None = None) -> list[Event]:
    """Every event an export turns into, in memory (tests, notebooks)."""
    events: list[Event] = []
    import_path(path, fmt=fmt, tokenizer=tokenizer, sink=events.append)
    return events
