"""The import driver: path → conversations (streamed) → events → one promcp run per input file."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp import tokenizers
from promcp.collectors import chatgpt, claude_ai, claude_code, gemini_cli
from promcp.collectors._build import Builder
from promcp.collectors._detect import FORMATS, detect_format
from promcp.collectors._model import Conversation
from promcp.collectors._problems import INTERNAL, Problems, ShapeError
from promcp.collectors._stream import SanitizedReader, as_text, iter_array, iter_jsonl, to_ns
from promcp.content import DEFAULT_MAX_CONTENT_BYTES
from promcp.errors import ImportFormatError
from promcp.events import Event, Topology

#: progress(bytes read so far, conversations seen so far)
Progress = Callable[[int, int], None]


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
    #: (input file name, run id): files skipped because that run already holds the same content
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    #: run ids removed by ``replace`` (the same content imported again)
    replaced: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1


def input_files(path: Path, fmt: str) -> list[Path]:
    """The files one import reads: the path itself, or every session ``*.jsonl`` below a folder (subagents too)."""
    if path.is_dir():
        if fmt != "claude-code":
            raise ImportFormatError(f"{path}: a folder can only be imported as claude-code")
        return sorted(p for p in path.rglob("*.jsonl") if p.is_file())
    return [path]


def _otlp_conversations(
    reader: Any,
    problems: Problems,
    progress: Progress | None,
    done: list[int],
    on_spans: Callable[[Any, int], None] | None = None,
) -> Iterator[Conversation]:
    """A Collector ``file`` exporter output: one OTLP JSON export request per line (collectors/otlp.py). Trace
    requests go to ``on_spans(request, line)`` (they are not conversations: collectors/otlp_runs.py)."""
    from promcp.collectors import otlp

    sessions = otlp.ClaudeCodeSessions()
    for number, doc in iter_jsonl(reader, problems):
        done[1] += 1
        try:
            requests = list(otlp.file_requests(doc))
        except ImportFormatError as exc:
            problems.add("bad_line", f"not an OTLP export request: {exc}", line=number)
            continue
        for kind, request in requests:
            if kind == "logs":
                for record in otlp.log_records(request):
                    yield from sessions.add(record)
            elif kind == "traces" and on_spans is not None:
                on_spans(request, number)
        if progress:
            progress(done[0], done[1])
    yield from sessions.flush()


def _file_conversations(
    file: Path,
    fmt: str,
    problems: Problems,
    progress: Progress | None,
    done: list[int],
    on_spans: Callable[[Any, int], None] | None = None,
) -> Iterator[Conversation]:
    base = done[0]
    problems.file = file.name

    def on_bytes(n: int) -> None:
        done[0] += n

    with file.open("rb") as raw:
        reader = SanitizedReader(raw, problems, file.name, on_bytes)
        if fmt == "otlp":
            yield from _otlp_conversations(reader, problems, progress, done, on_spans)
            return
        if fmt == "gemini-cli":  # collectors/gemini_cli.py
            yield from _counted(gemini_cli.parse_file(reader, problems, file), progress, done)
            return
        if fmt == "claude-code":
            conv = claude_code.parse_session(iter_jsonl(reader, problems), problems, file)
            done[1] += 1
            if progress:
                progress(done[0], done[1])
            yield conv
            return
        parse = claude_ai.parse_conversation if fmt == "claude-ai" else chatgpt.parse_conversation
        jsonl = file.suffix == ".jsonl"
        items: Iterator[Any] = (
            (v for _, v in iter_jsonl(reader, problems)) if jsonl else iter_array(reader, problems)
        )
        for index, doc in enumerate(items):
            done[1] += 1
            offset = None if jsonl else reader.consumed
            line = reader.line if jsonl else None
            parsed = parse_guarded(parse, doc, problems, index, offset, line)
            if parsed is not None:
                yield parsed
            if progress:
                progress(done[0], done[1])
    done[0] = max(done[0], base)


def _counted(
    convs: Iterator[Conversation], progress: Progress | None, done: list[int]
) -> Iterator[Conversation]:
    for conv in convs:
        done[1] += 1
        if progress:
            progress(done[0], done[1])
        yield conv


def parse_guarded(
    parse: Callable[[Any, Problems, int, int | None], Conversation],
    doc: Any,
    problems: Problems,
    index: int,
    offset: int | None,
    line: int | None = None,
) -> Conversation | None:
    """Parse one conversation; a shape the parser refuses is reported (``skipped``, with where) and skipped.

    Any other exception is a bug in a parser, not bad input: it is reported as ``internal_error`` (asking for a
    report) and the other conversations still import.
    """
    try:
        return parse(doc, problems, index, offset)
    except ShapeError as exc:
        kind, message = "skipped", f"conversation {index} not parsed: {exc}"
    except Exception as exc:  # the boundary: one odd conversation never costs the others
        kind, message = INTERNAL, _bug(f"conversation {index} not parsed", exc)
    cid = (doc.get("uuid") or doc.get("conversation_id") or doc.get("id")) if isinstance(doc, dict) else None
    problems.add(kind, message, conversation=as_text(cid) or f"#{index}", offset=offset, line=line)
    return None


def build_guarded(builder: Builder, conv: Conversation, problems: Problems) -> list[Event] | None:
    """The events of one conversation, or None (reported as ``internal_error``) when they cannot be built."""
    try:
        return list(builder.events(conv))
    except Exception as exc:  # the boundary, as in parse_guarded
        problems.add(INTERNAL, _bug("events could not be built", exc), conversation=conv.id)
        return None


def _bug(what: str, exc: Exception) -> str:
    return f"{what} ({type(exc).__name__}: {exc}); this is a bug in promcp's importer, please report it"


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
) -> ImportSummary:
    """Import an export into the dataset ``out`` (one run per input file) and return what happened.

    ``since`` keeps conversations updated at or after it; ``conversation`` keeps one id. ``content`` and
    ``max_content_bytes`` say how the texts behind the counts are stored (see :class:`~promcp.recorder.Recorder`).
    With ``sink`` the events go there instead of a dataset (tests, notebooks). A file whose content (SHA-256) a run
    of ``out`` already holds is skipped (``summary.duplicates``); ``replace`` imports it again and then removes the
    earlier run.
    """
    # (the store brings pyarrow: imported here, so parsing alone stays light)
    from promcp.recorder import Recorder
    from promcp.store.runs import RunInfo, list_runs, remove_run

    p = Path(path)
    fmt = _check(p, fmt)
    since_ns = parse_since(since)
    default_tok, provider = FORMATS[fmt]
    tok = tokenizers.get(tokenizer or default_tok)
    summary = ImportSummary(path=p, format=fmt)
    done = [0, 0]
    root = Path(out) if out is not None else Path()
    if sink is None and out is None:
        raise ImportFormatError("import_path needs an output directory or a sink")
    for file in input_files(p, fmt):
        recorder = None
        emit = sink
        earlier: list[RunInfo] = []
        if emit is None:
            digest = file_digest(file)
            earlier = [r for r in list_runs(root) if r.meta.get("input_sha256") == digest]
            if earlier and not replace:
                summary.duplicates.append((file.name, earlier[0].run_id))
                continue
            recorder = Recorder(
                root,
                topology=Topology.C_OTS,
                source=f"import:{fmt}",
                meta={"input": file.name, "format": fmt, "tokenizer": tok.name, "input_sha256": digest},
                content=content,
                max_content_bytes=max_content_bytes,
            )
            emit = recorder.emit
        builder = Builder(tok, provider=provider, put_text=recorder.put_text if recorder else None)
        spans = _SpanImport(root, summary, sink, content, max_content_bytes) if fmt == "otlp" else None
        try:
            for conv in _file_conversations(
                file, fmt, summary.problems, progress, done, spans.request if spans else None
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
                for event in events:
                    emit(event)
                summary.events += len(events)
                summary.tasks += len({e.task_id for e in events})
                summary.imported += 1
        finally:
            if spans is not None:
                summary.datasets.extend(spans.close())
            if recorder is not None and fmt == "otlp" and not recorder.events:
                recorder.discard()  # traces only: their runs are written by _SpanImport
            elif recorder is not None:
                result = recorder.close()
                if result is not None:
                    summary.datasets.append(result)
        for run in earlier:  # the new run is safely in place: the one it replaces goes
            remove_run(root, run)
            summary.replaced.append(run.run_id)
    summary.bytes = done[0]
    unparsed = sum(
        1 for x in summary.problems.items if x.kind in ("skipped", INTERNAL) and "not parsed" in x.message
    )
    if unparsed:
        summary.skipped += unparsed
        summary.skip_reasons["not a valid conversation object"] = unparsed
    return summary


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
        self.mapper = SpanMapper(tokenizers.get("o200k_base"))
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
