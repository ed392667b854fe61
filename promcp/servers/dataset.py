"""``promcp mcp DATASET``: promcp as a stdio MCP server over one dataset folder, read only (docs/mcp.md).

Tools (each answers with structured content, plus a short text and the same JSON as text for clients that read
text only; every answer is bounded: :data:`MAX_ROWS` rows per table and :data:`MAX_JSON_CHARS` characters):

==============  ==================================================================================================
``report``      phase and origin tables (or other ``promcp report`` sections) of the latest run or a named one
``top_schemas`` the costliest tool definitions (schema tokens, re-send cost) and the tools no task ever called,
                with their servers
``whatif``      tokens per LLM call under each schema/routing strategy (``promcp whatif``)
``diff``        two runs side by side (``promcp diff``; default: the two latest)
``footprint``   one MCP server's tools tax (``promcp footprint``): a URL always; a command only when the server
                was started with ``--allow-spawn``
==============  ==================================================================================================

Reading never writes to the dataset (promcp's readers never do), and the server does not record itself: it drops
``PROMCP_OUT`` / ``PROMCP_RUN_ID`` from its environment, sets ``PROMCP_INSTRUMENT=0`` for anything it starts, and
undoes ``promcp.instrument()`` if it runs under ``python -m promcp.shims.auto``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import ConfigError, PromcpError

#: Rows kept per table of an answer.
MAX_ROWS: Final = 50
#: Characters of an answer's JSON (rows are dropped from the longest table until it fits).
MAX_JSON_CHARS: Final = 24_000
#: Report sections the ``report`` tool serves (``tokenizers`` re-tokenizes content: too slow for a chat turn).
REPORT_SECTIONS: Final = (
    "phases",
    "segments",
    "init",
    "origins",
    "resend",
    "tasks",
    "errors",
    "cost",
    "cache",
    "schema_tax",
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _bounded(body: dict[str, Any], max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """``body`` with at most ``max_rows`` rows per list under ``tables``, then rows dropped from the longest
    table until its JSON fits :data:`MAX_JSON_CHARS`; ``truncated`` says what was left out."""
    tables = body.get("tables")
    if not isinstance(tables, dict):
        return body
    cut: dict[str, int] = {}
    for name, rows in tables.items():
        if isinstance(rows, list) and len(rows) > max_rows:
            cut[name] = len(rows)
            tables[name] = rows[:max_rows]
    while len(json.dumps(body, default=str)) > MAX_JSON_CHARS:
        name = max(tables, key=lambda n: len(tables[n]) if isinstance(tables[n], list) else 0)
        rows = tables[name]
        if not isinstance(rows, list) or len(rows) <= 1:
            break
        cut.setdefault(name, len(rows))
        tables[name] = rows[: max(len(rows) // 2, 1)]
    if cut:
        body["truncated"] = {n: f"{len(tables[n])} of {total} rows" for n, total in cut.items()}
    return body


def _answer(summary: str, body: dict[str, Any]) -> CallToolResult:
    """The summary as the first text block and as ``summary`` in the structured content (a client such as Claude
    Code forwards only the structured content to the model when there is one), then the JSON as text."""
    data = json.loads(json.dumps(_bounded({"summary": summary, **body}), default=str))
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=summary), TextContent(type="text", text=text)],
        structured_content=data,
    )


def _failed(exc: BaseException) -> CallToolResult:
    line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return CallToolResult(content=[TextContent(type="text", text=f"error: {line}")], is_error=True)


def _document_body(doc: Any) -> dict[str, Any]:
    from promcp.analysis.views import get_renderer

    body: dict[str, Any] = json.loads(get_renderer("json").render(doc))
    return body


class DatasetTools:
    """The tools' logic over one dataset (separate from the MCP wiring, so it is testable without a client)."""

    def __init__(self, dataset: str | Path, *, allow_spawn: bool = False) -> None:
        self.dataset = Path(dataset)
        self.allow_spawn = allow_spawn

    def _selection(self, run: str | None) -> dict[str, Any]:
        return {"runs": [run], "latest": 0} if run else {"runs": None, "latest": 1}

    def check(self) -> None:
        """Fail at start for a dataset that is not there (cheap: the content is read, and checked, per call)."""
        if not self.dataset.exists():
            raise ConfigError(f"{self.dataset}: no such dataset folder or file", source="promcp mcp")

    def report(
        self, run: str | None = None, sections: Sequence[str] | None = None, include_incomplete: bool = False
    ) -> tuple[str, dict[str, Any]]:
        from promcp.analysis.report import report
        from promcp.analysis.views.report import report_document

        wanted = list(sections or ("phases", "origins"))
        unknown = [s for s in wanted if s not in REPORT_SECTIONS]
        if unknown:
            raise ConfigError(
                f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(REPORT_SECTIONS)}",
                source="sections",
            )
        rep = report(
            str(self.dataset), sections=wanted, include_incomplete=include_incomplete, **self._selection(run)
        )
        body = _document_body(report_document(rep))
        summary = (
            f"promcp report of {run or 'the latest run'}: {body.get('events', 0):,} events, "
            f"{body.get('complete_tasks', 0)} of {body.get('tasks', 0)} tasks complete; sections "
            f"{', '.join(wanted)}"
        )
        return summary, body

    def top_schemas(self, limit: int = 10, run: str | None = None) -> tuple[str, dict[str, Any]]:
        from promcp.analysis.engine import select
        from promcp.analysis.views.html._schemas import schema_weight

        limit = max(1, min(int(limit), MAX_ROWS))
        events = select(str(self.dataset), **self._selection(run))
        weight, n_tools = schema_weight(events, 1_000_000)
        rows = [
            {k: (None if v != v else v) for k, v in r.items()}  # NaN → None
            for r in weight.to_dict(orient="records")
        ]
        rows.sort(key=lambda r: (-(r.get("schema_tokens") or 0), -(r.get("tokens_total") or 0), r["tool"]))
        servers: dict[str, dict[str, Any]] = {}
        for r in rows:
            s = servers.setdefault(
                str(r["server"]),
                {
                    "server": r["server"],
                    "tools": 0,
                    "schema_tokens": 0.0,
                    "never_called": 0,
                    "tokenizer": r.get("tokenizer"),
                },
            )
            s["tools"] += 1
            s["schema_tokens"] += r.get("schema_tokens") or 0
            s["never_called"] += 0 if r.get("called") else 1
        never = [
            {"server": r["server"], "tool": r["tool"], "schema_tokens": r.get("schema_tokens")}
            for r in rows
            if not r.get("called")
        ]
        runs = sorted({str(r["run_id"]) for r in rows})
        body = {
            "runs": runs,
            "tools": n_tools,
            "never_called_count": len(never),
            "tables": {
                "top": rows[:limit],
                "servers": sorted(servers.values(), key=lambda s: -s["schema_tokens"]),
                "never_called": never,
            },
        }
        head = rows[0] if rows else None
        summary = (
            f"{n_tools} tool definitions in {', '.join(runs) or 'no run'}; costliest: "
            + (
                f"{head['server']}/{head['tool']} ({head.get('schema_tokens') or 0:,.0f} schema tokens)"
                if head
                else "none"
            )
            + f"; {len(never)} never called"
        )
        return summary, body

    def whatif(self, run: str | None = None, k: int = 3, scorer: str = "bm25") -> tuple[str, dict[str, Any]]:
        from promcp.analysis.views.whatif import whatif_document
        from promcp.analysis.whatif import SCORERS, whatif_dataset

        if scorer not in SCORERS:
            raise ConfigError(f"unknown scorer {scorer!r}; choose from {', '.join(SCORERS)}", source="scorer")
        result = whatif_dataset(str(self.dataset), k=max(1, int(k)), scorer=scorer, **self._selection(run))
        body = _document_body(whatif_document(result))
        rows = body.get("tables", {}).get("summary") or []
        best = max(rows, key=lambda r: r.get("reduction_pct") or 0, default=None)
        summary = f"what-if over {body.get('llm_calls', 0)} LLM call(s), k={k}, scorer {scorer}" + (
            f"; largest cut: {best['strategy']} ({best.get('reduction_pct') or 0:.1f}%)" if best else ""
        )
        return summary, body

    def diff(self, a: str | None = None, b: str | None = None) -> tuple[str, dict[str, Any]]:
        from promcp.analysis.diff import diff
        from promcp.analysis.engine import runs_of
        from promcp.analysis.views.diff import diff_document

        if (a is None) != (b is None):
            raise ConfigError("name two runs (a and b), or none for the two latest", source="diff")
        if a is None or b is None:
            refs = runs_of(str(self.dataset))
            if len(refs) < 2:
                raise ConfigError(f"needs two runs to compare; the dataset has {len(refs)}", source="diff")
            a, b = refs[-2].run_id, refs[-1].run_id
        d = diff(str(self.dataset), str(self.dataset), runs_a=[a], runs_b=[b])
        body = _document_body(diff_document(d, a, b))
        return f"promcp diff: {a} (A) against {b} (B)", body

    def footprint(
        self,
        command: Sequence[str] | None = None,
        url: str | None = None,
        tokenizers: Sequence[str] | None = None,
        timeout_s: float = 30.0,
    ) -> tuple[str, dict[str, Any]]:
        from promcp.analysis.views.footprint import footprint_document
        from promcp.footprint import Target, measure

        if command and not self.allow_spawn:
            raise ConfigError(
                "starting a command is off: restart this server with `promcp mcp --allow-spawn DATASET`, or "
                "give the url of a running server",
                source="footprint",
            )
        names = list(tokenizers or (DEFAULT_TOKENIZER,))
        fp = measure(Target(command=tuple(command or ()), url=url), names, timeout_s=min(timeout_s, 120.0))
        body = _document_body(footprint_document(fp))
        totals = ", ".join(f"{fp.total(n):,} ({n})" for n in fp.tokenizers)
        return f"{fp.server}: {len(fp.tools)} tools, {totals} schema tokens", body


