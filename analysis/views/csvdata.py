"""CSV (``--format csv``): one tidy table of a document, raw numbers in long format, for scripts."""

from __future__ import annotations

import io

from promcp.analysis.views.base import Document, Renderer
from promcp.errors import ConfigError


class CsvRenderer(Renderer):
    """Writes the data table ``table`` (default: the document's only one, or its first)."""

    name = "csv"
    output_file_extension = "csv"

    def __init__(self, table: str | None = None) -> None:
        self.table = table

    def render(self, doc: Document) -> str:
        data = doc.datasets()
        if not data:
            return ""
        name = self.table or next(iter(data))
        if name not in data:
            raise ConfigError(
                f"table {name!r} is not in this output; available: {', '.join(data)}", source="--table"
            )
        buf = io.StringIO()
        data[name].to_csv(buf, index=False)
        return buf.getvalue()
