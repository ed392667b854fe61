"""The page's charts as Vega-Lite specifications (built with Altair), without data.

Each spec reads named datasets (``timeline``, ``calls``, …) that the page's script fills from the embedded data
for the current run and task selection, so the data is stored once and a chart is redrawn without re-sending it.
Colours are one vocabulary across the page: a stage, a phase and an input origin keep their colour everywhere.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import altair as alt

from promcp.analysis.task_sql import PHASES
from promcp.analysis.views.html._tasks import PARTS

FONT: Final = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

STAGES: Final = ("INIT", "S1", "S2", "S3", "S4", "S5", "S6")
STAGE_COLORS: Final = ("#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c", "#8fd175", "#6baed6", "#9467bd")
STAGE_TITLES: Final = (
    "INIT start-up",
    "S1 prompt",
    "S2 plan",
    "S3 tool call",
    "S4 tool result",
    "S5 context update",
    "S6 answer",
)
PHASE_COLORS: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#8fd175", "#9467bd")
PART_COLORS: Final = (
    "#9e9e9e",
    "#d62728",
    "#1f77b4",
    "#9467bd",
    "#2ca02c",
    "#e7969c",
    "#dddddd",
    "#17becf",
    "#e7ba52",
    "#555555",
)
#: How sure a bar's position and length are (docs/events.md ``timing_quality``): fill opacity and outline dash.
QUALITIES: Final = ("exact", "derived", "bounded", "none")
QUALITY_OPACITY: Final = (0.9, 0.65, 0.3, 0.04)
QUALITY_DASH: Final = ([1, 0], [2, 2], [6, 3], [2, 4])

CONFIG: Final[dict[str, Any]] = {
    "font": FONT,
    "view": {"stroke": None},
    "axis": {"labelFontSize": 11, "titleFontSize": 11, "titleFontWeight": "normal", "titleColor": "#555"},
    "legend": {"labelFontSize": 11, "titleFontSize": 11, "orient": "top", "direction": "horizontal"},
    "header": {"labelFontSize": 12},
}


def _finish(chart: alt.TopLevelMixin, *, fit_x: bool = False) -> dict[str, Any]:
    if fit_x:  # container width, step height: fit the width only
        chart = chart.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    spec: dict[str, Any] = chart.configure(**CONFIG).to_dict()
    spec.pop("$schema", None)  # a URL: nothing on the page may name a network location it could fetch
    return spec


def _stage_scale() -> alt.Scale:
    return alt.Scale(domain=list(STAGES), range=list(STAGE_COLORS))


def waterfall() -> dict[str, Any]:
    """One task: a bar per event on the task's clock, labelled with its tokens and duration."""
    xmax = alt.param(name="xmax", value=1.0)
    base = alt.Chart(alt.NamedData("timeline"))
    y = alt.Y(
        "row:N",
        sort=alt.EncodingSortField("i", op="min", order="ascending"),
        title=None,
        axis=alt.Axis(labelLimit=340, labelFontSize=11, ticks=False, domain=False),
    )
    x = alt.X(
        "x0:Q",
        title="ms since the task's first event",
        scale=alt.Scale(domainMin=0, domainMax=alt.ExprRef(expr="xmax"), nice=False),
        axis=alt.Axis(grid=True, gridColor="#eee", format=",d"),
    )
    tooltip = [
        alt.Tooltip("row:N", title="event"),
        alt.Tooltip("phase:N", title="phase"),
        alt.Tooltip("tokens:Q", title="tokens", format=",.0f"),
        alt.Tooltip("token_column:N", title="token column"),
        alt.Tooltip("tokenizer:N", title="tokenizer"),
        alt.Tooltip("token_source:N", title="token source"),
        alt.Tooltip("timing_quality:N", title="timing quality"),
        alt.Tooltip("x0:Q", title="start ms", format=",.1f"),
        alt.Tooltip("dur:Q", title="duration ms", format=",.1f"),
        alt.Tooltip("placed:N", title="position"),
        alt.Tooltip("status:N", title="status"),
        alt.Tooltip("error_type:N", title="error"),
    ]
    stage_legend = alt.Legend(title="stage", labelExpr=_label_expr(STAGES, STAGE_TITLES))
    bars = (
        base.mark_bar(strokeWidth=1.5, height={"band": 0.72})
        .encode(
            x=x,
            x2="x1:Q",
            y=y,
            fill=alt.Fill("stage:N", scale=_stage_scale(), legend=stage_legend),
            stroke=alt.Stroke("stage:N", scale=_stage_scale(), legend=stage_legend),
            # the page draws the timing-quality legend itself (Vega-Lite cannot show fill and dash in one swatch)
            fillOpacity=_by_quality(QUALITY_OPACITY),
            strokeDash=_by_quality(QUALITY_DASH),
            tooltip=tooltip,
        )
        .properties(name="bars")
    )
    labels = (
        base.mark_text(align="left", baseline="middle", dx=5, fontSize=10, color="#333")
        .encode(x=alt.X("x1:Q"), y=y, text="label:N", tooltip=tooltip)
        .properties(name="labels")
    )
    chart = alt.layer(bars, labels).add_params(xmax).properties(width="container", height=alt.Step(20))
    return _finish(chart, fit_x=True)


