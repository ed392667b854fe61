"""Which export a path holds, from its name and first bytes."""

from __future__ import annotations

from pathlib import Path

from promcp.collectors import gemini_cli
from promcp.errors import ImportFormatError

#: Supported formats → (default tokenizer, provider column).
FORMATS: dict[str, tuple[str, str]] = {
    "claude-ai": ("approx:claude", "anthropic"),
    "chatgpt": ("o200k_base", "openai"),
    "claude-code": ("approx:claude", "anthropic"),
    "otlp": ("approx:claude", "anthropic"),
    "gemini-cli": ("o200k_base", "google"),
}


def detect_format(path: Path) -> str:
    """``claude-ai``, ``chatgpt``, ``claude-code``, ``gemini-cli`` or ``otlp``; ImportFormatError (naming the file) when nothing fits."""
    if path.is_dir():
        if any(path.rglob("*.jsonl")):
            return "claude-code"
        raise ImportFormatError(
            f"{path}: a folder without session .jsonl files (expected ~/.claude/projects)"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    text = head.decode("utf-8", "replace").replace(" ", "").replace("\n", "")
    if '"chat_messages"' in text:
        return "claude-ai"
    if '"mapping"' in text:
        return "chatgpt"
    if '"resourceLogs"' in text or '"resourceSpans"' in text or '"resourceMetrics"' in text:
        return "otlp"
    if gemini_cli.looks_like(text):
        return "gemini-cli"
    if '"sessionId"' in text or '"parentUuid"' in text:
        return "claude-code"
    raise ImportFormatError(
        f"{path}: not a known export (no Claude.ai 'chat_messages', ChatGPT 'mapping' or Claude Code "
        f"'sessionId' in the first 64 KiB); force one with --format {{{','.join(FORMATS)}}}"
    )
