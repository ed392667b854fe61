"""Benchmark: ``promcp footprint`` on catalogs of 50, 500 and 2,000 tools.

Each catalog is synthetic and realistic (descriptions of 150–400 characters, 2–6 parameters with descriptions,
enums and a shared nested ``filter`` object, so ``dedup`` has something to do), written as one captured
``tools/list`` result and served over stdio by promcp's replay server (``python -m promcp.servers.replay``). A row
is :func:`promcp.footprint.measure` end to end — spawn, ready, initialize, ``tools/list``, stop, then counting
under each tokenizer plus the largest fields and the slim/dedup strategies — the median of ``--repeat`` runs, and
its start-up phases from the same run. The first run of a process loads the tokenizers; a warm-up run is discarded.

Usage: .venv/bin/python tests/perf/bench_footprint.py [--tools 50,500,2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from promcp.footprint import Target, measure  # noqa: E402

WORDS = [
    "query",
    "records",
    "matching",
    "the",
    "given",
    "filter",
    "and",
    "return",
    "them",
    "sorted",
    "by",
    "the",
    "requested",
    "field",
    "with",
    "pagination",
    "support",
    "for",
    "large",
    "result",
    "sets",
    "including",
    "metadata",
    "about",
    "each",
    "entry",
    "such",
    "as",
    "owner",
    "status",
    "and",
    "timestamps",
]
FILTER = {
    "type": "object",
    "description": "Restrict the results to entries matching every given condition.",
    "properties": {
        "status": {"type": "string", "enum": ["open", "closed", "archived"], "description": "Entry status."},
        "owner": {"type": "string", "description": "User id of the owner."},
        "created_after": {"type": "string", "format": "date-time", "description": "Lower bound (ISO 8601)."},
        "tags": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Entries carrying all these tags.",
        },
    },
    "additionalProperties": False,
}


def _text(rng: random.Random, low: int, high: int) -> str:
    words: list[str] = []
    target = rng.randint(low, high)
    while len(" ".join(words)) < target:
        words.append(rng.choice(WORDS))
    return " ".join(words).capitalize() + "."


def catalog(n: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    tools = []
    for i in range(n):
        props: dict[str, Any] = {}
        for j in range(rng.randint(2, 6)):
            kind = rng.choice(["string", "integer", "boolean", "enum"])
            schema: dict[str, Any] = {
                "type": "string" if kind == "enum" else kind,
                "description": _text(rng, 20, 80),
            }
            if kind == "enum":
                schema["enum"] = [f"v{k}" for k in range(rng.randint(2, 6))]
            if kind == "integer":
                schema.update(minimum=0, default=10)
            props[f"param_{j}"] = schema
        if rng.random() < 0.4:
            props["filter"] = FILTER
        tools.append(
            {
                "name": f"tool_{i:04d}",
                "title": f"Tool {i}",
                "description": _text(rng, 150, 400),
                "inputSchema": {"type": "object", "properties": props, "required": list(props)[:1]},
                "annotations": {"readOnlyHint": rng.random() < 0.5},
            }
        )
    return {"tools": tools}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", default="50,500,2000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.tools.split(",")]
    tokenizers = ["o200k_base", "cl100k_base"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"synthetic-{n}.json"
            path.write_text(json.dumps(catalog(n)))
            target = Target(
                command=(
                    sys.executable,
                    "-m",
                    "promcp.servers.replay",
                    "--catalog",
                    str(path),
                    "--server",
                    path.stem,
                )
            )
            measure(target, tokenizers)  # warm-up: tokenizers loaded, page cache warm
            runs = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                fp = measure(target, tokenizers)
                runs.append((time.perf_counter() - t0, fp))
            runs.sort(key=lambda r: r[0])
            wall, fp = runs[len(runs) // 2]
            slim = next(s for s in fp.strategies if s.strategy == "slim" and s.tokenizer == "o200k_base")
            dedup = next(s for s in fp.strategies if s.strategy == "dedup" and s.tokenizer == "o200k_base")
            rows.append(
                {
                    "tools": len(fp.tools),
                    "tokens o200k": fp.total("o200k_base"),
                    "measure s": wall,
                    "spread s": f"{runs[0][0]:.2f}–{runs[-1][0]:.2f}",
                    "start-up ms": fp.startup_ms["total"],
                    "tools/list ms": fp.startup_ms["tools_discovery"],
                    "stop+count s": wall - (fp.startup_ms["total"] or 0) / 1000,
                    "slim saves": slim.saving,
                    "dedup saves": dedup.saving,
                }
            )
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---:" for _ in cols) + "|")
    for r in rows:
        cells = [
            f"{v:,.2f}"
            if isinstance(v, float) and k.endswith(" s")
            else f"{v:,.1f}"
            if isinstance(v, float)
            else f"{v:,}"
            if isinstance(v, int)
            else str(v)
            for k, v in r.items()
        ]
        print("| " + " | ".join(cells) + " |")
    print(
        f"\nmedian of {args.repeat} runs each, after one warm-up run; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
