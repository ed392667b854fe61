"""Benchmark: ``promcp report DATASET --html OUT`` — write time and page size for the 5-task example and for a
synthetic 100,000-event dataset (tests/synth.py), and the time a real headless Chromium takes to draw each page.
Targets (issue 16): a 5-task page < 5 MB; 100,000 events written in ≤ 10 s into ≤ 20 MB. Prints a table; asserts
nothing.

    .venv/bin/python tests/perf/bench_report_html.py [--events 100000] [--screenshot docs/report-timeline.png]

``cold`` runs the CLI in a fresh process (imports, the Vega bundle vl-convert builds, the data, the page) — what
a user waits for; ``warm`` is a second ``write_html`` in one process (the bundle and chart specs are built once per
process). ``--screenshot`` also writes the README's picture: the example's task timeline, drawn by Chromium.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from promcp.analysis.views import Column, Document, Table, get_renderer  # noqa: E402
from tests import synth  # noqa: E402
from tests.browser import CHROMIUM, open_page  # noqa: E402
from tests.conftest import write_dataset  # noqa: E402

EXAMPLE = ROOT / "examples" / "default-run"


def cold(dataset: Path, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "promcp.cli", "report", str(dataset), "--html", str(out)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return time.perf_counter() - t0


def warm(dataset: Path, out: Path) -> float:
    from promcp.analysis.views.html import write_html

    write_html(dataset, out)  # builds the bundle and the specs once
    t0 = time.perf_counter()
    write_html(dataset, out)
    return time.perf_counter() - t0


def draw(page: Path) -> tuple[float, int]:
    """Seconds until the page has drawn its charts in Chromium, and how many console errors it logged."""
    with open_page(page) as s:
        t0 = time.perf_counter()
        s.page.reload()
        s.page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        return time.perf_counter() - t0, len(s.errors) + len(s.blocked)


def screenshot(page: Path, out: Path) -> int:
    """The example's task timeline (the README picture), as a small palette PNG; returns its size in bytes."""
    from PIL import Image

    with open_page(page, width=1180, height=900) as s:
        s.page.wait_for_selector("body[data-ready='1']")
        s.page.evaluate(
            "document.querySelector('nav.bar').style.position = 'static';"
            "document.getElementById('task-events-box').open = false;"
        )
        raw = out.with_suffix(".raw.png")
        s.page.locator("#timeline").screenshot(path=str(raw))
    Image.open(raw).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
        out, optimize=True
    )
    raw.unlink()
    return out.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--screenshot", type=Path, default=None, help="write the README picture here")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the docs)")
    args = ap.parse_args()
    table = Table(
        "bench",
        "promcp report --html (seconds; MiB)",
        [
            Column("dataset"),
            Column("events", kind="number"),
            Column("cold", "cold CLI s", "number", 2),
            Column("warm", "warm write s", "number", 2),
            Column("size", "page MiB", "number", 2),
            Column("draw", "Chromium draw s", "number", 2),
            Column("errors", kind="number"),
        ],
    )
    with tempfile.TemporaryDirectory(prefix="promcp-bench-html-") as tmp:
        big = Path(tmp) / "synth"
        events = list(itertools.islice(synth.events(args.events // 7 + 1), args.events))
        write_dataset(big, events)
        for name, dataset, n in (
            ("examples/default-run (5 tasks)", EXAMPLE, 50),
            ("synthetic", big, len(events)),
        ):
            page = Path(tmp) / f"{dataset.name}.html"
            t_cold = cold(dataset, page)
            t_warm = warm(dataset, page)
            drawn, errors = draw(page) if CHROMIUM.is_file() else (None, None)
            table.rows.append(
                {
                    "dataset": name,
                    "events": n,
                    "cold": t_cold,
                    "warm": t_warm,
                    "size": page.stat().st_size / 2**20,
                    "draw": drawn,
                    "errors": errors,
                }
            )
            if args.screenshot and dataset == EXAMPLE:
                print(f"wrote {args.screenshot} ({screenshot(page, args.screenshot) / 1024:.0f} KiB)")
    doc = Document("bench_report_html")
    doc.add(table)
    get_renderer("markdown" if args.markdown else "table").write(doc, sys.stdout)


if __name__ == "__main__":
    main()
