"""Assemble the self-contained page: the page data (JSON), the chart specs (JSON), the style sheet, the page script
and the Vega/Vega-Lite/vega-embed bundle, all inline. The Content-Security-Policy forbids every fetch, so a page
that tried to load anything from a network would fail visibly instead of leaking a request.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Final

import pandas as pd

from promcp.analysis.views.base import Column, Table
from promcp.analysis.views.html._charts import specs
from promcp.analysis.views.html._data import TASK_SECTIONS, PageData, json_in_script
from promcp.analysis.views.htmldoc import esc, notes_html, page_html, table_html, tables_html

#: Nothing is fetched: scripts and styles are inline, images are data: URLs, no connection is allowed.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)

SECTION_TEXT = {
    "summary": "Phase attribution per task as <code>promcp report</code> prints it, over the selected runs and "
    "their complete tasks (the notes above name any task left out). Each event counts once, in one phase "
    "(docs/accounting.md).",
    "tasks": "Every task of the selection with its outcome (only <em>ok</em> tasks are counted in the summary "
    "unless <code>--include-incomplete</code>), and every event that did not end ok, with its reason.",
    "timeline": "Every event of one task on its own clock: the session start-up it waited for (INIT per server), "
    "then S1…S6 per round. Bars are coloured by stage and labelled with the tokens the accounting counts for the "
    "event. A solid bar is measured exactly; a faint dashed bar is <em>bounded</em> (the true interval lies inside "
    "it, label ≤); a hollow dashed bar has <em>no timing</em> (drawn with a nominal length where it happened or "
    "after the previous event). Hover a bar for its tokenizer, token source and timing quality; the table lists "
    "the same for every bar.",
    "context": "Every LLM call of the selected task: its input tokens stacked by origin — the tool schemas are the "
    "red part; for an import, the light red <em>unobserved</em> part is what the export could not show (the "
    "client's system prompt and tool definitions). The axis fits the calls: the model's context window is a dashed "
    "line on it when a call fills half of it, otherwise a marker at the top names it. Calls that "
    "did not fit are marked overflow; where the provider reported prompt caching, a second bar splits the same "
    "input into cache read, cache write and uncached.",
    "schemas": "What each server's tool list weighs: schema tokens of one listing, and what the schemas cost over "
    "every LLM call that re-sent them (the number at a bar's end is how many calls carried it). Faint bars marked "
    "<em>never called</em> are tools no task used — pure tax.",
    "whatif": "What the same LLM calls would have cost under each schema strategy (docs/whatif.md): tokens per call, "
    "the share of recorded tool calls a strategy leaves visible to the model, and how the cost grows with the "
    "catalog.",
}


@functools.cache
def _asset(name: str) -> str:
    return resources.files("promcp.analysis.views.html").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def vega_bundle() -> str:
    """vega-embed + Vega-Lite + Vega as one script (vl-convert bundles the versions it ships, offline).

    Bundling takes seconds, so the result is kept in the user's cache directory, keyed by the vl-convert and
    Vega-Lite versions (``$XDG_CACHE_HOME/promcp``, else ``~/.cache/promcp``); a cache that cannot be read or
    written is simply rebuilt.
    """
    import altair as alt

    wanted = ".".join(
        alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    )  # the Vega-Lite the specs are written for
    cache = _cache_dir() / f"vega-bundle-{metadata.version('vl-convert-python')}-vl{wanted}.js"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = cache.read_text(encoding="utf-8")
        if text.endswith(_BUNDLE_END):
            return text
    import vl_convert as vlc

    version = wanted if wanted in vlc.get_vegalite_versions() else None
    bundle = vlc.javascript_bundle(vl_version=version)  # type: ignore[call-arg]  # the stub drops snippet's default
    text = _script_safe(bundle) + _BUNDLE_END
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, cache)
    return text


#: Marks a complete bundle (a cache file cut short by a crash is rebuilt).
_BUNDLE_END = "\n/* promcp: end of vega bundle */\n"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "promcp"


def library_versions() -> str:
    import altair as alt

    return (
        f"Vega-Lite {alt.SCHEMA_VERSION.lstrip('v')} via vl-convert {metadata.version('vl-convert-python')}"
    )


def _script_safe(text: str) -> str:
    """Text that cannot end the ``<script>`` element it sits in."""
    return text.replace("</script", "<\\/script").replace("<!--", "<\\!--")


#: The runs table of the summary: what each run is, its size and its wall time.
RUN_COLUMNS: Final = (
    Column("run_id", "run"),
    Column("topology"),
    Column("source"),
    Column("benchmark"),
    Column("models"),
    Column("tasks", kind="number"),
    Column("events", kind="number"),
    Column("tokens_in", "tokens in", "number"),
    Column("tokens_out", "tokens out", "number"),
    Column("wall_s", "wall s", "number", 1, help="last event end minus first event start"),
)
#: The first task's events, for a reader with scripts off (the script fills the same table for any task).
EVENT_COLUMNS: Final = (
    Column("n", "#", "number"),
    Column("stage"),
    Column("event"),
    Column("tokens", kind="number"),
    Column("token_column", "token column"),
    Column("tokenizer"),
    Column("token_source", "token source"),
    Column("timing_quality", "timing quality"),
    Column("start", "start ms", "number", 1),
    Column("dur", "duration ms", "number", 1),
    Column("status"),
)


def _runs_table(runs: pd.DataFrame) -> str:
    if runs.empty:
        return ""
    rows = [dict(r) for r in runs.to_dict(orient="records")]
    return table_html(Table("runs", "Runs", list(RUN_COLUMNS), rows), table_id="runs-table")


def _facts(h: dict[str, Any]) -> str:
    sel = h.get("selection") or {}
    chosen = "; ".join(f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sel.items())
    counted = "all counted" if h["include_incomplete"] else "complete ones counted"
    items = [
        ("dataset", f"<code>{esc(h['dataset'])}</code>" + (f" ({esc(chosen)})" if chosen else "")),
        ("events", f"{h['events']:,}"),
        ("runs", f"{h['runs']:,}"),
        ("tasks", f"{h['tasks']:,}, {h['complete_tasks']:,} complete ({counted})"),
        ("topologies", esc(", ".join(h["topologies"]) or h["missing"])),
        ("tokenizers", esc(", ".join(h["tokenizers"]) or "none recorded")),
        ("promcp", esc(h["promcp_version"])),
        ("written", esc(h["written_at"])),
    ]
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


_EVENT_HEAD = "<tr>" + "".join(f"<th>{esc(c.title)}</th>" for c in EVENT_COLUMNS) + "</tr>"


def _first_task_table(page: PageData) -> str:
    """The first task's events as plain HTML, for a reader with scripts off."""
    if page.timeline.empty:
        return ""
    first = page.timeline[page.timeline["key"] == page.timeline["key"].iloc[0]]
    rows = [
        {
            "n": b["i"] + 1,
            "stage": b["stage"],
            "event": b["row"].strip().split("  ", 1)[-1],
            "tokens": b["tokens"],
            "token_column": b["token_column"],
            "tokenizer": b["tokenizer"],
            "token_source": b["token_source"],
            "timing_quality": b["timing_quality"],
            "start": b["x0"] if b["placed"] == "measured" else None,
            "dur": b["dur"],
            "status": b["status"],
        }
        for b in first.to_dict(orient="records")
    ]
    table = Table("first-task", "The first task's events", list(EVENT_COLUMNS), rows)
    return f"<noscript><p>Scripts are off: the charts need them.</p>{table_html(table)}</noscript>"


