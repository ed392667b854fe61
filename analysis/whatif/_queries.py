"""Read routing queries: JSON Lines, one query per line.

Understood keys: ``query`` or ``text`` (or ``task_description``/``question``) for the text; ``correct_tool``
(tool-rot), ``expected_tool`` or ``expected_tools`` (a name or a list) for the tools the query should reach.
Bad lines raise :class:`~promcp.errors.ConfigError` naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

from promcp.analysis.whatif._catalog_eval import Query
from promcp.errors import ConfigError

_TEXT_KEYS = ("query", "text", "task_description", "question")
_EXPECTED_KEYS = ("correct_tool", "expected_tool", "expected_tools")


def read_queries(path: str | Path) -> list[Query]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read queries: {exc.strerror}", source=str(path)) from None
    queries = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"not JSON: {exc}", source=str(path), line=lineno) from None
        if not isinstance(obj, dict):
            raise ConfigError("expected a JSON object", source=str(path), line=lineno)
        text = next((obj[k] for k in _TEXT_KEYS if isinstance(obj.get(k), str)), None)
        if text is None:
            raise ConfigError(
                f"no query text (one of {', '.join(_TEXT_KEYS)})", source=str(path), line=lineno
            )
        expected: set[str] = set()
        for key in _EXPECTED_KEYS:
            value = obj.get(key)
            if isinstance(value, str) and value:
                expected.add(value)
            elif isinstance(value, list):
                expected.update(str(v) for v in value if v)
        queries.append(Query(text, frozenset(expected)))
    return queries
