"""The import formats: one :class:`ImportFormat` each, registered in :data:`FORMATS` (dispatch, detection, defaults).

Adding a format is one module plus one line (docs/import.md, "Adding a format"): the module holds a
``read(ctx) -> Iterator[Conversation]`` that parses one file from ``ctx.reader`` (a sanitized byte stream) and
calls ``ctx.seen()`` per conversation; the line is a ``register(ImportFormat(...))`` at the end of this file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.collectors import codex as _codex
from promcp.collectors._model import Conversation
from promcp.collectors._problems import INTERNAL, Problems, ShapeError
from promcp.collectors._stream import SanitizedReader, as_text, iter_array, iter_jsonl
from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ImportFormatError


@dataclass
class ReadContext:
    """What a format's reader gets for one file."""

    file: Path
    reader: SanitizedReader
    problems: Problems
    #: call once per conversation (or record) read: drives the progress display
    seen: Callable[[], None]
    #: OTLP trace requests go here (``request, line``); None when the caller does not want them
    on_spans: Callable[[Any, int], None] | None = None


@dataclass(frozen=True)
class ImportFormat:
    """One importable format."""

    name: str
    #: default tokenizer (``--tokenizer`` overrides) and the provider column of its events
    tokenizer: str
    provider: str
    #: ``ctx`` → the file's conversations, streamed
    read: Callable[[ReadContext], Iterator[Conversation]]
    #: does the first 64 KiB (whitespace removed, decoded) look like this format?
    sniff: Callable[[str], bool]
    #: the file suffixes a folder of this format holds (empty: folders are not this format)
    folder_suffixes: tuple[str, ...] = ()
    #: where the client keeps its files by default (``promcp import`` with no path reads the existing ones)
    locations: Callable[[], list[Path]] = field(default=lambda: [])


#: name → format, in detection order
FORMATS: dict[str, ImportFormat] = {}


def register(fmt: ImportFormat) -> ImportFormat:
    FORMATS[fmt.name] = fmt
    return fmt


def default_locations() -> list[tuple[str, Path]]:
    """(format, folder) for every registered format's default location that exists on this machine."""
    found: list[tuple[str, Path]] = []
    for fmt in FORMATS.values():
        for folder in fmt.locations():
            if folder.is_dir() and (fmt.name, folder) not in found:
                found.append((fmt.name, folder))
    return found


# -- built-in readers ---------------------------------------------------------------------------------------------


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
        kind, message = INTERNAL, bug(f"conversation {index} not parsed", exc)
    cid = (doc.get("uuid") or doc.get("conversation_id") or doc.get("id")) if isinstance(doc, dict) else None
    problems.add(kind, message, conversation=as_text(cid) or f"#{index}", offset=offset, line=line)
    return None


def bug(what: str, exc: Exception) -> str:
    return f"{what} ({type(exc).__name__}: {exc}); this is a bug in promcp's importer, please report it"


def _documents(
    parse: Callable[[Any, Problems, int, int | None], Conversation],
) -> Callable[[ReadContext], Iterator[Conversation]]:
    """A reader for a JSON array of conversations (streamed), or JSONL with one conversation a line."""

    def read(ctx: ReadContext) -> Iterator[Conversation]:
        reader, problems = ctx.reader, ctx.problems
        jsonl = ctx.file.suffix == ".jsonl"
        items: Iterator[Any] = (
            (v for _, v in iter_jsonl(reader, problems)) if jsonl else iter_array(reader, problems)
        )
        for index, doc in enumerate(items):
            offset = None if jsonl else reader.consumed
            line = reader.line if jsonl else None
            parsed = parse_guarded(parse, doc, problems, index, offset, line)
            if parsed is not None:
                yield parsed
            ctx.seen()

    return read


def _claude_code(ctx: ReadContext) -> Iterator[Conversation]:
    from promcp.collectors import claude_code

    conv = claude_code.parse_session(iter_jsonl(ctx.reader, ctx.problems), ctx.problems, ctx.file)
    ctx.seen()
    yield conv