def _whatif_section(page: PageData) -> str:
    w = page.whatif
    if w is None or not any(t.rows for t in w.tables):
        why = f"<p>{esc(w.tables[0].empty)}</p>" if w is not None and w.tables else ""
        return (
            f'<div class="note empty" id="whatif-missing">No what-if result for this dataset.{why} Write the page '
            "with <code>promcp report DATASET --html OUT --whatif</code> to compute one, or save one beside the "
            "data with <code>promcp whatif DATASET --format json &gt; DATASET/_whatif.json</code>.</div>"
        )
    return (
        f'<p class="taskfacts">What-if: {esc(w.header)}.</p>'
        '<div class="row"><div><h3>Tokens per LLM call</h3><div class="chart" id="chart-whatif-tokens"></div></div>'
        '<div><h3>Recorded tool calls left visible</h3><div class="chart" id="chart-whatif-recall"></div></div></div>'
        '<h3>Scaling: tokens per turn as the catalog grows</h3><div class="chart" id="chart-whatif-scaling"></div>'
        f"{tables_html(w.tables)}{notes_html(w.notes, 'tnotes')}"
    )


def render(page: PageData) -> str:
    """The whole page as one HTML document."""
    h = page.header
    doc = page.report
    summary = [t for t in doc.tables if t.name not in TASK_SECTIONS]
    tasks = [t for t in doc.tables if t.name in TASK_SECTIONS]
    spec_json = json_in_script(json.dumps(specs(), separators=(",", ":")))
    title = f"promcp report — {h['dataset']}"
    notes = notes_html([*doc.notes, *page.notes])
    body = f"""<header class="page">
<h1>promcp report <small>the tools tax, stage by stage</small></h1>
{_facts(h)}
{notes.replace('<ul class="notes">', '<ul class="notes" id="notes">', 1)}
</header>
<nav class="bar"><div class="in">
<a href="#summary">Summary</a><a href="#tasks">Tasks</a><a href="#timeline">Task timeline</a>
<a href="#context">Context fill</a><a href="#schemas">Schema weight</a><a href="#whatif">What-if</a>
<label>runs <select id="sel-run"></select></label>
<label>task <select id="sel-task"></select></label>
</div></nav>
<main>
<noscript><div class="note">Scripts are off: the tables below are complete; the charts need scripts.</div></noscript>
<section id="summary"><h2>Summary</h2><p class="lead">{SECTION_TEXT["summary"]}</p>
<div class="chart" id="chart-phases"></div>
{tables_html(summary)}
<div class="tables">{_runs_table(page.runs)}</div>
</section>
<section id="tasks"><h2>Tasks</h2><p class="lead">{SECTION_TEXT["tasks"]}</p>
{tables_html(tasks)}
</section>
<section id="timeline"><h2>Task timeline</h2><p class="lead">{SECTION_TEXT["timeline"]}</p>
<p class="taskfacts" id="task-facts"></p>
<div class="legend-q"><span class="q-exact">exact</span><span class="q-derived">derived</span>
<span class="q-bounded">bounded (true interval inside)</span><span class="q-none">no timing (nominal length)</span></div>
<div class="chart" id="chart-waterfall"></div>
<details open id="task-events-box"><summary>Events of this task (tokenizer, token source, timing quality of every bar)</summary>
<table class="data" id="task-events"><thead>{_EVENT_HEAD}</thead><tbody></tbody></table></details>
{_first_task_table(page)}
</section>
<section id="context"><h2>Context fill</h2><p class="lead">{SECTION_TEXT["context"]}</p>
<p class="taskfacts" id="context-facts"></p>
<label class="taskfacts" id="ctx-whole-label"><input type="checkbox" id="ctx-whole"> run the axis up to the
context window</label>
<div class="chart" id="chart-context"></div>
</section>
<section id="schemas"><h2>Schema weight</h2><p class="lead">{SECTION_TEXT["schemas"]}</p>
<h3>Servers</h3><div class="chart" id="chart-servers"></div>
<h3>Tools</h3><p class="taskfacts" id="schema-facts"></p><div class="chart" id="chart-tools"></div>
</section>
<section id="whatif"><h2>What-if</h2><p class="lead">{SECTION_TEXT["whatif"]}</p>
{_whatif_section(page)}
</section>
</main>
<footer>Written by promcp {esc(h["promcp_version"])} at {esc(h["written_at"])}. One self-contained file: every
script and style is inline and the page fetches nothing (charts: {esc(library_versions())}). The page's numbers
are embedded as JSON in <code>#promcp-data</code>; <code>report</code> there is what <code>promcp report --format
json</code> prints for the same selection and sections, <code>whatif</code> what <code>promcp whatif --format
json</code> prints.</footer>
<script type="application/json" id="promcp-data">{page.to_json()}</script>
<script type="application/json" id="promcp-specs">{spec_json}</script>
<script>{vega_bundle()}</script>
<script>{_script_safe(_asset("page.js"))}</script>"""
    head = (
        f'\n<meta name="generator" content="promcp {esc(h["promcp_version"])}">'
        f"\n<style>{_asset('page.css')}</style>"
    )
    return page_html(title, body, head=head, csp=CSP)
