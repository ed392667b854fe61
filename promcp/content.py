"""Content capture policy: how much of the texts behind the counts (prompts, tool schemas, results, answers) a
trace keeps, and the form it keeps them in.

Used by :class:`promcp.recorder.Recorder` for every source, and by the CLI options ``--content`` and
``--max-content-bytes``. What is stored where, and why ``redacted`` is the default: docs/events.md.
"""

from __future__ import annotations

import hashlib
from typing import Final, Literal

from promcp.errors import ConfigError

ContentMode = Literal["full", "redacted", "none"]
#: ``redacted`` (default) keeps the texts the what-if and tokenizer comparisons recount, minus what must never be
#: written; ``full`` keeps them verbatim; ``none`` keeps no text.
CONTENT_MODES: Final[tuple[ContentMode, ...]] = ("redacted", "full", "none")
DEFAULT_CONTENT: Final[ContentMode] = "redacted"
#: Per captured text (UTF-8 bytes); a longer text is stored as a prefix, marked ``truncated``. 0/None: no cap.
DEFAULT_MAX_CONTENT_BYTES: Final = 4 * 1024 * 1024
#: Texts up to this size are parsed as JSON when redacted (secrets found by key, not only by pattern).
PARSE_LIMIT: Final = 1024 * 1024
#: Bytes kept beyond the cap while redacting, so a secret the cut would halve is still recognised.
_MARGIN = 4096
_PIECE = 1 << 20


def content_mode(value: str) -> ContentMode:
    """``value`` as a content mode, or a ConfigError naming the choices."""
    for mode in CONTENT_MODES:
        if value == mode:
            return mode
    raise ConfigError(
        f"content mode must be one of {', '.join(CONTENT_MODES)}, not {value!r}", key="--content"
    )


def digest_of(text: str) -> tuple[str, int]:
    """(BLAKE2b-128 hex of the UTF-8 text, its size in bytes), encoding at most 1 MiB at a time (a 50 MB result
    is never copied whole)."""
    h = hashlib.blake2b(digest_size=16)
    size = 0
    for start in range(0, max(len(text), 1), _PIECE):
        data = text[start : start + _PIECE].encode("utf-8", "surrogatepass")
        h.update(data)
        size += len(data)
    return h.hexdigest(), size


def prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits ``limit`` bytes (no half character)."""
    return text[:limit].encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")


def stored_text(text: str, size: int, mode: ContentMode, limit: int | None) -> tuple[str, bool]:
    """What a text of ``size`` UTF-8 bytes is stored as under ``mode`` and the cap: (stored text, truncated)."""
    cap = limit or 0
    truncated = 0 < cap < size
    stored = text
    if truncated:
        stored = prefix(text, cap + _MARGIN if mode == "redacted" else cap)
    if mode == "redacted":
        from promcp.redact import redact  # not at import: `promcp proxy mcp` starts its server first

        stored = redact(stored, parse_limit=PARSE_LIMIT)
    if truncated:
        stored = prefix(stored, cap)
    return stored, truncated
