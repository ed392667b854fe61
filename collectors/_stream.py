"""Bounded-memory readers: the items of one big top-level JSON array, or the objects of a JSONL file.

``conversations.json`` is one array that can be hundreds of MB on one line, so it is never ``json.load``-ed: ijson
(C backend) yields one conversation at a time. Bytes go through an incremental UTF-8 decoder first, so invalid UTF-8
is replaced (and reported with its byte offset) instead of stopping the parse; lone surrogate escapes (``\\ud800``)
are kept by the JSON parser and made safe later with :func:`clean_text`. A truncated or broken array keeps every
item read before the break and reports where it stopped.
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import IO, Any

import ijson

from promcp.collectors._problems import Problems

CHUNK = 1 << 16


class SanitizedReader:
    """A binary file wrapper that yields valid UTF-8 and counts the raw bytes consumed.

    Invalid bytes become U+FFFD (reported once per chunk with their byte offset). Works as ijson's input
    (``read``) and as a line iterator (JSONL).
    """

    def __init__(
        self,
        raw: IO[bytes],
        problems: Problems,
        name: str = "",
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        self._raw = raw
        self._problems = problems
        self.name = name
        self._on_bytes = on_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.consumed = 0
        self.line = 0  # lines handed out by iteration

    def read(self, size: int = CHUNK) -> bytes:
        if size == 0:  # ijson probes the type with read(0)
            return b""
        chunk = self._raw.read(size if size > 0 else CHUNK)
        return self._clean(chunk, final=not chunk)

    def _clean(self, chunk: bytes, final: bool) -> bytes:
        start = self.consumed
        self.consumed += len(chunk)
        if self._on_bytes is not None and chunk:
            self._on_bytes(len(chunk))
        try:
            text = self._decoder.decode(chunk, final)
        except UnicodeDecodeError as exc:
            data = bytes(exc.object)
            base = start - (len(data) - len(chunk))
            self._problems.add(
                "invalid_utf8",
                "invalid UTF-8 bytes replaced by U+FFFD",
                offset=max(base + exc.start, 0),
                line=self.line or None,
                detail=f"{self.name}:utf8:{start}",
            )
            self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
            text, keep = _decode_replacing(data, final)
            if keep:
                self._decoder.decode(keep, False)
        return text.encode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[bytes]:
        """The lines of the file (bytes, cleaned), each with its newline."""
        for raw_line in self._raw:
            self.line += 1
            yield self._clean(raw_line, final=False)
        tail = self._decoder.decode(b"", True)
        if tail:
            yield tail.encode("utf-8")


def _decode_replacing(data: bytes, final: bool) -> tuple[str, bytes]:
    """Decode with U+FFFD for bad bytes; an incomplete sequence at the very end is returned to be continued."""
    keep = b""
    if not final:
        for back in range(1, min(4, len(data)) + 1):
            lead = data[-back]
            if lead & 0xC0 != 0x80:  # first byte of the last sequence
                need = (
                    2
                    if lead >> 5 == 0b110
                    else 3
                    if lead >> 4 == 0b1110
                    else 4
                    if lead >> 3 == 0b11110
                    else 1
                )
                if need > back:
                    keep = data[-back:]
                    data = data[:-back]
                break
    return data.decode("utf-8", "replace"), keep


def _reader(source: IO[bytes] | SanitizedReader, problems: Problems) -> SanitizedReader:
    return source if isinstance(source, SanitizedReader) else SanitizedReader(source, problems)


def iter_array(source: IO[bytes] | SanitizedReader, problems: Problems) -> Iterator[Any]:
    """Yield each element of the top-level JSON array in ``source`` (never the whole array in memory).

    ``reader.consumed`` is the byte offset when an item is yielded (within one 64 KiB chunk of its end). A
    truncated or broken array keeps the items before the break and reports where parsing stopped.
    """
    reader = _reader(source, problems)
    try:
        yield from ijson.items(reader, "item", use_float=True, buf_size=CHUNK)
    except ijson.IncompleteJSONError as exc:
        text = (str(exc).strip().splitlines() or ["unexpected end of input"])[0]
        low = text.lower()
        kind = "truncated" if "incomplete" in low or "premature" in low else "bad_json"
        problems.add(
            kind,
            f"JSON stops parsing here ({text[:160]}); the conversations before it were kept",
            offset=reader.consumed,
        )
    except (ijson.JSONError, ValueError, UnicodeError, RecursionError) as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        problems.add(
            "bad_json",
            f"JSON stops parsing here ({text[:160]}); the conversations before it were kept",
            offset=reader.consumed,
        )


def iter_jsonl(source: IO[bytes] | SanitizedReader, problems: Problems) -> Iterator[tuple[int, Any]]:
    """Yield ``(1-based line number, value)`` for each JSON line; bad lines are reported once each and skipped."""
    reader = _reader(source, problems)
    for number, line in enumerate(reader, 1):
        stripped = line.strip()
        if not stripped:
            continue
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            kind = "truncated" if not line.endswith(b"\n") else "bad_json"
            problems.add(
                kind,
                f"line is not valid JSON ({str(exc)[:120]}); skipped",
                line=number,
                detail=f"{reader.name}:{number}",
            )
            continue
        yield number, obj


def clean_text(text: str) -> str:
    """Make text safe to encode as UTF-8: lone surrogates from ``\\udXXX`` escapes become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def as_text(value: Any) -> str:
    """A string field as text whatever type arrived (a list can arrive where a string was expected)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    except (TypeError, ValueError):
        return clean_text(str(value))


def to_ns(value: Any) -> int | None:
    """Wall-clock ns from an ISO-8601 string (``Z``/``+00:00``, 0–9 fraction digits) or Unix seconds; else None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value) or not (0 < value < 1e11):
            return None
        whole = int(value)
        return whole * 1_000_000_000 + round((value - whole) * 1e6) * 1000
    if not isinstance(value, str) or len(value) < 10 or len(value) > 64:
        return None
    text = value.strip()
    frac_ns = 0
    if "." in text[10:]:
        head, _, rest = text.partition(".")
        digits = ""
        for ch in rest:
            if not ch.isdigit():
                break
            digits += ch
        tail = rest[len(digits) :]
        if digits:
            frac_ns = int((digits + "000000000")[:9])
        text = head + tail
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    try:
        return int(dt.timestamp()) * 1_000_000_000 + frac_ns
    except (OverflowError, OSError, ValueError):
        return None


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (type drift in exports is normal)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []
