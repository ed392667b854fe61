"""Markdown tables (``--format markdown``): for READMEs, issues and notebooks."""

from __future__ import annotations

from promcp.analysis.views.base import Document, Renderer


class MarkdownRenderer(Renderer):
    """GitHub-flavoured Markdown: a bold title per table, pipe tables, notes as quotes."""

    name = "markdown"
    output_file_extension = "md"

    def render(self, doc: Document) -> str:
        lines = [f"**{doc.title}**" + (f" — _{doc.header}_" if doc.header else ""), ""]
        for table in doc.tables:
            lines += [f"**{table.title}**", ""]
            if not table.rows:
                lines += [f"_{table.empty}_", ""]
                continue
            lines.append("| " + " | ".join(_md(c.title) for c in table.columns) + " |")
            lines.append("|" + "|".join("---:" if c.numeric else "---" for c in table.columns) + "|")
            lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in table.cells()]
            lines.append("")
            lines += [f"> note: {n}" for n in table.notes]
            if table.notes:
                lines.append("")
        lines += [f"> note: {n}" for n in doc.notes]
        return "\n".join(lines).rstrip() + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
