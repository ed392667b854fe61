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
  phrases such as "the password is …" or "password hunter2", and e-mail addresses.
* **A scanner's pattern set** on the text, as secret scanners find secrets in free text: every vendor-token
  detector of Yelp's `detect-secrets <https://github.com/Yelp/detect-secrets>`_ (a maintained set: AWS, Azure,
  GitHub, GitLab, Slack, Stripe, Twilio, SendGrid, npm, PyPI, Discord, Telegram, Mailchimp, Artifactory, IBM,
  Cloudant, Softlayer, Square, OpenAI, JWT, basic auth in URLs…; the public-IP detector aside, an address is no
  secret), and its high-entropy rule (Shannon entropy of a base64-alphabet token at or over its default limit,
  4.5) applied to tokens of 20–128 characters that mix letters and digits — an AWS secret access key with no key
  name beside it is caught by that. detect-secrets is imported on first use (~0.5 s, once per process).

Placeholders say what was there (``<api-key>``, ``<jwt>``, ``<redacted>``, ``<email>``). What is stored where, and
the content modes, are documented in docs/events.md (Secrets and what is stored).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Iterator
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
#: "password hunter2": a password word, then at once a word that is no plain word (a digit or a symbol in it)
_BARE_PASSWORD = re.compile(
    r"(?P<key>\b(?:password|passwd|passphrase|passcode|pwd)\s+)"
    r"(?P<value>(?=[^\s\"',;]*[0-9!#$%^&*+=?@~|/\\_-])[^\s\"',;]{3,})"
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


#: the letters every match of a keyed pattern starts with (the beginnings of its secret words, lower case): its
#: scan tries only where one of them occurs instead of at every position of the text (``tests/unit/test_redact.py``
#: compares it with the pattern's own scan)
_STARTS: Final[dict[re.Pattern[str], tuple[str, ...]]] = {
    _ASSIGNMENT: (
        *("pass", "pwd", "secret", "token", "api", "access", "private"),
        *("credential", "auth", "cookie", "session", "signature"),
    ),
    _PHRASE: ("pass", "pin", "secret", "api", "access", "token"),
    _BARE_PASSWORD: ("pass", "pwd"),
}


def _keyed_matches(pattern: re.Pattern[str], low: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(low)`` for a pattern of :data:`_STARTS`, tried only where a match can start."""
    starts: set[int] = set()
    for word in _STARTS[pattern]:
        at = low.find(word)
        while at >= 0:
            starts.add(at)
            at = low.find(word, at + 1)
    end = 0
    for at in sorted(starts):
        if at >= end and (match := pattern.match(low, at)) is not None:
            yield match
            end = match.end()


def _sub_keyed(pattern: re.Pattern[str], text: str, low: str) -> str:
    """Replace the ``value`` group of every match of ``pattern`` (found in ``low``) in ``text``."""
    if len(low) != len(text):  # a character whose lower case has another length: scan the text itself
        matches = re.compile(pattern.pattern, re.IGNORECASE).finditer(text)
    else:
        matches = _keyed_matches(pattern, low)
    out: list[str] = []
    at = 0
    for match in matches:
        start, end = match.span("value")
        out += [text[at:start], _quoted_placeholder(text[start:end])]
        at = end
    if not out:
        return text
    out.append(text[at:])
    return "".join(out)


def _maybe_keyed(low: str) -> bool:
    """Whether lower-cased text contains a word a secret's key or phrase needs (a cheap test before the scan)."""
    return any(map(low.__contains__, _SECRET_WORDS))  # (map: no generator frame per word, this runs per text)


def redact_surface(text: str) -> str:
    """``text`` with every surface pattern replaced (no parsing), then the scanner's (:func:`redact_scanned`)."""
    low = text.lower()
    for words, pattern, replacement in _PATTERNS:
        if any(map(low.__contains__, words)):
            text = pattern.sub(replacement, text)
    if _maybe_keyed(low):
        text = _sub_keyed(_ASSIGNMENT, text, text.lower())
        text = _sub_keyed(_PHRASE, text, text.lower())
        text = _sub_keyed(_BARE_PASSWORD, text, text.lower())
    return redact_scanned(text)


#: a token in the base64 alphabet (detect-secrets' high-entropy charset, plus ``_`` and ``-`` of URL-safe base64):
#: a whole run of that alphabet, 20 characters or more — a scan from the left meets a long run at its start (no
#: look-behind needed, which would cost a test at every position)
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{20,}")
_TOKEN_MAX = 128  # longer runs are data (an image, a blob), not a credential
_SCANNER_KEEP = "\t\r\n \"'=:"  # context some detectors' patterns include at their edges


#: a cheap test per detector (words, one of which its match must contain; lower-case ones are looked for in the
#: lower-cased text, others in the text itself) that skips its scan on text
#: that cannot match: the keyword detectors' patterns try every position. A detector not named here (a newer
#: detect-secrets) always runs; a pattern in :data:`_PATTERN_GATES` has a tighter test instead.
_DETECTOR_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "ArtifactoryDetector": ("akc", "ap"),
    "AWSKeyDetector": ("aws", "akia", "asia", "abia", "acca", "a3t"),
    "AzureStorageKeyDetector": ("accountkey",),
    "BasicAuthDetector": ("://",),
    "CloudantDetector": ("key", "pw", "pass", "token"),
    "DiscordBotTokenDetector": (".",),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": ("gl", "gr1348941"),
    "IbmCloudIamDetector": ("key", "pw", "pass", "token"),
    "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": ("-us",),
    "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "PrivateKeyDetector": ("private key", "putty"),
    "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SoftlayerDetector": ("key", "pw", "pass", "token", "softlayer"),
    "SquareOAuthDetector": ("sq0csp",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (":",),
    "TwilioKeyDetector": ("AC", "SK"),  # upper case: looked for in the text itself
}

#: a key word, its separator and the first 24 characters of a value: what every keyword pattern's match holds
_KEYED_VALUE = re.compile(
    r"(?:key|pwd|pw|password|pass|token)[\"']?\]? *(?:=|:|:=|=>| +|::) *[\"']?[a-z0-9_-]{24}"
)
#: tighter tests for the patterns a word test lets through too often (``key``, ``ap``, ``.``, ``:`` are in most
#: texts), each keyed by the exact pattern it was derived from (a changed pattern falls back to the words): a
#: regex a match of the pattern must contain, searched in the folded lower-cased text (True) or the text itself
#: (False) — a search for a literal start, one pass, where the pattern's own scan tries every position. Shared
#: tests (:data:`_KEYED_VALUE`) are searched once per text.
_PATTERN_GATES: Final[dict[str, tuple[re.Pattern[str], bool]]] = {
    (
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|passwo"
        'rd|pass|token)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([0-9a-f]{64})(?:"|\\'
        "'|)"
    ): (_KEYED_VALUE, True),
    (
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:cloudant|cl|clou)(?:_|-|)(?:api|)(?:key|pwd|pw|passwo"
        "rd|pass|token)(?:\"|\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:\"|\\'|)([a-z]{24})(?:\"|\\'|)"
    ): (_KEYED_VALUE, True),
    (
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:ibm(?:_|-|)cloud(?:_|-|)iam|cloud(?:_|-|)iam|ibm(?:_|"
        "-|)cloud|ibm(?:_|-|)iam|ibm|iam|cloud|)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|password|pass|to"
        "ken)(?:\"|\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:\"|\\'|)([a-zA-Z0-9_\\-]{44}(?![a-zA-Z0"
        "-9_\\-]))(?:\"|\\'|)"
    ): (_KEYED_VALUE, True),
    (
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:(?:ibm)?[-_]?cos[-_]?(?:hmac)?|)(?:_|-|)(?:secret[-_]"
        "?(?:access)?[-_]?key)(?:\"|\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:\"|\\'|)([a-f0-9]{48}"
        "(?![a-f0-9]))(?:\"|\\'|)"
    ): (_KEYED_VALUE, True),
    (
        "(?:(?<=\\W)|(?<=^))(?:\\[|)(?:\"|\\'|)(?:softlayer|sl)(?:_|-|)(?:api|)(?:_|-|)(?:key|pwd|passw"
        'ord|pass|token)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-z0-9]{64})(?:"|'
        "\\'|)"
    ): (_KEYED_VALUE, True),
    r"(?:http|https)://api.softlayer.com/soap/(?:v3|v3.1)/([a-z0-9]{64})": (re.compile("softlayer"), True),
    r"(?:https?\:\/\/)[\w\-]+\:([0-9a-f]{64})\@[\w\-]+\.cloudant\.com": (re.compile(r"cloudant\.com"), True),
    r"(?:https?\:\/\/)[\w\-]+\:([a-z]{24})\@[\w\-]+\.cloudant\.com": (re.compile(r"cloudant\.com"), True),
    r'(?:\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\s|"|$)': (re.compile(r"AKC[a-zA-Z0-9]{10}"), False),
    r'(?:\s|=|:|"|^)AP[\dABCDEF][a-zA-Z0-9]{8,}(?:\s|"|$)': (
        re.compile(r"AP[\dABCDEF][a-zA-Z0-9]{8}"),
        False,
    ),
    r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}": (
        re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),
        False,
    ),
    r"\d{8,10}:[0-9A-Za-z_-]{35}": (re.compile(r":[0-9A-Za-z_-]{35}"), False),
}
#: what a case-insensitive pattern matches as an ASCII letter but ``str.lower`` does not make one (``re`` folds
#: these; U+212A KELVIN SIGN lower-cases to ``k`` already)
_FOLDED: Final = "\u0130\u0131\u017f"
_FOLD: Final = str.maketrans(dict.fromkeys(_FOLDED[:2], "i") | {_FOLDED[2]: "s"})


