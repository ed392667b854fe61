"""JSON (``--format json``): the document's facts, notes and every data table as records, for scripts.

Shape (every command): ``{**meta, "notes": [...], "tables": {name: [record, ...]}}``; NaN becomes ``null``;
``notes`` holds the document's notes, then each table's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from promcp.analysis.views.base import Document, Renderer

if TYPE_CHECKING:
    import pandas as pd


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as JSON-ready records (NaN/NA → None, numpy scalars → Python)."""
    out: list[dict[str, Any]] = json.loads(frame.to_json(orient="records", double_precision=6))
    return out


class JsonRenderer(Renderer):
    name = "json"
    output_file_extension = "json"

    def render(self, doc: Document) -> str:
        body = {
            **doc.meta,
            "notes": [*doc.notes, *(n for t in doc.tables for n in t.notes)],
            "tables": {name: records(frame) for name, frame in doc.datasets().items()},
        }
        return json.dumps(body, indent=2, default=str) + "\n"
