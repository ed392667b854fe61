"""Fuzz: mutated exports (bytes and structure) never raise out of the parsers or the event builder.

≥ 10,000 cases in total across the formats (derandomized, small inputs, in memory, no Recorder).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promcp import tokenizers
from promcp.collectors import chatgpt, claude_ai, claude_code
from promcp.collectors._build import Builder
from promcp.collectors._importer import build_guarded, parse_guarded
from promcp.collectors._problems import Problems
from promcp.collectors._stream import SanitizedReader, iter_array, iter_jsonl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "exports"
CLAUDE = (FIXTURES / "claude-ai-cases.json").read_bytes()
GPT = (FIXTURES / "chatgpt-tools.json").read_bytes()
CODE = (FIXTURES / "claude-code-project" / "sess1.jsonl").read_bytes()
BUILDER = Builder(tokenizers.get("cl100k_base"), provider="x")
SETTINGS = settings(
    max_examples=2500, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def _array(data: bytes, parse: Any) -> None:
    problems = Problems("f.json")
    reader = SanitizedReader(io.BytesIO(data), problems, "f.json")
    for i, doc in enumerate(iter_array(reader, problems)):
        conv = parse_guarded(parse, doc, problems, i, reader.consumed)
        if conv is not None:
            build_guarded(BUILDER, conv, problems)
    assert all(p.where() for p in problems.items)


def _jsonl(data: bytes) -> None:
    problems = Problems("s.jsonl")
    conv = claude_code.parse_session(iter_jsonl(io.BytesIO(data), problems), problems, Path("s.jsonl"))
    events = build_guarded(BUILDER, conv, problems)
    assert events is not None  # Claude Code lines are all guarded inside the parser


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
