"""Secrets at rest: redaction on parsed values and on the text, and the content modes of the store."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import promcp.analysis as pa_
from promcp.collectors import import_path
from promcp.recorder import Recorder
from promcp.redact import preview, redact

SECRETS = [
    "hunter2-Pa55",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "sk_live_51HxxxxxxxxxxxxxxxxxxxxXX",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "s3cr3t-in-url",
    "correct horse battery staple",
    "alice@example.com",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "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",
]

#: one case per class of input, each holding a secret a test above names
CASES = [
    # JSON inside a JSON string (the S2 preview of an import): escaped quotes
    json.dumps([{"name": "login", "input": json.dumps({"user": "bob", "password": "hunter2-Pa55"})}]),
    '{"name":"login","input":"{\\"user\\":\\"bob\\",\\"password\\":\\"hunter2-Pa55\\"}"}',
    # a shell-style assignment whose key only ends with a secret word
    "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY && run",
    "AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    # phrases
    "ok, the password is hunter2-Pa55 — keep it safe",
    "My API key is sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA.",
    # keys by prefix, anywhere
    "stripe sk_live_51HxxxxxxxxxxxxxxxxxxxxXX in config",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "git clone https://x:ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/o/r",
    "postgres://app:s3cr3t-in-url@db:5432/x",
    # a quoted value with spaces, and one under a nested key
    '{"config": {"db": {"Password": "correct horse battery staple"}}}',
    "password = 'correct horse battery staple'",
    "mail alice@example.com please",
    # free text, no key name beside the secret (issue 23, item 12): a bare password, an AWS secret access key
    "ok, password hunter2-Pa55 then",
    "the aws creds are AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, rotate them",
    # detect-secrets' vendor detectors (a maintained set, not promcp's own list)
    "alerts via xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx today",
    "mail key 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 ok",
]


@pytest.mark.parametrize("text", CASES)
def test_secrets_are_removed(text: str) -> None:
    out = redact(text)
    assert not [s for s in SECRETS if s in out], out
    assert not [s for s in SECRETS if s in (preview(text) or "")]


@pytest.mark.parametrize(
    "text",
    [
        '{"max_tokens": 1024, "tokenizer": "o200k_base", "author": "Bob", "input_tokens": 12345}',
        "tokens_in=512 and max_tokens: 2048",
        '{"name": "get_weather", "inputSchema": {"properties": {"api_key": {"type": "string"}}}}',
        # what the free-text rules must leave alone: plain words after "password", hashes, ids, paths, names
        "open the password manager and reset the password field",
        "commit da39a3ee5e6b4b0d3255bfef95601890afd80709 fixed /usr/lib/python3.11/site-packages/foo",
        "request 550e8400-e29b-41d4-a716-446655440000 hit getMaxConcurrentRequestsPerHost at 10.0.0.1",
    ],
)
def test_ordinary_fields_are_kept(text: str) -> None:
    assert redact(text) == text


def test_a_preview_cut_in_the_middle_of_a_secret_is_still_redacted() -> None:
    text = "x" * 230 + " Authorization: Bearer " + "A" * 60
    assert "AAAAAAAAAA" not in (preview(text, 240) or "")


EXPORT = [
    {
        "uuid": "conv-secret",
        "name": "",
        "created_at": "2026-03-20T13:04:15Z",
        "updated_at": "2026-03-20T13:05:15Z",
        "chat_messages": [
            {
                "uuid": "h1",
                "sender": "human",
                "created_at": "2026-03-20T13:04:16Z",
                "content": [{"type": "text", "text": "log me in; my password is hunter2-Pa55"}],
            },
            {
                "uuid": "a1",
                "parent_message_uuid": "h1",
                "sender": "assistant",
                "created_at": "2026-03-20T13:04:26Z",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "login", "input": {"password": "hunter2-Pa55"}},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "name": "login",
                        "content": [
                            {
                                "type": "text",
                                "text": "session token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                            }
                        ],
                    },
                    {"type": "text", "text": "Done, alice@example.com is logged in."},
                ],
            },
        ],
    }
]


def _all_text(root: Path) -> str:
    """Every byte promcp wrote under ``root``, decoded (Parquet pages are zstd-compressed: read them as tables)."""
    parts = []
    for f in sorted(root.rglob("*")):
        if f.suffix == ".parquet":
            parts.append(pq.read_table(f).to_pandas().to_json())
        elif f.is_file():
            parts.append(f.read_text(errors="replace"))
    return "\n".join(parts)


@pytest.mark.parametrize("mode", ["redacted", "none"])
def test_an_import_writes_no_secret_anywhere(tmp_path: Path, mode: str) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(EXPORT))
    out = tmp_path / "ds"
    summary = import_path(export, out, content=mode)
    assert summary.imported == 1
    written = _all_text(out)
    assert not [s for s in SECRETS if s in written]
    content = pa_.load_content(out)
    if mode == "none":
        assert content.empty
    else:
        assert set(content["mode"]) == {"redacted"} and "<redacted>" in " ".join(content["text"])


def test_full_content_is_verbatim_and_counts_never_depend_on_the_mode(tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(EXPORT))
    full, red = tmp_path / "full", tmp_path / "red"
    import_path(export, full, content="full")
    import_path(export, red)
    assert "hunter2-Pa55" in " ".join(pa_.load_content(full)["text"])
    cols = ["stage", "tokens_in", "tokens_out", "footprint_tokens", "footprint_bytes"]
    a, b = pa_.load(full)[cols], pa_.load(red)[cols]
    assert a.equals(b)


def test_max_content_bytes_cuts_and_records_the_cut(tmp_path: Path) -> None:
    with Recorder(tmp_path, run_id="cap", max_content_bytes=1000, content="full") as rec:
        big = rec.put_text("result", "é" * 5000)  # 10,000 bytes
        small = rec.put_text("result", "short")
    content = pa_.load_content(tmp_path).set_index("hash")
    assert content.at[big, "truncated"] and content.at[big, "original_bytes"] == 10_000
    assert content.at[big, "text"] == "é" * 500  # a prefix that fits 1000 bytes (no half character)
    assert not content.at[small, "truncated"] and content.at[small, "text"] == "short"


def _scan_ungated(text: str) -> str:
    """The scanner's result with every detector run on every text (no word or length gate): the reference the
    gated scan must equal."""
    from promcp.redact import _TOKEN, _get_scanner, _high_entropy, _secret_span

    scanner = _get_scanner()
    spans = [_secret_span(m) for d in scanner.patterns for m in d.pattern.finditer(text)]
    spans += [m.span() for m in _TOKEN.finditer(text) if _high_entropy(m.group(), scanner)]
    out, at = [], 0
    for start, end in sorted((a, b) for a, b in spans if b > a):
        if end <= at:
            continue
        out += [text[at : max(start, at)], "<secret>"]
        at = end
    return "".join([*out, text[at:]])


def test_the_scanners_gates_skip_no_match() -> None:
    """The scanner skips a detector on text too short for it or without any of its words (most of a redaction's
    time is one regex pass per detector): on planted secrets of every kind, cut, joined, upper- and lower-cased,
    the result equals running every detector everywhere."""
    import random

    from promcp.redact import redact_scanned

    planted = [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a1B2" * 9,
        "xoxb-123-456-abcdef",
        "SK" + "a1" * 16,
        "AC" + "b2" * 16,
        'cloudant_password = "' + "q" * 24 + '"',
        "IBM_CLOUD_IAM_KEY: " + "A" * 44,
        'softlayer_api_key="' + "ab12" * 16 + '"',
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
        "https://user:pass@host.example",
        "AccountKey=" + "a" * 88,
        "//registry.npmjs.org/:_authToken=npm_abcdef",
        "1234567890:" + "A" * 35,
        "SG." + "a" * 22 + "." + "b" * 43,
        "sk_live_" + "0" * 24,
        "-----BEGIN RSA PRIVATE KEY-----",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        # the patterns with a gate regex of their own (promcp/redact.py _PATTERN_GATES): every separator, quotes
        # and brackets, and letters a case-insensitive pattern folds (long s, dotless i, dotted I, Kelvin sign)
        'cloudant_password := "' + "q" * 24 + '"',
        "clou-apitoken=>" + "0f" * 32,
        'clpass="' + "q" * 24 + '"',
        "cloudant_pw " + "0f" * 32,
        '["ibm_cos_hmac_secret_access_key"] : "' + "a1" * 24 + '"',
        "IBM_CLOUD_IAM_KEY::" + "Ab-_" * 11,
        "pa\u017fsword: " + "Q" * 44,
        "\u0130am_\u212aey = " + "z\u0131" * 22,
        "softlayer_api_token   " + "ab12" * 16,
        "sl-pwd=" + "\u017f" * 64,
        "https://user:" + "0a" * 32 + "@acct.cloudant.com",
        "https://admin:" + "abc" * 8 + "@x.cloudant.com",
        "https://api.softlayer.com/soap/v3.1/" + "ab12" * 16,
        "=AKC" + "x1" * 6 + " ",
        ' AP6xyz12345"',
        "M" + "a1" * 12 + ".b2c3d4." + "e" * 27,
    ]
    rng = random.Random(26)
    alphabet = "abcKLM019_-=:\"' .\n[]/"
    texts = list(planted)
    for _ in range(3000):
        pieces = [
            rng.choice(planted)[: rng.randint(5, 90)]
            if rng.random() < 0.4
            else "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
            for _ in range(rng.randint(1, 4))
        ]
        text = rng.choice(["", " ", '"', "\n"]).join(pieces)
        texts.append(text.upper() if rng.random() < 0.2 else text.lower() if rng.random() < 0.2 else text)
    assert sum(_scan_ungated(t) != t for t in texts) > 500  # the texts do hold secrets
    assert [redact_scanned(t) for t in texts] == [_scan_ungated(t) for t in texts]


def test_the_token_scan_finds_whole_runs() -> None:
    """The high-entropy rule's token scan, with no look-behind, finds exactly the whole runs of 20+ characters of
    the base64 alphabet that a scan anchored at a run's start finds."""
    import random
    import re

    from promcp.redact import _TOKEN

    anchored = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{20,}")
    rng = random.Random(7)
    texts = [
        "".join(
            rng.choice("aZ9+/=_- .:\n\u00e9") if rng.random() < 0.2 else rng.choice("aZ09") for _ in range(n)
        )
        for n in (rng.randint(0, 120) for _ in range(2000))
    ]
    found = [[m.span() for m in _TOKEN.finditer(t)] for t in texts]
    assert sum(map(len, found)) > 200
    assert found == [[m.span() for m in anchored.finditer(t)] for t in texts]