def _folded_lower(text: str) -> str:
    """``text`` lower-cased as the gates see it: a case-insensitive pattern's ASCII letters are in it."""
    if text.isascii() or not any(map(text.__contains__, _FOLDED)):
        return text.lower()
    return text.translate(_FOLD).lower()


class _Scanner:
    """detect-secrets' regex detectors and entropy rule, loaded once, each detector with the cheap tests that skip
    its scan on text it cannot match (the scan is most of a redaction's time: one pass per detector)."""

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
        from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

        plugins: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
        self.patterns: list[_Detector] = []
        for plugin in sorted(plugins, key=lambda p: p.__name__):
            if issubclass(plugin, RegexBasedDetector) and plugin.__name__ != "IPPublicDetector":
                # a class attribute of every such detector (typed as an abstract property in detect-secrets)
                denylist: Iterable[re.Pattern[str]] = getattr(plugin, "denylist", ())
                words = _DETECTOR_WORDS.get(plugin.__name__)
                self.patterns += [_Detector(words, p, _PATTERN_GATES.get(p.pattern)) for p in denylist]
        #: every gate word, each looked for once per text, with the detectors (indexes) it lets through
        self.lower_words: dict[str, list[int]] = {}
        self.case_words: dict[str, list[int]] = {}
        #: the detectors scanned on any text long enough, and those behind each gate regex (with their shortest
        #: match: a text shorter than every one of them is not searched for the gate)
        self.always: list[int] = []
        gated: dict[tuple[re.Pattern[str], bool], list[int]] = {}
        for i, d in enumerate(self.patterns):
            if d.gate is not None:
                gated.setdefault(d.gate, []).append(i)
            elif d.always:
                self.always.append(i)
            for w in sorted(d.lower_words):
                self.lower_words.setdefault(w, []).append(i)
            for w in sorted(d.case_words):
                self.case_words.setdefault(w, []).append(i)
        self.gates = [
            (gate, on_low, ids, min(self.patterns[i].min_width for i in ids))
            for (gate, on_low), ids in gated.items()
        ]
        #: no detector matches text shorter than this
        self.min_width = min((d.min_width for d in self.patterns), default=0)
        entropy = Base64HighEntropyString()
        self.entropy = entropy.calculate_shannon_entropy
        self.limit = float(entropy.entropy_limit)