def _otlp(ctx: ReadContext) -> Iterator[Conversation]:
    """A Collector ``file`` exporter output: one OTLP JSON export request per line (collectors/otlp.py). Trace
    requests go to ``ctx.on_spans(request, line)`` (they are not conversations: collectors/otlp_runs.py)."""
    from promcp.collectors import otlp

    sessions = otlp.ClaudeCodeSessions()
    for number, doc in iter_jsonl(ctx.reader, ctx.problems):
        try:
            requests = list(otlp.file_requests(doc))
        except ImportFormatError as exc:
            ctx.problems.add("bad_line", f"not an OTLP export request: {exc}", line=number)
            ctx.seen()
            continue
        for kind, request in requests:
            if kind == "logs":
                for record in otlp.log_records(request):
                    yield from sessions.add(record)
            elif kind == "traces":
                yield from _gemini_spans(sessions, request)  # the Gemini CLI's, beside its logs
                if ctx.on_spans is not None:
                    ctx.on_spans(request, number)
        ctx.seen()
    yield from sessions.flush()


def _gemini_spans(sessions: Any, request: Any) -> Iterator[Conversation]:
    from promcp.collectors.otlp_gemini import is_gemini_span
    from promcp.collectors.otlp_spans import span_records

    for span in span_records(request):
        if is_gemini_span(span):
            yield from sessions.gemini.add_span(span)


def _claude_ai(doc: Any, problems: Problems, index: int, offset: int | None) -> Conversation:
    from promcp.collectors import claude_ai

    return claude_ai.parse_conversation(doc, problems, index, offset)


def _chatgpt(doc: Any, problems: Problems, index: int, offset: int | None) -> Conversation:
    from promcp.collectors import chatgpt

    return chatgpt.parse_conversation(doc, problems, index, offset)


def _gemini_cli(ctx: ReadContext) -> Iterator[Conversation]:
    from promcp.collectors import gemini_cli  # collectors/gemini_cli.py

    for conv in gemini_cli.parse_file(ctx.reader, ctx.problems, ctx.file):
        ctx.seen()
        yield conv


def _gemini_sniff(head: str) -> bool:
    from promcp.collectors import gemini_cli

    return gemini_cli.looks_like(head)


def claude_code_locations() -> list[Path]:
    """Claude Code's projects folders: ``$CLAUDE_CONFIG_DIR`` (comma-separated) ``/projects`` when set, else
    ``~/.config/claude/projects`` and ``~/.claude/projects`` (what Claude Code and ccusage use)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR", "").strip()
    if configured:
        return [Path(p.strip()).expanduser() / "projects" for p in configured.split(",") if p.strip()]
    home = Path.home()
    return [home / ".config" / "claude" / "projects", home / ".claude" / "projects"]


def _has(*keys: str) -> Callable[[str], bool]:
    return lambda head: any(f'"{k}"' in head for k in keys)


register(
    ImportFormat("claude-ai", "approx:claude", "anthropic", _documents(_claude_ai), _has("chat_messages"))
)
register(ImportFormat("chatgpt", "o200k_base", "openai", _documents(_chatgpt), _has("mapping")))
register(
    ImportFormat(
        "otlp", "approx:claude", "anthropic", _otlp, _has("resourceLogs", "resourceSpans", "resourceMetrics")
    )
)
# Gemini's tokenizer is not available offline: its sessions are counted with the default one
register(ImportFormat("gemini-cli", DEFAULT_TOKENIZER, "google", _gemini_cli, _gemini_sniff))
register(
    ImportFormat(
        "claude-code",
        "approx:claude",
        "anthropic",
        _claude_code,
        _has("sessionId", "parentUuid"),
        folder_suffixes=(".jsonl",),
        locations=claude_code_locations,
    )
)

register(
    ImportFormat(
        "codex",
        "o200k_base",
        "openai",
        _codex.read,
        _codex.looks_like,
        (".jsonl",),
        _codex.sessions_locations,
    )
)