def _by_quality(values: tuple[Any, ...]) -> dict[str, Any]:
    """A value per timing quality, as an exact lookup (a scale would interpolate between them)."""
    return {
        "condition": [
            {"test": f"datum.timing_quality === '{q}'", "value": v}
            for q, v in zip(QUALITIES[1:], values[1:], strict=True)
        ],
        "value": values[0],
    }


def _label_expr(domain: tuple[str, ...], titles: tuple[str, ...]) -> str:
    cases = " : ".join(f"datum.label === '{d}' ? '{t}'" for d, t in zip(domain, titles, strict=True))
    return f"{cases} : datum.label"


def context_fill() -> dict[str, Any]:
    """One task: each LLM call's input stacked by origin (and by cache state, where known), its axis fitted to the
    calls (``ymax``, set by the page). The window is a dashed line when it is on that axis (the page puts it there
    when a call fills half of it, or when asked); otherwise a marker at the top says where it is."""
    ymax = alt.param(name="ymax", value=1.0)
    parts = alt.Chart(alt.NamedData("calls"))
    calls = alt.Chart(alt.NamedData("windows"))
    x = alt.X("call:N", sort=alt.EncodingSortField("i", op="min", order="ascending"), title="LLM call of the task",
              axis=alt.Axis(labelAngle=0), scale=alt.Scale(paddingInner=0.35, paddingOuter=0.2))  # fmt: skip
    y_scale = alt.Scale(domainMin=0, domainMax=alt.ExprRef(expr="ymax"), nice=False)
    bars = parts.mark_bar().encode(
        x=x,
        xOffset=alt.XOffset("kind:N", sort=["by origin", "cache"], title=None),
        y=alt.Y("tokens:Q", stack="zero", title="input tokens", axis=alt.Axis(format=",d"), scale=y_scale),
        color=alt.Color(
            "part:N",
            scale=alt.Scale(domain=list(PARTS), range=list(PART_COLORS)),
            legend=alt.Legend(title="input part", columns=5),
        ),
        order=alt.Order("o:Q"),
        tooltip=[
            alt.Tooltip("call:N", title="call"),
            alt.Tooltip("kind:N", title="split"),
            alt.Tooltip("part:N", title="part"),
            alt.Tooltip("tokens:Q", title="tokens", format=",.0f"),
        ],
    )
    totals = calls.mark_text(dy=-6, fontSize=10, color="#333").encode(
        x=x, y=alt.Y("tokens_in:Q"), text=alt.Text("tokens_in:Q", format=",.0f")
    )
    window = (
        calls.transform_filter("isValid(datum.context_window)")
        .mark_rule(color="#d62728", strokeDash=[6, 4], strokeWidth=2, clip=True)
        .encode(
            y="max(context_window):Q", tooltip=[alt.Tooltip("max(context_window):Q", title="context window")]
        )
        .properties(name="window")
    )
    window_label = (
        calls.transform_filter("isValid(datum.context_window)")
        .transform_aggregate(window="max(context_window)")
        .mark_text(align="left", dx=4, dy=-7, color="#d62728", fontSize=11)
        .transform_calculate(text="'context window ' + format(datum.window, ',d')")
        .encode(x=alt.value(0), y="window:Q", text="text:N")
        .properties(name="window_label")
    )
    window_marker = (  # the window far above the calls: named at the top instead of squashing every bar
        calls.transform_filter("isValid(datum.context_window)")
        .transform_aggregate(window="max(context_window)", largest="max(tokens_in)")
        .transform_calculate(
            text="'▲ context window ' + format(datum.window, ',d') + ' tokens, above this axis (the largest "
            "call fills ' + format(100 * datum.largest / datum.window, '.1f') + ' % of it)'"
        )
        .mark_text(align="left", baseline="top", dx=4, dy=2, color="#d62728", fontSize=11)
        .encode(x=alt.value(0), y=alt.value(0), text="text:N")
        .properties(name="window_marker")
    )
    overflow = (
        calls.mark_text(dy=-18, fontSize=11, fontWeight="bold", color="#d62728")
        .encode(x=x, y="tokens_in:Q", text="flag:N")
        .transform_calculate(flag="datum.overflow ? 'overflow — not sent' : ''")
    )
    chart = (
        alt.layer(bars, totals, window, window_label, window_marker, overflow)
        .add_params(ymax)
        .properties(width=600, height=280)
    )
    return _finish(chart)


