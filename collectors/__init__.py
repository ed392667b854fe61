"""promcp.collectors — reconstruct the stages from off-the-shelf clients' exports (topology ``c-ots``).

>>> from promcp.collectors import import_path
>>> summary = import_path("conversations.json", "traces")   # format auto-detected; many files, one run
>>> summary.imported, summary.skipped, summary.problems.items[:3]

Formats (:data:`FORMATS`): ``claude-ai`` (Claude.ai / Claude Desktop ``conversations.json`` or ``.jsonl``),
``chatgpt`` (ChatGPT ``conversations.json``), ``claude-code`` (a session ``.jsonl`` or a ``~/.claude/projects``
folder). Files are streamed (a 200 MB one-line array is never loaded whole); every problem is reported once with
its conversation id and byte offset or line, and the valid conversations are imported. Stage mapping, timing
quality and token sources per format: docs/import.md.
"""

from __future__ import annotations

from promcp.collectors._detect import detect_format
from promcp.collectors._formats import FORMATS
from promcp.collectors._importer import ImportSummary, events_of, import_path, parse_path
from promcp.collectors._problems import Problem, Problems

__all__ = [
    "FORMATS",
    "ImportSummary",
    "Problem",
    "Problems",
    "detect_format",
    "events_of",
    "import_path",
    "parse_path",
]
