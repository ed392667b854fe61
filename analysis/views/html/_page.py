"""Assemble the self-contained page: the page data (JSON), the chart specs (JSON), the style sheet, the page script
and the Vega/Vega-Lite/vega-embed bundle, all inline. The Content-Security-Policy forbids every fetch, so a page
that tried to load anything from a network would fail visibly instead of leaking a request.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import pandas as pd

from promcp.analysis.views.html._charts import specs
from promcp.analysis.views.html._data import PageData, Table

#: Nothing is fetched: scripts and styles are inline, images are data: URLs, no connection is allowed.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)

SECTION_TEXT = {
    "summary": "Phase attribution per task as <code>promcp report</code> prints it, over every run of the dataset. "
    "Each event counts once, in one phase (docs/accounting.md).",
    "timeline": "Every event of one task on its own clock: the session start-up it waited for (INIT per server), "
    "then S1…S6 per round. Bars are coloured by stage and labelled with the tokens the accounting counts for the "
    "event. A solid bar is measured exactly; a faint dashed bar is <em>bounded</em> (the true interval lies inside "
    "it, label ≤); a hollow dashed bar has <em>no timing</em> (drawn with a nominal length where it happened or "
    "after the previous event). Hover a bar for its tokenizer, token source and timing quality; the table lists "
    "the same for every bar.",
    "context": "Every LLM call of the selected task: its input tokens stacked by origin — the tool schemas are the "
    "red part — against the model's context window (dashed line). Calls that did not fit are marked overflow; "
    "where the provider reported prompt caching, a second bar splits the same input into cache read, cache write "
    "and uncached.",
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


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _is_num(text: str) -> bool:
    return bool(text) and (text[0].isdigit() or (text[0] == "-" and text[1:2].isdigit()))


def _table(t: Table) -> str:
    if not t.rows:
        return f'<div><h3>{_esc(t.title)}</h3><div class="note empty">No data for this table.</div></div>'
    head = "".join(f"<th>{_esc(c)}</th>" for c in t.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{_esc(v)}</td>' if i and _is_num(v) else f"<td>{_esc(v)}</td>"
            for i, v in enumerate(r)
        )
        + "</tr>"
        for r in t.rows
    )
    return f'<div><h3>{_esc(t.title)}</h3><table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _runs_table(runs: pd.DataFrame) -> str:
    if runs.empty:
        return ""
    cols = [
        "run_id",
        "topology",
        "source",
        "benchmark",
        "models",
        "tasks",
        "events",
        "tokens_in",
        "tokens_out",
        "wall_s",
    ]
    rows = []
    for r in runs.to_dict(orient="records"):
        cells = []
        for c in cols:
            v = r.get(c)
            if v is None or (isinstance(v, float) and pd.isna(v)):
                cells.append("<td>—</td>")
            elif isinstance(v, int | float):
                digits = 1 if c == "wall_s" else 0
                cells.append(f'<td class="num">{v:,.{digits}f}</td>')
            else:
                cells.append(f"<td>{_esc(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{_esc(c.replace('_', ' '))}</th>" for c in cols)
    return (
        '<div><h3>Runs</h3><table class="data" id="runs-table"><thead><tr>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _facts(h: dict[str, Any]) -> str:
    items = [
        ("dataset", f"<code>{_esc(h['dataset'])}</code>"),
        ("events", f"{h['events']:,}"),
        ("runs", f"{h['runs']:,}"),
        ("tasks", f"{h['tasks']:,}"),
        ("topologies", _esc(", ".join(h["topologies"]) or "—")),
        ("tokenizers", _esc(", ".join(h["tokenizers"]) or "none recorded")),
        ("promcp", _esc(h["promcp_version"])),
        ("written", _esc(h["written_at"])),
    ]
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


_EVENT_HEAD = (
    "<tr><th>#</th><th>stage</th><th>event</th><th>tokens</th><th>token column</th><th>tokenizer</th>"
    "<th>token source</th><th>timing quality</th><th>start ms</th><th>duration ms</th><th>status</th></tr>"
)


def _first_task_table(page: PageData) -> str:
    """The first task's events as plain HTML, for a reader with scripts off."""
    if page.timeline.empty:
        return ""
    first = page.timeline[page.timeline["key"] == page.timeline["key"].iloc[0]]
    rows = []
    for b in first.to_dict(orient="records"):
        start = f"{b['x0']:,.1f}" if b["placed"] == "measured" else "—"
        dur = "—" if b["dur"] is None or pd.isna(b["dur"]) else f"{b['dur']:,.1f}"
        tokens = "—" if b["tokens"] is None or pd.isna(b["tokens"]) else f"{b['tokens']:,.0f}"
        cells = [b["i"] + 1, b["stage"], b["row"].strip().split("  ", 1)[-1], tokens, b["token_column"] or "—",
                 b["tokenizer"] or "—", b["token_source"], b["timing_quality"], start, dur, b["status"]]  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
    return (
        "<noscript><p>Scripts are off: the charts need them. The first task's events:</p>"
        f'<table class="data"><thead>{_EVENT_HEAD}</thead><tbody>{"".join(rows)}</tbody></table></noscript>'
    )