def build_server(tools: DatasetTools) -> MCPServer:
    """The MCP server (mcp SDK 2.x) exposing ``tools``."""
    server = MCPServer(
        "promcp",
        instructions=f"Token-flow profile of the MCP agent runs recorded in {tools.dataset} (read only): where "
        "the tokens went per phase and origin, which tool definitions cost most, what slimming or routing "
        "would save.",
        log_level="WARNING",
    )

    def call(fn: Callable[[], tuple[str, dict[str, Any]]]) -> CallToolResult:
        try:
            return _answer(*fn())
        except (PromcpError, OSError, ValueError) as exc:
            return _failed(exc)

    @server.tool(annotations=READ_ONLY)
    def report(
        run: str | None = None, sections: list[str] | None = None, include_incomplete: bool = False
    ) -> CallToolResult:
        """Phase and origin tables (tokens and latency per phase, LLM input by origin) of the latest run, or of
        the run named by `run` (an id, a unique prefix or the suffix after '-'). `sections` picks other tables:
        phases, segments, init, origins, resend, tasks, errors, cost, cache, schema_tax."""
        return call(lambda: tools.report(run, sections, include_incomplete))

    @server.tool(annotations=READ_ONLY)
    def top_schemas(limit: int = 10, run: str | None = None) -> CallToolResult:
        """The costliest tool definitions (schema tokens and what re-sending them cost) with their servers,
        and every tool no task ever called, of the latest run or of `run`."""
        return call(lambda: tools.top_schemas(limit, run))

    @server.tool(annotations=READ_ONLY)
    def whatif(run: str | None = None, k: int = 3, scorer: str = "bm25") -> CallToolResult:
        """Tokens per LLM call under schema slimming, $ref dedup, top-k routing, a search tool, a two-phase pool
        and result-field filtering, recomputed over the recorded calls (latest run or `run`)."""
        return call(lambda: tools.whatif(run, k, scorer))

    @server.tool(annotations=READ_ONLY)
    def diff(a: str | None = None, b: str | None = None) -> CallToolResult:
        """Two runs side by side, tokens and latency per phase and per origin, with the change (default: the
        two latest runs)."""
        return call(lambda: tools.diff(a, b))

    @server.tool(annotations=READ_ONLY)
    def footprint(
        url: str | None = None,
        command: list[str] | None = None,
        tokenizers: list[str] | None = None,
        timeout_s: float = 30.0,
    ) -> CallToolResult:
        """One MCP server's tools tax without an agent: start it (or connect to `url`), list its tools, and
        count each tool's schema tokens under `tokenizers` (default o200k_base), bytes, start-up time and what
        slimming would save. `timeout_s` bounds the start-up and each page (at most 120)."""
        return call(lambda: tools.footprint(command, url, tokenizers, timeout_s))

    return server


def _no_self_recording() -> None:
    """Nothing this process does may be recorded into a dataset (least of all the one it reads)."""
    for name in ("PROMCP_OUT", "PROMCP_RUN_ID"):
        os.environ.pop(name, None)
    os.environ["PROMCP_INSTRUMENT"] = "0"
    shims = sys.modules.get("promcp.shims")
    if shims is not None and shims.is_instrumented():
        from promcp.recorder import current_recorder

        rec = current_recorder()
        if rec is not None and rec.events == 0:
            rec.discard()  # an empty run must not be finalized into the dataset (it would be the "latest")
        shims.uninstrument()


def serve(dataset: str | Path, *, allow_spawn: bool = False) -> None:
    """Check ``dataset``, then serve the tools on stdio until the client closes it."""
    _no_self_recording()
    tools = DatasetTools(dataset, allow_spawn=allow_spawn)
    tools.check()
    build_server(tools).run("stdio")