def _phase_bar(value: str, title: str, fmt: str) -> alt.Chart:
    chart: alt.Chart = (
        alt.Chart(alt.NamedData("phases"))
        .mark_bar()
        .encode(
            y=alt.Y("group:N", title=None),
            x=alt.X(f"{value}:Q", stack="zero", title=title, axis=alt.Axis(format=fmt)),
            color=alt.Color(
                "phase:N", scale=alt.Scale(domain=list(PHASES), range=list(PHASE_COLORS)), title="phase"
            ),
            order=alt.Order("o:Q"),
            tooltip=[
                alt.Tooltip("group:N", title="group"),
                alt.Tooltip("phase:N", title="phase"),
                alt.Tooltip(f"{value}:Q", title=title, format=",.1f"),
                alt.Tooltip("share:Q", title="token share %", format=".1f"),
            ],
        )
        .transform_calculate(o=f"indexof({list(PHASES)!r}, datum.phase)")
        .properties(width=360, height=alt.Step(28))
    )
    return chart


def phases() -> dict[str, Any]:
    """Mean token flow and latency per task, by phase, one bar per group."""
    return _finish(
        alt.hconcat(
            _phase_bar("tokens", "tokens per task (mean)", ",d"),
            _phase_bar("latency_ms", "ms per task (mean)", ",~r"),  # ms may be fractions (MCP-only tasks)
        ).resolve_scale(color="shared")
    )


def _tool_rows(chart: alt.Chart) -> alt.Chart:
    return chart.transform_aggregate(
        schema_tokens="mean(schema_tokens)",
        tokens_total="sum(tokens_total)",
        sends="sum(sends)",
        called="max(called)",
        groupby=["server", "tool"],
    ).transform_calculate(
        name="datum.server + ' / ' + datum.tool",
        state="datum.called ? 'called' : 'never called'",
    )


def schema_tools() -> dict[str, Any]:
    """Tools ranked by schema tokens, beside what their schemas cost over every call that re-sent them."""
    base = _tool_rows(alt.Chart(alt.NamedData("schemas")))
    y = alt.Y("name:N", sort=alt.EncodingSortField("schema_tokens", op="max", order="descending"), title=None,
              axis=alt.Axis(labelLimit=300))  # fmt: skip
    color = alt.Color("server:N", title="server", scale=alt.Scale(scheme="tableau10"))
    opacity = alt.Opacity(
        "state:O",
        sort=["called", "never called"],
        scale=alt.Scale(domain=["called", "never called"], range=[0.95, 0.35]),
        legend=None,  # the faint bars carry a "never called" label instead
    )
    tooltip = [
        alt.Tooltip("server:N"),
        alt.Tooltip("tool:N"),
        alt.Tooltip("schema_tokens:Q", title="schema tokens", format=",.0f"),
        alt.Tooltip("tokens_total:Q", title="tokens over all sends", format=",.0f"),
        alt.Tooltip("sends:Q", title="LLM calls that carried it", format=",d"),
        alt.Tooltip("state:N", title="called"),
    ]
    weight = base.mark_bar().encode(
        x=alt.X("schema_tokens:Q", title="schema tokens (one listing)"), y=y, color=color, opacity=opacity,
        tooltip=tooltip,
    )  # fmt: skip
    never = (
        base.transform_filter("!datum.called")
        .mark_text(align="left", dx=4, fontSize=10, color="#b00", fontStyle="italic", text="never called")
        .encode(x="schema_tokens:Q", y=y)
        .properties(name="never")
    )
    cost = base.mark_bar().encode(
        x=alt.X(
            "tokens_total:Q", title="tokens paid over every call that re-sent it", axis=alt.Axis(format=",d")
        ),
        y=alt.Y(
            "name:N", sort=alt.EncodingSortField("schema_tokens", op="max", order="descending"), axis=None
        ),
        color=color,
        opacity=opacity,
        tooltip=tooltip,
    )
    sends = base.mark_text(align="left", dx=4, fontSize=10, color="#333").encode(
        x="tokens_total:Q",
        y=alt.Y(
            "name:N", sort=alt.EncodingSortField("schema_tokens", op="max", order="descending"), axis=None
        ),
        text=alt.Text("sends:Q", format=",d"),
    )
    chart = alt.hconcat(
        alt.layer(weight, never).properties(width=300, height=alt.Step(17)),
        alt.layer(cost, sends).properties(width=300, height=alt.Step(17)),
        spacing=30,
    )
    return _finish(chart)


