"""Which export a path holds, from its name and first bytes (the formats: collectors/_formats.py)."""

from __future__ import annotations

from pathlib import Path

from promcp.collectors._formats import FORMATS
from promcp.errors import ImportFormatError


def folder_format(path: Path) -> str | None:
    """The format whose files a folder holds: the first registered one whose first such file below it looks like
    it (Claude Code and Codex both keep ``.jsonl`` files), else the first with such files at all."""
    fallback = None
    for fmt in FORMATS.values():
        first = next((p for s in fmt.folder_suffixes for p in path.rglob(f"*{s}") if p.is_file()), None)
        if first is None:
            continue
        if fmt.sniff(_head(first)):
            return fmt.name
        fallback = fallback or fmt.name
    return fallback


def _head(file: Path) -> str:
    """The first 64 KiB of ``file``, whitespace removed, as the formats' ``sniff`` reads them ('' if unreadable)."""
    try:
        with file.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return ""
    return head.decode("utf-8", "replace").replace(" ", "").replace("\n", "")


def detect_format(path: Path) -> str:
    """A name of :data:`FORMATS`; ImportFormatError (naming the file) when nothing fits."""
    if path.is_dir():
        found = folder_format(path)
        if found is not None:
            return found
        raise ImportFormatError(
            f"{path}: a folder without session .jsonl files (expected ~/.claude/projects or ~/.codex/sessions)"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    text = head.decode("utf-8", "replace").replace(" ", "").replace("\n", "")
    for fmt in FORMATS.values():
        if fmt.sniff(text):
            return fmt.name
    raise ImportFormatError(
        f"{path}: not a known export (no Claude.ai 'chat_messages', ChatGPT 'mapping', Claude Code "
        f"'sessionId' or Codex 'session_meta' in the first 64 KiB); force one with --format {{{','.join(FORMATS)}}}"
    )
