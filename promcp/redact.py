"""Previews: truncated and redacted text kept in events (``req_preview``/``resp_preview``).

Redaction is on by default and removes what must never land in a trace file: API keys and bearer tokens,
credentials in ``key=value`` / JSON form, private-key blocks, and e-mail addresses.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit, urlunsplit

DEFAULT_PREVIEW_CHARS: Final = 240

_PATTERNS: Final[list[tuple[re.Pattern[str], str]]] = [
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
        "<private-key>",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 <redacted>"),
    (re.compile(r"\b(sk|pk|rk)-(ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"), "<api-key>"),
    (re.compile(r"\b(ghp|gho|ghs|ghu|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_-]{16,}"), "<api-key>"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "<api-key>"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), "<api-key>"),
    (
        re.compile(
            r"(?i)([\"']?(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|passwd|client[_-]?secret)"
            r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',}&]{4,}"
        ),
        r"\1<redacted>",
    ),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "<email>"),
]


def redact(text: str) -> str:
    """``text`` with secrets and e-mail addresses replaced by placeholders."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def preview(text: str | None, limit: int = DEFAULT_PREVIEW_CHARS) -> str | None:
    """A redacted preview of at most ``limit`` characters (plus a marker saying how much was cut)."""
    if text is None:
        return None
    # redact a little more than we keep, so a secret cut by the limit is still recognised
    head = redact(text[: limit * 2 + 200])
    if len(head) <= limit and len(text) <= limit * 2 + 200:
        return head
    return f"{head[:limit]}…(+{max(len(text) - limit, 0)} chars)"


def public_url(url: str) -> str:
    """``url`` without user, password, query or fragment (a query may carry a token): what may be written into a
    run's metadata."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
