"""Fuzz: mutated exports (bytes, structure, hostile shapes) are parsed without a single unclassified problem.

"Never raises" alone would prove little: the importer's boundary catches every exception. So each case asserts
that no problem is of the internal-error kind (an exception that escaped a parser or the event builder: a bug),
i.e. every problem the input caused was recognised and classified by the code that met it. ≥ 11,000 cases across
the formats (derandomized, small inputs, in memory, no Recorder), including nesting around the depth bound,
strings around the value-size bound and alias-style repetition of one subtree.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promcp import tokenizers
from promcp.collectors import _stream, chatgpt, claude_ai, claude_code
from promcp.collectors._build import Builder
from promcp.collectors._importer import build_guarded, parse_guarded
from promcp.collectors._problems import INTERNAL, Problems
from promcp.collectors._stream import MAX_DEPTH, SanitizedReader, iter_array, iter_jsonl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "exports"
CLAUDE = (FIXTURES / "claude-ai-cases.json").read_bytes()
GPT = (FIXTURES / "chatgpt-tools.json").read_bytes()
CODE = (FIXTURES / "claude-code-project" / "sess1.jsonl").read_bytes()
BUILDER = Builder(tokenizers.get("cl100k_base"), provider="x")
SETTINGS = settings(
    max_examples=2500, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def _classified(problems: Problems) -> None:
    internal = [str(p) for p in problems.items if p.kind == INTERNAL]
    assert not internal, internal
    assert all(p.where() for p in problems.items)


def _array(data: bytes, parse: Any) -> Problems:
    problems = Problems("f.json")
    reader = SanitizedReader(io.BytesIO(data), problems, "f.json")
    for i, doc in enumerate(iter_array(reader, problems)):
        conv = parse_guarded(parse, doc, problems, i, reader.consumed)
        if conv is not None:
            build_guarded(BUILDER, conv, problems)
    _classified(problems)
    return problems


def _jsonl(data: bytes) -> Problems:
    problems = Problems("s.jsonl")
    conv = claude_code.parse_session(iter_jsonl(io.BytesIO(data), problems), problems, Path("s.jsonl"))
    build_guarded(BUILDER, conv, problems)
    _classified(problems)
    return problems


byte_edits = st.lists(
    st.tuples(st.integers(0, 10**6), st.binary(min_size=0, max_size=4), st.integers(0, 8)), max_size=4
)


def _mutate(data: bytes, edits: list[tuple[int, bytes, int]]) -> bytes:
    out = bytearray(data)
    for pos, insert, delete in edits:
        p = pos % (len(out) + 1)
        out[p : p + delete] = insert
    return bytes(out)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.just("2026-05-01T10:00:05.000000Z"),
)
values = st.recursive(
    scalars,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)),
    max_leaves=6,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _paths(v, (*prefix, i))
    return found


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: _replace(obj[head], rest, value)}
    copy = list(obj)
    copy[head] = _replace(copy[head], rest, value)
    return copy


CLAUDE_DOC = json.loads(CLAUDE)
GPT_DOC = json.loads(GPT)
CLAUDE_PATHS = _paths(CLAUDE_DOC)
GPT_PATHS = _paths(GPT_DOC)


@SETTINGS
@given(byte_edits)
def test_claude_ai_bytes(edits: list[tuple[int, bytes, int]]) -> None:
    _array(_mutate(CLAUDE, edits), claude_ai.parse_conversation)


@SETTINGS
@given(byte_edits)
def test_chatgpt_bytes(edits: list[tuple[int, bytes, int]]) -> None:
    _array(_mutate(GPT, edits), chatgpt.parse_conversation)


@SETTINGS
@given(byte_edits)
def test_claude_code_bytes(edits: list[tuple[int, bytes, int]]) -> None:
    _jsonl(_mutate(CODE, edits))


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 10**6), values), min_size=1, max_size=3), st.booleans())
def test_structure_mutations(changes: list[tuple[int, Any]], gpt: bool) -> None:
    doc, paths = (GPT_DOC, GPT_PATHS) if gpt else (CLAUDE_DOC, CLAUDE_PATHS)
    for index, value in changes:
        paths = _paths(doc)
        doc = _replace(doc, paths[index % len(paths)], value)
    data = json.dumps(doc, allow_nan=True).encode()
    _array(data, chatgpt.parse_conversation if gpt else claude_ai.parse_conversation)


def _deep(n: int) -> Any:
    value: Any = "bottom"
    for i in range(n):
        value = [value] if i % 2 else {"k": value}
    return value


#: Hostile shapes around the bounds (the value-size bound is lowered to 256 characters for these cases)
SMALL_VALUE_BOUND = 256
#: stands for 5,000 levels of nesting, spliced into the bytes (json.dumps itself cannot nest that deep)
DEEP_MARK = "__promcp_deep_5000__"
_DEEP_BYTES = b"[" * 5000 + b"]" * 5000
hostile = st.one_of(
    st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3).map(_deep),
    st.just(DEEP_MARK),
    st.integers(SMALL_VALUE_BOUND - 2, SMALL_VALUE_BOUND + 2).map(lambda n: "é" * n),
    st.just("x" * 20_000),
    st.tuples(st.integers(2, 3000), values).map(lambda kv: [kv[1]] * kv[0]),  # one subtree, k references
)


@settings(
    max_examples=1200, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(st.lists(st.tuples(st.integers(0, 10**6), hostile), min_size=1, max_size=2), st.integers(0, 2))
def test_hostile_structures(changes: list[tuple[int, Any]], fmt: int) -> None:
    """Deep nesting, huge strings and alias-style repetition at any place of a real export, in every format."""
    import unittest.mock

    if fmt == 2:
        lines = [json.loads(x) for x in CODE.splitlines() if x.strip()]
        doc: Any = lines
    else:
        doc = GPT_DOC if fmt else CLAUDE_DOC
    for index, value in changes:
        paths = _paths(doc)
        doc = _replace(doc, paths[index % len(paths)], value)
    with unittest.mock.patch.object(_stream, "MAX_VALUE_CHARS", SMALL_VALUE_BOUND):
        if fmt == 2:
            docs = doc if isinstance(doc, list) else [doc]
            data = b"\n".join(json.dumps(x, allow_nan=True).encode() for x in docs) + b"\n"
            problems = _jsonl(data.replace(f'"{DEEP_MARK}"'.encode(), _DEEP_BYTES))
        else:
            data = json.dumps(doc, allow_nan=True).encode().replace(f'"{DEEP_MARK}"'.encode(), _DEEP_BYTES)
            problems = _array(data, chatgpt.parse_conversation if fmt else claude_ai.parse_conversation)
    if fmt != 2 and not isinstance(doc, list):
        return  # the file is no longer an array: reported as such, nothing below applies
    kinds = problems.by_kind()
    strings = [v for v in _leaves(doc) if isinstance(v, str)]
    if DEEP_MARK in strings:
        assert "too_deep" in kinds
    elif any(len(v) > SMALL_VALUE_BOUND for v in strings) and "too_deep" not in kinds:
        assert "value_truncated" in kinds  # (a string inside a line skipped as too deep is never read)


def _leaves(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _leaves(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _leaves(v)]
    return [obj]