MEASURES: Final = ["one tools/list", "paid over every call"]


def schema_servers() -> dict[str, Any]:
    """Servers: the schema tokens of one tools/list, and what all of their schemas cost over every call."""
    rows = _tool_rows(alt.Chart(alt.NamedData("schemas"))).transform_aggregate(
        schema_tokens="sum(schema_tokens)",
        tokens_total="sum(tokens_total)",
        tools="count()",
        groupby=["server"],
    )
    folded = rows.transform_fold(
        ["schema_tokens", "tokens_total"], as_=["measure", "tokens"]
    ).transform_calculate(
        measure="datum.measure === 'schema_tokens' ? 'one tools/list' : 'paid over every call'"
    )
    y = alt.Y("server:N", sort=alt.EncodingSortField("tokens", op="max", order="descending"), title=None)
    bars = folded.mark_bar().encode(
        y=y,
        yOffset=alt.YOffset("measure:N", sort=MEASURES),
        x=alt.X("tokens:Q", title="schema tokens", axis=alt.Axis(format=",d")),
        color=alt.Color(
            "measure:N",
            scale=alt.Scale(domain=MEASURES, range=["#f4a3a3", "#d62728"]),
            title=None,
        ),
        tooltip=[
            alt.Tooltip("server:N"),
            alt.Tooltip("measure:N", title="measure"),
            alt.Tooltip("tokens:Q", title="tokens", format=",.0f"),
            alt.Tooltip("tools:Q", title="tools", format=",d"),
        ],
    )
    labels = folded.mark_text(align="left", dx=4, fontSize=10, color="#333").encode(
        y=y,
        yOffset=alt.YOffset("measure:N", sort=MEASURES),
        x="tokens:Q",
        text=alt.Text("tokens:Q", format=",.0f"),
    )
    room = (
        folded.transform_calculate(room="datum.tokens * 1.15")
        .mark_point(opacity=0)
        .encode(y=y, yOffset=alt.YOffset("measure:N", sort=MEASURES), x="room:Q")
    )
    chart = alt.layer(bars, labels, room)
    return _finish(chart.properties(width="container", height=alt.Step(12)), fit_x=True)


def whatif_tokens() -> dict[str, Any]:
    """Tokens per LLM call (turn) under each strategy, the recorded baseline first."""
    base = alt.Chart(alt.NamedData("whatif")).transform_calculate(
        label="format(datum.tokens_per_turn, ',.0f') + (datum.strategy === 'full' ? ' (recorded)' : ' (' + "
        "(abs(datum.reduction_pct) < 0.05 ? '±0' : format(-datum.reduction_pct, '+.1f')) + ' %)')",
        room="datum.tokens_per_turn * 1.3",
    )
    y = alt.Y("strategy:N", sort=alt.EncodingSortField("i", op="min", order="ascending"), title=None)
    bars = base.mark_bar().encode(
        y=y,
        x=alt.X("tokens_per_turn:Q", title="input tokens per LLM call (mean)", axis=alt.Axis(format=",d")),
        color=alt.condition("datum.strategy === 'full'", alt.value("#9e9e9e"), alt.value("#1f77b4")),
        tooltip=[
            alt.Tooltip("strategy:N"),
            alt.Tooltip("tokens_per_turn:Q", title="tokens per call", format=",.1f"),
            alt.Tooltip("reduction_pct:Q", title="cut %", format=".1f"),
            alt.Tooltip("saved_total:Q", title="saved over all calls", format=",d"),
            alt.Tooltip("turns:Q", title="calls", format=",d"),
        ],
    )
    text = base.mark_text(align="left", dx=4, fontSize=10, color="#333").encode(
        y=y, x="tokens_per_turn:Q", text="label:N"
    )
    room = base.mark_point(opacity=0).encode(y=y, x="room:Q")  # keeps the labels inside the chart
    return _finish(alt.layer(bars, text, room).properties(width="container", height=alt.Step(22)), fit_x=True)


