"""A Claude Code projects folder of any size, built from the public session samples (never committed).

The sessions of ``../shared/data/exports/claude-code-*.jsonl`` are copied round-robin, each copy with distinct ids
(session id, line uuids, message ids, request ids, tool-use ids get the copy number mixed in), into
``<dir>/projects/-sample-<n % 20>/<session>.jsonl`` — the layout of ``~/.claude/projects``. Used by
tests/perf/bench_import_corpus.py; the folder is built at run time into a temporary directory.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPORTS = ROOT.parent / "shared" / "data" / "exports"
if not EXPORTS.is_dir():  # a worktree one level deeper (wt/<name>)
    EXPORTS = ROOT.parents[1] / "shared" / "data" / "exports"

_UUID = re.compile(rb"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-)([0-9a-f]{12})")
_IDS = re.compile(rb'"((?:msg|req|toolu)_[A-Za-z0-9_]+)"')


def samples() -> list[bytes]:
    files = sorted(EXPORTS.glob("claude-code-*.jsonl"))
    if not files:
        raise SystemExit(f"no Claude Code samples in {EXPORTS}")
    return [f.read_bytes() for f in files]


def _copy(data: bytes, n: int) -> bytes:
    tag = f"{n:08x}".encode()
    data = _UUID.sub(lambda m: m.group(1) + tag + m.group(2)[8:], data)
    return _IDS.sub(lambda m: b'"' + m.group(1) + b"_c" + tag + b'"', data)


def build(folder: Path, sessions: int, first: int = 0) -> tuple[int, int]:
    """Write sessions ``first``..``first + sessions - 1`` under ``folder``; return (files, bytes)."""
    src = samples()
    total = 0
    for n in range(first, first + sessions):
        data = _copy(src[n % len(src)], n)
        project = folder / f"-sample-{n % 20}"
        project.mkdir(parents=True, exist_ok=True)
        sid = _UUID.search(data.split(b'"sessionId":"', 1)[1])
        name = (sid.group(0).decode() if sid else f"session-{n}") + ".jsonl"
        (project / name).write_bytes(data)
        total += len(data)
    return sessions, total


def sessions_for_mb(mb: float) -> int:
    """How many sessions make about ``mb`` MB (the samples' mean size)."""
    src = samples()
    mean = sum(len(s) for s in src) / len(src)
    return max(1, round(mb * 1_000_000 / mean))
