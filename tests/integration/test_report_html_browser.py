"""The HTML report in a real browser: Debian's headless Chromium opens each page from a file:// URL with the
network off. No console error, no request but the page itself, the first task's waterfall has one bar per event,
hover shows how each number was measured, and datasets from every source — a promcp run (examples/default-run), an
instrumented host against a real MCP server, imported exports — render; empty and untimed datasets say so instead
of drawing a broken chart. Screenshots of every section land in $PROMCP_SCREENSHOTS (default: the test's tmp dir,
beside its datasets, never inside one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import promcp
import promcp.analysis as pa
from promcp.analysis.engine import IMPLICIT_TASK
from promcp.analysis.views.html import write_html
from promcp.recorder import Recorder
from tests.browser import Session, embedded, open_page, require_chromium
from tests.conftest import write_dataset
from tests.unit.test_report_html import untimed_events

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "exports"
SECTIONS = ("summary", "tasks", "timeline", "context", "schemas", "whatif")
BARS = "#chart-waterfall g.mark-rect.role-mark.bars_marks path"

pytestmark = pytest.mark.servers


@pytest.fixture(autouse=True)
def _chromium() -> None:
    require_chromium()


def _shots(tmp_path: Path, name: str) -> Path:
    root = Path(os.environ.get("PROMCP_SCREENSHOTS") or tmp_path / "screenshots")
    out = root / name  # never inside a dataset: its root holds only Parquet
    out.mkdir(parents=True, exist_ok=True)
    return out


def _ready(s: Session) -> None:
    s.page.wait_for_selector("body[data-ready='1']", timeout=60_000)


def _clean(s: Session, page: Path) -> None:
    assert s.errors == [], s.errors
    assert s.blocked == [] and s.requests == [page.resolve().as_uri()], (s.requests, s.blocked)


def _screenshot_sections(s: Session, out: Path) -> list[Path]:
    s.page.evaluate("document.querySelector('nav.bar').style.position = 'static'")  # not over the sections
    paths = []
    for section in SECTIONS:
        path = out / f"{section}.png"
        s.page.locator(f"#{section}").screenshot(path=str(path))
        assert path.stat().st_size > 5_000, path  # a picture, not a blank strip
        paths.append(path)
    return paths


def _axis_max(s: Session, chart: str, title: str) -> float:
    """The largest tick label of the chart's axis titled ``title``."""
    axis = s.page.locator(f"{chart} g.role-axis", has=s.page.locator("g.role-axis-title", has_text=title))
    labels = axis.locator("g.role-axis-label text").all_text_contents()
    return max(float(t.replace(",", "")) for t in labels if t)


def _first_task_events(dataset: Path) -> tuple[str, int]:
    """By hand: the first task's events plus the start-up recorded before it."""
    df = pa.load(dataset).sort_values("seq")
    tasks = df[df["task_id"].notna()]
    first = tasks.loc[tasks["seq"].idxmin()]
    mine = df[(df["task_id"] == first["task_id"]) | ((df["stage"] == "INIT") & (df["seq"] < first["seq"]))]
    return str(first["task_id"]), len(mine)