def whatif_recall() -> dict[str, Any]:
    """Share of the recorded tool calls each strategy leaves visible to the model (Recall@k for routed ones)."""
    base = alt.Chart(alt.NamedData("whatif")).transform_filter("isValid(datum.recall_pct)")
    y = alt.Y("strategy:N", sort=alt.EncodingSortField("i", op="min", order="ascending"), title=None)
    bars = base.mark_bar(color="#2ca02c").encode(
        y=y,
        x=alt.X("recall_pct:Q", title="tool calls left visible (recall %)", scale=alt.Scale(domain=[0, 100])),
        tooltip=[alt.Tooltip("strategy:N"), alt.Tooltip("recall_pct:Q", title="recall %", format=".1f")],
    )
    text = base.mark_text(align="left", dx=4, fontSize=10).encode(
        y=y, x="recall_pct:Q", text=alt.Text("recall_pct:Q", format=".1f")
    )
    return _finish(alt.layer(bars, text).properties(width="container", height=alt.Step(22)), fit_x=True)


def whatif_scaling() -> dict[str, Any]:
    """Tokens per turn as the tool catalog grows, per strategy (log–log). The axes end where the data ends; the
    baseline (``full``) is a wide grey line under the others, named at its end, so a strategy that saves nothing
    (``dedup`` on a catalog without shared ``$ref``s) is drawn on top of it instead of hiding it."""
    base = alt.Chart(alt.NamedData("scaling"))
    x = alt.X("n_tools:Q", scale=alt.Scale(type="log", nice=False, zero=False), title="tools in the catalog",
              axis=alt.Axis(format=",d"))  # fmt: skip
    y = alt.Y("tokens_per_turn:Q", scale=alt.Scale(type="log", nice=False, zero=False),
              title="tool-definition tokens per turn", axis=alt.Axis(format=",d"))  # fmt: skip
    color = alt.Color("strategy:N", title="strategy", scale=alt.Scale(scheme="tableau10"))
    tooltip = [
        alt.Tooltip("strategy:N"),
        alt.Tooltip("n_tools:Q", title="tools"),
        alt.Tooltip("tokens_per_turn:Q", title="tokens per turn", format=",.0f"),
    ]
    recorded = base.transform_filter("datum.strategy === 'full'")
    full = (
        recorded.mark_line(strokeWidth=8, color="#9e9e9e", opacity=0.5, strokeCap="round")
        .encode(x=x, y=y, tooltip=tooltip)
        .properties(name="full")
    )
    full_label = (  # the baseline has no colour of the legend's: it is named at its right end
        recorded.transform_joinaggregate(last="max(n_tools)")
        .transform_filter("datum.n_tools === datum.last")
        .mark_text(align="right", baseline="bottom", dx=-2, dy=-8, color="#666", fontSize=11)
        .encode(x=x, y=y, text=alt.value("full (no strategy)"))
        .properties(name="full_label")
    )
    others = (
        base.transform_filter("datum.strategy !== 'full'")
        .mark_line(point=True, strokeWidth=2)
        .encode(x=x, y=y, color=color, tooltip=tooltip)
        .properties(name="strategies")
    )
    chart = alt.layer(full, full_label, others).properties(width="container", height=260)
    return _finish(chart, fit_x=True)


@functools.cache
def specs() -> dict[str, dict[str, Any]]:
    """Every chart of the page by name (built once per process)."""
    return {
        "phases": phases(),
        "waterfall": waterfall(),
        "context": context_fill(),
        "schema_servers": schema_servers(),
        "schema_tools": schema_tools(),
        "whatif_tokens": whatif_tokens(),
        "whatif_recall": whatif_recall(),
        "whatif_scaling": whatif_scaling(),
    }