def test_every_gate_regex_belongs_to_an_installed_detector() -> None:
    """Each pattern gate is keyed by a pattern of the installed detect-secrets: one that changed would lose its
    gate silently (scanned on its words again: slower, never a secret missed)."""
    from promcp.redact import _PATTERN_GATES, _get_scanner

    patterns = {d.pattern.pattern for d in _get_scanner().patterns}
    assert set(_PATTERN_GATES) <= patterns
    assert sum(d.gate is not None for d in _get_scanner().patterns) == len(_PATTERN_GATES)


def test_the_keyed_scans_try_only_where_a_match_can_start() -> None:
    """The assignment, phrase and bare-password patterns are tried only where one of their secret words begins
    (promcp/redact.py ``_STARTS``): on assignments and phrases of every secret word, cut, joined and lower-cased,
    the matches equal the pattern's own scan of every position."""
    import random

    from promcp.redact import _STARTS, _keyed_matches, redact_surface

    words = [
        *("password", "passwd", "passphrase", "passcode", "pwd", "secret", "token", "api_key", "api-key"),
        *("apikey", "access_key", "accesskey", "private-key", "credential", "credentials", "auth"),
        *("authorization", "cookie", "session_id", "sessionid", "signature", "pin", "api key", "access key"),
    ]
    seps = [" = ", ":", '": "', '\\": \\"', " is ", " was ", " ", "=", " : "]
    values = ["hunter2", "'s3cr3t value'", '"abc\\"def"', "x9$", "a", "Pa55-word!", "tok_ABC123xyz"]
    rng = random.Random(27)
    texts = []
    for _ in range(3000):
        parts = [
            rng.choice(["", "my ", "AWS_SECRET_", "x", '{"', "the "])
            + rng.choice(words)
            + rng.choice(seps)
            + rng.choice(values)
            for _ in range(rng.randint(1, 3))
        ]
        text = rng.choice([" ", ", ", "\n", "", "; "]).join(parts)
        cut = rng.randint(0, len(text))
        texts.append(text[:cut] if rng.random() < 0.3 else text)
    found = 0
    for text in texts:
        low = text.lower()
        for pattern in _STARTS:
            want = [m.span() for m in pattern.finditer(low)]
            assert [m.span() for m in _keyed_matches(pattern, low)] == want, (pattern.pattern, text)
            found += len(want)
    assert found > 2000  # the texts do hold what the patterns match
    assert "hunter2" not in redact_surface("the password is hunter2 and api_key=hunter2")