def test_example_report(tmp_path: Path) -> None:
    dataset = REPO / "examples" / "default-run"
    page = write_html(dataset, tmp_path / "example.html")
    task, n_events = _first_task_events(dataset)
    with open_page(page) as s:
        _ready(s)
        _clean(s, page)
        assert s.page.locator("#sel-task option").first.text_content().startswith(task)
        assert s.page.locator(BARS).count() == n_events == 10
        assert s.page.locator("#task-events tbody tr").count() == n_events
        # hover: the event's tokenizer, token source and timing quality
        s.page.locator(BARS).nth(4).hover()
        tip = s.page.locator("#vg-tooltip-element")
        tip.wait_for(state="visible")
        text = tip.text_content() or ""
        assert "S1 · r1" in text and "gguf:SmolLM2-135M-Instruct.Q4_1.gguf" in text
        assert "token source" in text and "tokenizer" in text and "exact" in text
        s.page.mouse.move(0, 0)
        # the other charts are drawn, with the dataset's numbers
        assert s.page.locator("#chart-context svg").count() == 1
        # the context-fill axis fits the calls (491 and 589 tokens), the 8,192-token window is a marker above it
        assert _axis_max(s, "#chart-context", "input tokens") < 1_000
        marker = s.page.locator("#chart-context text", has_text="above this axis").text_content() or ""
        assert "context window 8,192 tokens" in marker and "7.2 %" in marker
        s.page.check("#ctx-whole")  # asked for: the axis runs up to the window, drawn as a dashed line
        s.page.wait_for_function(
            "[...document.querySelectorAll('#chart-context text')].some(t => t.textContent === 'context window 8,192')"
        )
        assert _axis_max(s, "#chart-context", "input tokens") >= 8_192
        s.page.uncheck("#ctx-whole")
        s.page.wait_for_selector("#chart-context text:has-text('above this axis')")
        schemas = embedded(page)["schemas"]
        never = sum(not r[schemas["columns"].index("called")] for r in schemas["data"])
        assert (
            s.page.locator("#chart-tools svg text", has_text="never called").count() == never == 22
        )  # of 27
        assert s.page.locator("#chart-phases svg").count() == 1
        assert s.page.locator("#whatif-missing").is_visible()
        _screenshot_sections(s, _shots(tmp_path, "example"))
        # another task: the waterfall is redrawn with that task's bars
        tasks = embedded(page)["tasks"]
        fourth = dict(zip(tasks["columns"], tasks["data"][3], strict=True))
        s.page.select_option("#sel-task", str(fourth["key"]))
        s.page.wait_for_function(f"document.querySelectorAll('{BARS}').length === {fourth['events']}")
        assert s.errors == []


def test_example_without_scripts(tmp_path: Path) -> None:
    page = write_html(REPO / "examples" / "default-run", tmp_path / "example.html")
    with open_page(page, scripts=False) as s:
        assert s.page.locator("table.data").first.is_visible()  # the summary tables need no script
        assert (
            s.page.locator("noscript table tbody tr").count() == 10
        )  # the first task's events, with their labels
        assert "tokenizer" in (s.page.locator("noscript table thead").text_content() or "")
        assert s.blocked == [] and s.errors == []


async def _instrumented_session() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "promcp.servers.scicalc"], cwd=str(REPO)
    )
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            await session.list_tools()
            with promcp.scope(task_id="instrumented-1", round=1):
                await session.call_tool("calculate", {"expression": "6*7"})
                await session.call_tool("describe", {"values": [1, 2, 3]})
            await session.call_tool("calculate", {"expression": "2**10"})  # outside any task


