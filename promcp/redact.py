"""Redaction: what must never land in a trace file, removed from previews and (by default) from captured content.

:func:`redact` works on two levels:

* **Parsed values.** Text that is JSON (a tool's arguments, a result, a list of tool calls whose ``input`` is
  itself a JSON string) is parsed, and every value under a secret-looking key (``password``, ``api_key``,
  ``client_secret``, ``AWS_SECRET_ACCESS_KEY``, ``authorization``, ``cookie``, ``token`` …) is replaced, at any
  depth and inside JSON nested in strings — escaped quotes cannot hide a value. Text up to ``parse_limit``
  characters is parsed; longer text gets only the second level.
* **Surface patterns** on the text: API keys by their published prefixes (OpenAI/Anthropic ``sk-``, Stripe
  ``sk_live_``, GitHub, GitLab, Slack, AWS ``AKIA``, Google ``AIza`` / ``ya29.``), bearer/basic credentials, JWTs,
  private-key blocks, passwords in URLs, ``KEY=value`` / ``"key": "value"`` assignments (escaped quotes included),
  phrases such as "the password is …", and e-mail addresses.

Placeholders say what was there (``<api-key>``, ``<jwt>``, ``<redacted>``, ``<email>``). What is stored where, and
the content modes, are documented in docs/events.md (Secrets and what is stored).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from promcp.wire.json_bounds import loads as bounded_json

DEFAULT_PREVIEW_CHARS: Final = 240
#: JSON up to this many characters is parsed so secrets are found by key, not only by pattern.
PARSE_LIMIT: Final = 64 * 1024
PLACEHOLDER: Final = "<redacted>"

_SECRET_WORD = (  # lower case: the scans run on lower-cased text
    r"(?:password|passwd|passphrase|passcode|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|"
    r"private[_-]?key|credentials?|auth|authorization|cookie|session[_-]?id|signature)"
)
#: a key that names a secret: it ends with one of the words above (``max_tokens`` and ``tokenizer`` do not)
SECRET_KEY: Final = re.compile(rf"[a-z0-9_.-]*{_SECRET_WORD}")

_Q = r"(?:\\?[\"'])?"  # an optional quote, possibly escaped (JSON inside a JSON string)
_VALUE = (
    r"(?P<value>\\\"(?:(?!\\\").)*\\\""  # \"…\" (escaped quotes)
    r"|\"(?:[^\"\\\n]|\\.)*\""  # "…"
    r"|'[^'\n]*'"  # '…'
    r"|[^\s\"'\\,;&{}\[\]<>]{3,})"  # bare
)
# Both run on the lower-cased text (a case-insensitive scan is 10-20x slower in Python's re). A match starts at
# the secret word that ends a key (``AWS_SECRET_ACCESS_KEY=…`` matches from ``access_key``).
_ASSIGNMENT = re.compile(rf"(?P<key>{_SECRET_WORD}{_Q}\s*[:=]\s*){_VALUE}")
_PHRASE = re.compile(
    r"(?P<key>\b(?:password|passphrase|passcode|pin|secret|api key|access key|token)\s+(?:is|was|=|:)\s+)"
    r"(?P<value>[\"']?[^\s\"',;]{3,}[\"']?)"
)

#: (words of which one must occur in the lower-cased text, pattern, replacement): the words are a cheap test that
#: skips a pattern's scan on text that cannot match it (most text matches none).
_PATTERNS: Final[list[tuple[tuple[str, ...], re.Pattern[str], str]]] = [
    (
        ("private key",),
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
        "<private-key>",
    ),
    (("bearer", "basic"), re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 <redacted>"),
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), "<jwt>"),
    (
        ("sk-", "pk-", "rk-"),
        re.compile(r"\b(sk|pk|rk)-(ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"),
        "<api-key>",
    ),
    (("_live_", "_test_"), re.compile(r"\b(sk|pk|rk)_(live|test)_[A-Za-z0-9]{16,}"), "<api-key>"),
    (
        ("ghp", "gho", "ghs", "ghu", "github_pat", "glpat", "xox"),
        re.compile(r"\b(ghp|gho|ghs|ghu|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_-]{16,}"),
        "<api-key>",
    ),
    (("akia", "asia"), re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "<api-key>"),
    (("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), "<api-key>"),
    (("ya29.",), re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"), "<api-key>"),
    (("://",), re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1<redacted>@"),
    (("@",), re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "<email>"),
]
_SECRET_WORDS: Final = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "cookie",
    "credential",
    "session",
    "signature",
    "pin ",
)


def _quoted_placeholder(value: str) -> str:
    for quote in ('\\"', '"', "'"):
        if len(value) >= 2 * len(quote) and value.startswith(quote) and value.endswith(quote):
            return f"{quote}{PLACEHOLDER}{quote}"
    return PLACEHOLDER


def _sub_keyed(pattern: re.Pattern[str], text: str, low: str) -> str:
    """Replace the ``value`` group of every match of ``pattern`` (found in ``low``) in ``text``."""
    if len(low) != len(text):  # a character whose lower case has another length: scan the text itself
        low, pattern = text, re.compile(pattern.pattern, re.IGNORECASE)
    out: list[str] = []
    at = 0
    for match in pattern.finditer(low):
        start, end = match.span("value")
        out += [text[at:start], _quoted_placeholder(text[start:end])]
        at = end
    if not out:
        return text
    out.append(text[at:])
    return "".join(out)


def _maybe_keyed(low: str) -> bool:
    """Whether lower-cased text contains a word a secret's key or phrase needs (a cheap test before the scan)."""
    return any(w in low for w in _SECRET_WORDS)


def redact_surface(text: str) -> str:
    """``text`` with every surface pattern replaced (no parsing)."""
    low = text.lower()
    for words, pattern, replacement in _PATTERNS:
        if any(w in low for w in words):
            text = pattern.sub(replacement, text)
    if _maybe_keyed(low):
        text = _sub_keyed(_ASSIGNMENT, text, text.lower())
        text = _sub_keyed(_PHRASE, text, text.lower())
    return text


def _parse_worthy(text: str) -> bool:
    """JSON (by its first character) that names something secret-like: worth parsing to find values by key."""
    return text.lstrip()[:1] in ("{", "[") and _maybe_keyed(text.lower())


def redact_value(value: Any, parse_limit: int = PARSE_LIMIT) -> Any:
    """A parsed JSON value with secrets removed: values under secret keys replaced, strings redacted (JSON nested
    in a string is parsed and redacted in turn)."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and SECRET_KEY.fullmatch(key.lower()) and _is_secret_scalar(item):
                out[key] = PLACEHOLDER
            else:
                out[key] = redact_value(item, parse_limit)
        return out
    if isinstance(value, list):
        return [redact_value(item, parse_limit) for item in value]
    if isinstance(value, str):
        return redact(value, parse_limit)
    return value


def _is_secret_scalar(item: Any) -> bool:
    if isinstance(item, bool) or item is None:
        return False
    return isinstance(item, str | int | float) and str(item) != ""


def redact(text: str, parse_limit: int = PARSE_LIMIT) -> str:
    """``text`` with API keys, credentials, passwords, tokens and e-mail addresses replaced by placeholders."""
    if len(text) <= parse_limit and _parse_worthy(text):
        try:
            parsed = bounded_json(text)
        except (ValueError, RecursionError):
            pass
        else:  # every string inside was redacted on the way: the text needs no second scan
            cleaned = redact_value(parsed, parse_limit)
            return text if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)
    return redact_surface(text)


def preview(text: str | None, limit: int = DEFAULT_PREVIEW_CHARS) -> str | None:
    """A redacted preview of at most ``limit`` characters (plus a marker saying how much was cut)."""
    if text is None:
        return None
    if len(text) <= PARSE_LIMIT and _parse_worthy(text):
        head = redact(text)  # JSON naming secrets: parsed, so values are found by key
    else:
        # redact a little more than we keep, so a secret cut by the limit is still recognised
        head = redact_surface(text[: limit * 2 + 200])
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
