"""Bounded-memory readers: the items of one big top-level JSON array, or the objects of a JSONL file.

``conversations.json`` is one array that can be hundreds of MB on one line, so it is never ``json.load``-ed: ijson
(C backend) parses it into events and :func:`iter_array` builds one conversation at a time. Bytes go through an
incremental UTF-8 decoder first, so invalid UTF-8 is replaced (and reported with its byte offset) instead of
stopping the parse; lone surrogate escapes (``\\ud800``) are kept by the JSON parser and made safe later with
:func:`clean_text`. A truncated or broken array keeps every item read before the break and reports where it
stopped.

Bounds (hostile files): nesting deeper than :data:`MAX_DEPTH` stops the parse there (``too_deep``; ijson's own
item builder used memory quadratic in the depth: 23 GB for a 100 KB file 100,000 levels deep); a string longer
than :data:`MAX_VALUE_CHARS` is cut to that length (``value_truncated``); JSONL lines are held to the same two
bounds. A NUL byte is reported at its exact offset (``nul_byte``).
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import IO, Any

import ijson
import ijson.utils
import msgspec

from promcp.collectors._problems import Problems

CHUNK = 1 << 16
#: The largest read while one token is pending (see :func:`iter_array`).
MAX_CHUNK = 16 << 20
#: The deepest nesting accepted in an export (real exports nest about 12 levels; tool inputs a few more).
MAX_DEPTH = 256
#: The longest string value kept whole (characters); a longer one is cut to this length and reported.
MAX_VALUE_CHARS = 8 * 1024 * 1024


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
        #: byte offset of the first NUL byte seen (a JSON parser stops there)
        self.first_nul: int | None = None

    def read(self, size: int = CHUNK) -> bytes:
        if size == 0:  # ijson probes the type with read(0)
            return b""
        chunk = self._raw.read(size if size > 0 else CHUNK)
        return self._clean(chunk, final=not chunk)

    def _clean(self, chunk: bytes, final: bool) -> bytes:
        start = self.consumed
        self.consumed += len(chunk)
        if self.first_nul is None:
            nul = chunk.find(b"\x00")
            if nul >= 0:
                self.first_nul = start + nul
                self._problems.add(
                    "nul_byte",
                    "NUL byte in the input (not valid in JSON text)",
                    offset=start + nul,
                    line=self.line or None,
                )
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


class _Bound(Exception):
    """A bound of the reader was hit: parsing stops here (what was read before is kept)."""


class _Builder:
    """Builds the top-level array's items from ijson's basic events, with the depth and value-size bounds.

    Push-style: :meth:`feed` takes the events of one chunk and yields the items they complete; the state of a
    half-built item carries over to the next chunk.
    """

    def __init__(self, problems: Problems, reader: SanitizedReader) -> None:
        self.problems = problems
        self.reader = reader
        self.started = False
        self.done = False
        self.stack: list[tuple[Any, Any]] = []  # (container, key) of every open level above the current one
        self.cur: Any = None
        self.key: Any = None

    def string(self, value: str) -> str:
        if len(value) <= MAX_VALUE_CHARS:
            return value
        self.problems.add(
            "value_truncated",
            f"a string of {len(value):,} characters was cut to {MAX_VALUE_CHARS:,}",
            offset=self.reader.consumed,
            detail="value_truncated",
        )
        return value[:MAX_VALUE_CHARS]

    def feed(self, events: list[tuple[str, Any]]) -> Iterator[Any]:
        stack, cur, key = self.stack, self.cur, self.key
        try:
            for event, value in events:
                if not self.started:
                    self.started = True
                    if event != "start_array":
                        self.problems.add(
                            "bad_json", "the file is not a JSON array of conversations", offset=0
                        )
                        self.done = True
                    continue
                if self.done:
                    continue
                if event == "map_key":
                    key = value
                elif event == "start_map" or event == "start_array":
                    new: Any = {} if event == "start_map" else []
                    if cur is not None:
                        if len(stack) + 2 > MAX_DEPTH:
                            raise _Bound(f"JSON nested deeper than {MAX_DEPTH} levels")
                        if type(cur) is dict:
                            cur[key] = new
                        else:
                            cur.append(new)
                        stack.append((cur, key))
                    cur = new
                elif event == "end_map" or event == "end_array":
                    if stack:
                        cur, key = stack.pop()
                    elif cur is None:  # the end of the top-level array
                        self.done = True
                    else:
                        item, cur = cur, None
                        yield item
                else:
                    if type(value) is str:
                        value = self.string(value)
                    if cur is None:
                        yield value
                    elif type(cur) is dict:
                        cur[key] = value
                    else:
                        cur.append(value)
        finally:
            self.cur, self.key = cur, key


def iter_array(source: IO[bytes] | SanitizedReader, problems: Problems) -> Iterator[Any]:
    """Yield each element of the top-level JSON array in ``source`` (never the whole array in memory).

    ``reader.consumed`` is the byte offset when an item is yielded (within one 64 KiB chunk of its end). A
    truncated or broken array keeps the items before the break and reports where parsing stopped (a NUL byte: its
    exact offset). Nesting beyond :data:`MAX_DEPTH` stops the parse the same way; strings beyond
    :data:`MAX_VALUE_CHARS` are cut.

    Bytes are pushed into ijson's parser; while a chunk completes no event (one huge token: a string of 100 MB),
    the next read is twice as large (up to :data:`MAX_CHUNK`): the C parser re-scans a pending token on every
    chunk, which made a 100 MB string cost 84 s at a fixed 64 KiB and costs 0.6 s this way.
    """
    reader = _reader(source, problems)
    builder = _Builder(problems, reader)
    events: list[tuple[str, Any]] = ijson.utils.sendable_list()
    parser = ijson.basic_parse_coro(events, use_float=True)
    size = CHUNK
    while True:
        chunk = reader.read(size)
        error: Exception | None = None
        try:
            if chunk:
                parser.send(chunk)
            else:
                parser.close()  # raises on a truncated array
        except (ijson.JSONError, ValueError, UnicodeError, RecursionError) as exc:
            error = exc
        if events:  # what the parser read before an error still counts
            batch = events[:]
            del events[:]
            size = CHUNK
            try:
                yield from builder.feed(batch)
            except _Bound as exc:
                problems.add(
                    "too_deep",
                    f"{exc}: parsing stops here; the conversations before it were kept",
                    offset=reader.consumed,
                )
                return
        else:
            size = min(size * 2, MAX_CHUNK)
        if error is not None:
            _parse_error(error, reader, problems)
            return
        if not chunk:
            return


def _parse_error(exc: Exception, reader: SanitizedReader, problems: Problems) -> None:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    low = text.lower()
    truncated = isinstance(exc, ijson.IncompleteJSONError) and ("incomplete" in low or "premature" in low)
    problems.add(
        "truncated" if truncated else "bad_json",
        f"JSON stops parsing here ({text[:160]}); the conversations before it were kept",
        offset=_stop_offset(reader),
    )


def _stop_offset(reader: SanitizedReader) -> int:
    """Where a parse error happened: the first NUL byte when one was read (the parser stops at it), else the end
    of the chunk being parsed."""
    return reader.first_nul if reader.first_nul is not None else reader.consumed


_decode_json = msgspec.json.Decoder().decode


def iter_jsonl(source: IO[bytes] | SanitizedReader, problems: Problems) -> Iterator[tuple[int, Any]]:
    """Yield ``(1-based line number, value)`` for each JSON line; bad lines are reported once each and skipped.

    A line nested deeper than :data:`MAX_DEPTH` is skipped (``too_deep``); strings beyond :data:`MAX_VALUE_CHARS`
    are cut (``value_truncated``).
    """
    reader = _reader(source, problems)
    for number, line in enumerate(reader, 1):
        stripped = line.strip()
        if not stripped:
            continue
        try:
            try:
                obj = _decode_json(stripped)  # msgspec's parser: twice json.loads' speed, the same values
            except (
                ValueError,
                RecursionError,
            ):  # what it refuses json decides: NaN, 1e400, lone surrogates, errors
                obj = json.loads(stripped)  # (its own recursion limit stops a line thousands of levels deep)
            # only a line with that many brackets can be that deep: ordinary lines skip the walk
            if stripped.count(b"[") + stripped.count(b"{") > MAX_DEPTH and _too_deep(obj):
                raise RecursionError
        except RecursionError:
            problems.add(
                "too_deep",
                f"line nested deeper than {MAX_DEPTH} levels; skipped",
                line=number,
                detail=f"{reader.name}:{number}",
            )
            continue
        except ValueError as exc:
            kind = "truncated" if not line.endswith(b"\n") else "bad_json"
            problems.add(
                kind,
                f"line is not valid JSON ({str(exc)[:120]}); skipped",
                line=number,
                detail=f"{reader.name}:{number}",
            )
            continue
        if len(stripped) > MAX_VALUE_CHARS:
            obj = _cut_strings(obj, problems, number)
        yield number, obj


def _too_deep(obj: Any) -> bool:
    """Whether a parsed value nests deeper than :data:`MAX_DEPTH` (iterative, stops at the first such path)."""
    todo: list[tuple[Any, int]] = [(obj, 1)]
    while todo:
        value, depth = todo.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(value, dict):
            todo.extend((v, depth + 1) for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            todo.extend((v, depth + 1) for v in value if isinstance(v, dict | list))
    return False


def _cut_strings(obj: Any, problems: Problems, line: int) -> Any:
    """``obj`` with every string longer than :data:`MAX_VALUE_CHARS` cut (depth is already bounded)."""
    if isinstance(obj, str):
        if len(obj) <= MAX_VALUE_CHARS:
            return obj
        problems.add(
            "value_truncated",
            f"a string of {len(obj):,} characters was cut to {MAX_VALUE_CHARS:,}",
            line=line,
            detail="value_truncated",
        )
        return obj[:MAX_VALUE_CHARS]
    if isinstance(obj, list):
        return [_cut_strings(v, problems, line) for v in obj]
    if isinstance(obj, dict):
        return {k: _cut_strings(v, problems, line) for k, v in obj.items()}
    return obj


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