def test_instrumented_dataset(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    promcp.instrument(out, tokenizer="o200k_base")
    try:
        anyio.run(_instrumented_session)
    finally:
        promcp.uninstrument()
    page = write_html(out, tmp_path / "instrumented.html")
    data = embedded(page)
    tasks = {r[data["tasks"]["columns"].index("task")] for r in data["tasks"]["data"]}
    assert tasks == {"instrumented-1", IMPLICIT_TASK}  # the call outside any task: the run's implicit task
    with open_page(page) as s:
        _ready(s)
        _clean(s, page)
        assert s.page.locator(BARS).count() == 4 + 4  # start-up it waited for (4 INIT) + 2 × (S3, S4)
        assert "no LLM call" in (s.page.locator("#chart-context").text_content() or "")
        assert s.page.locator("#chart-tools svg").count() == 1  # scicalc's tools, by schema weight
        _screenshot_sections(s, _shots(tmp_path, "instrumented"))


@pytest.mark.parametrize("export", ["claude-code-project", "claude-ai-cases.json"])
def test_imported_dataset(tmp_path: Path, export: str) -> None:
    out = tmp_path / "traces"
    run = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "import", str(FIXTURES / export), "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    page = write_html(out, tmp_path / "imported.html")
    with open_page(page) as s:
        _ready(s)
        _clean(s, page)
        assert s.page.locator(BARS).count() == int(s.page.locator("#task-events tbody tr").count()) > 0
        # untimed and bounded events are drawn apart: hollow (none) or faint (bounded) dashed outlines
        dashed = s.page.locator(f"{BARS}[stroke-dasharray]").count()
        assert dashed > 0
        legend = s.page.locator("#chart-context").text_content() or ""
        if export == "claude-code-project":  # provider-reported prompt caching: the cache split is drawn
            assert "cache read" in legend and "cache write" in legend
        _screenshot_sections(s, _shots(tmp_path, f"import-{export.split('.')[0]}"))


def test_empty_and_untimed_datasets_say_so(tmp_path: Path) -> None:
    with Recorder(tmp_path / "empty", topology="l-cust", run_id="empty-1", fsync="never"):
        pass
    empty = write_html(tmp_path / "empty", tmp_path / "empty.html")
    untimed = write_html(write_dataset(tmp_path / "untimed", untimed_events(3)), tmp_path / "untimed.html")
    with open_page(empty) as s:
        _ready(s)
        _clean(s, empty)
        for chart in ("#chart-waterfall", "#chart-context", "#chart-servers", "#chart-phases"):
            assert s.page.locator(f"{chart} svg").count() == 0
            assert s.page.locator(f"{chart} .note").count() == 1, chart
        assert "no events" in (s.page.locator("#chart-waterfall").text_content() or "")
        _screenshot_sections(s, _shots(tmp_path, "empty"))
    with open_page(untimed) as s:
        _ready(s)
        _clean(s, untimed)
        assert s.page.locator("#chart-waterfall svg").count() == 0
        assert "No event of this task carries any timing" in (
            s.page.locator("#chart-waterfall").text_content() or ""
        )
        assert s.page.locator("#task-events tbody tr").count() > 0  # its events are still listed, with tokens
        assert s.page.locator("#chart-context svg").count() == 1  # tokens need no clock
        _screenshot_sections(s, _shots(tmp_path, "untimed"))


def test_whatif_scaling_axes_end_with_the_data_and_full_stays_visible(tmp_path: Path) -> None:
    """A saved what-if whose curve stops at 50 tools, with dedup saving nothing (the same points as full)."""
    ds = write_dataset(tmp_path / "ds", untimed_events(2))
    rows = [
        {"n_tools": n, "strategy": strategy, "tokens_per_turn": tokens}
        for n in (5, 10, 20, 35, 50)
        for strategy, tokens in (("full", 90.0 * n), ("dedup", 90.0 * n), ("topk", 270.0))
    ]
    summary = [{"strategy": "full", "tokens_per_turn": 4_500.0, "reduction_pct": 0.0, "recall_pct": 100.0}]
    saved = {"mode": "catalog", "source": "cat.json", "k": 3, "scorer": "bm25", "tokenizer": "cl100k_base",
             "notes": [], "tables": {"summary": summary, "scaling": rows}}  # fmt: skip
    (ds / "_whatif.json").write_text(json.dumps(saved))
    page = write_html(ds, tmp_path / "whatif.html")
    with open_page(page) as s:
        _ready(s)
        _clean(s, page)
        chart = "#chart-whatif-scaling"
        assert _axis_max(s, chart, "tools in the catalog") == 50  # not 100: the axis ends where the data ends
        assert _axis_max(s, chart, "tokens per turn") <= 4_500
        # full is its own wide line under dedup's (same points), named at its end
        lines = s.page.locator(f"{chart} g.mark-line path")
        widths = sorted(float(lines.nth(i).get_attribute("stroke-width") or 0) for i in range(lines.count()))
        assert lines.count() == 3 and widths[-1] > 3 * widths[0]
        assert s.page.locator(f"{chart} text", has_text="full (no strategy)").count() == 1
        s.page.locator(chart).screenshot(path=str(_shots(tmp_path, "whatif") / "scaling.png"))