class _Detector:
    """One detector pattern and its gates: a regex its match contains (see :data:`_PATTERN_GATES`), else the words
    one of which its match contains (lower-case ones looked for in the lower-cased text, others in the text; None:
    always scanned); and the shortest text it can match."""

    def __init__(
        self,
        words: tuple[str, ...] | None,
        pattern: re.Pattern[str],
        gate: tuple[re.Pattern[str], bool] | None = None,
    ) -> None:
        self.pattern = pattern
        self.gate = gate
        if gate is not None:
            words = ()
        self.always = words is None
        self.lower_words = frozenset(w for w in words or () if w.islower())
        self.case_words = frozenset(w for w in words or () if not w.islower())
        self.min_width = _min_width(pattern)


def _min_width(pattern: re.Pattern[str]) -> int:
    """The fewest characters a match of ``pattern`` spans (0 when it cannot be worked out)."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - Python 3.11 keeps it public as sre_parse too
        import sre_parse as parser
    try:
        return int(parser.parse(pattern.pattern, pattern.flags).getwidth()[0])
    except Exception:  # an internal API: any surprise means no gate, never a missed secret
        return 0


_scanner: _Scanner | None = None
_scanner_lock = threading.Lock()


def _get_scanner() -> _Scanner:
    global _scanner
    if _scanner is None:
        with _scanner_lock:
            if _scanner is None:
                _scanner = _Scanner()
    return _scanner


#: how long after a recorder starts the scanner begins to load: a proxy's start-up (a client's ``initialize``) is
#: not slowed by the import; a redaction needed before then loads it at once
WARM_DELAY_S = 0.5


def warm_scanner(delay_s: float = WARM_DELAY_S) -> None:
    """Load the scanner on a thread of its own, ``delay_s`` from now (a recorder does, so that its first redaction
    does not wait)."""
    if _scanner is None:

        def load() -> None:
            time.sleep(delay_s)
            _get_scanner()

        threading.Thread(target=load, name="promcp-redact-warm", daemon=True).start()


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    """What of a detector's match is the secret: its first group when the pattern captures one after some context
    (``aws…key = "(…)"``, ``://user:(…)@``), else the match without the separators at its edges."""
    if match.re.groups and match.group(1) and match.start(1) > match.start():
        return match.span(1)
    start, end = match.span()
    text = match.string
    while start < end and text[start] in _SCANNER_KEEP:
        start += 1
    while end > start and text[end - 1] in _SCANNER_KEEP:
        end -= 1
    return start, end


def _high_entropy(token: str, scanner: _Scanner) -> bool:
    return (
        len(token) <= _TOKEN_MAX
        and any(c.isdigit() for c in token)
        and any(c.isalpha() for c in token)
        and scanner.entropy(token) >= scanner.limit
    )


def redact_scanned(text: str) -> str:
    """``text`` with what the scanner's detectors find replaced by ``<secret>``."""
    scanner = _get_scanner()
    spans: list[tuple[int, int]] = []
    size = len(text)
    if size >= scanner.min_width:
        low = _folded_lower(text)
        # a detector is scanned when one of its words is there (each word looked for once), or its gate regex
        # matches (each searched once), or it has neither; then only on text as long as its shortest match
        chosen = set(scanner.always)
        for word in filter(low.__contains__, scanner.lower_words):
            chosen.update(scanner.lower_words[word])
        for word in filter(text.__contains__, scanner.case_words):
            chosen.update(scanner.case_words[word])
        for gate, on_low, ids, width in scanner.gates:
            if size >= width and gate.search(low if on_low else text) is not None:
                chosen.update(ids)
        for i in sorted(chosen):
            d = scanner.patterns[i]
            if size >= d.min_width:
                spans += [_secret_span(m) for m in d.pattern.finditer(text)]
    if len(text) >= 20:  # _TOKEN's shortest match
        spans += [m.span() for m in _TOKEN.finditer(text) if _high_entropy(m.group(), scanner)]
    spans = [(a, b) for a, b in spans if b > a]
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for start, end in sorted(spans):
        if end <= at:
            continue
        start = max(start, at)
        out += [text[at:start], "<secret>"]
        at = end
    out.append(text[at:])
    return "".join(out)


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