def _whatif_section(page: PageData) -> str:
    w = page.whatif
    if not w or not w.get("summary"):
        return (
            '<div class="note empty" id="whatif-missing">No what-if result for this dataset. Write the page with '
            "<code>promcp report DATASET --html OUT --whatif</code> to compute one, or save one beside the data "
            "with <code>promcp whatif DATASET --format json &gt; DATASET/whatif.json</code>.</div>"
        )
    meta = ", ".join(
        f"{k} {_esc(v)}"
        for k, v in w.items()
        if k in ("mode", "source", "tokenizer", "k", "scorer", "llm_calls", "n_tools", "queries")
        and v is not None
    )
    return (
        f'<p class="taskfacts">What-if over {meta}.</p>'
        '<div class="row"><div><h3>Tokens per LLM call</h3><div class="chart" id="chart-whatif-tokens"></div></div>'
        '<div><h3>Recorded tool calls left visible</h3><div class="chart" id="chart-whatif-recall"></div></div></div>'
        '<h3>Scaling: tokens per turn as the catalog grows</h3><div class="chart" id="chart-whatif-scaling"></div>'
    )


def render(page: PageData) -> str:
    """The whole page as one HTML document."""
    h = page.header
    notes = "".join(f"<li>{_esc(n)}</li>" for n in page.notes)
    tables = "".join(_table(t) for t in page.summary)
    spec_json = _script_safe(json.dumps(specs(), separators=(",", ":")))
    title = f"promcp report — {h['dataset']}"
    body = f"""<header class="page">
<h1>promcp report <small>the tools tax, stage by stage</small></h1>
{_facts(h)}
{f'<ul class="notes" id="notes">{notes}</ul>' if notes else ""}
</header>
<nav class="bar"><div class="in">
<a href="#summary">Summary</a><a href="#timeline">Task timeline</a><a href="#context">Context fill</a>
<a href="#schemas">Schema weight</a><a href="#whatif">What-if</a>
<label>runs <select id="sel-run"></select></label>
<label>task <select id="sel-task"></select></label>
</div></nav>
<main>
<noscript><div class="note">Scripts are off: the tables below are complete; the charts need scripts.</div></noscript>
<section id="summary"><h2>Summary</h2><p class="lead">{SECTION_TEXT["summary"]}</p>
<div class="chart" id="chart-phases"></div>
<div class="tables">{tables}{_runs_table(page.runs)}</div>
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
<label class="taskfacts" id="ctx-zoom-label"><input type="checkbox" id="ctx-zoom"> fit the axis to the calls
(hide the context window)</label>
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
<footer>Written by promcp {_esc(h["promcp_version"])} at {_esc(h["written_at"])}. One self-contained file: every
script and style is inline and the page fetches nothing (charts: {_esc(library_versions())}). The page's numbers
are embedded as JSON in <code>#promcp-data</code>; <code>report</code> there is what <code>promcp report --format
json</code> prints.</footer>"""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="generator" content="promcp {_esc(h["promcp_version"])}">
<title>{_esc(title)}</title>
<style>{_asset("page.css")}</style>
</head><body>
{body}
<script type="application/json" id="promcp-data">{page.to_json()}</script>
<script type="application/json" id="promcp-specs">{spec_json}</script>
<script>{vega_bundle()}</script>
<script>{_script_safe(_asset("page.js"))}</script>
</body></html>
"""
