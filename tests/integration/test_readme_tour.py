"""The README's five-minute tour, followed literally on a fresh copy (issue 29): its commands run in the order the
README gives them, from a folder holding only what a clone holds, and print the structure and token figures the
README shows. The LLM step (step 1) runs the embedded model once; every other step reads the shipped example.

Timings differ from run to run, so a step's output is compared on what is deterministic: table structure, task
names and outcomes, token counts, event structure."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, SHARED_DATA
from tests.datasets import reader_problems
from tests.unit.test_docs import COLUMNS, DocCommand, doc_commands

README = REPO / "README.md"
TOUR = [c for c in doc_commands() if c.path == README]


def _step(prefix: str) -> DocCommand:
    hits = [c for c in TOUR if c.command.startswith(prefix)]
    assert hits, f"the README no longer shows a command starting {prefix!r}"
    return hits[0]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory like a fresh clone: the repository's files, no traces/ yet."""
    root = tmp_path_factory.mktemp("clone")
    for name in ("examples", "benchmark.yaml", "node_modules", "tests"):
        (root / name).symlink_to(REPO / name)
    if SHARED_DATA.is_dir():
        (root.parent / "shared").mkdir(exist_ok=True)
        if not (root.parent / "shared" / "data").exists():
            (root.parent / "shared" / "data").symlink_to(SHARED_DATA)
    return root


def _run(command: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "COLUMNS": COLUMNS,
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
        **kw.pop("env", {}),  # type: ignore[dict-item]
    }
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1500)


def _table(lines: list[str] | tuple[str, ...], title: str) -> list[str]:
    """The lines of the table under ``title`` (its rows, box drawing included)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    out = []
    for line in lines[start + 1 :]:
        if not line or line[0] not in "┏┃┡│└":
            break
        out.append(line)
    return out


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃]", row)[1:-1]]


@pytest.mark.llm
@pytest.mark.slow
def test_step_1_records_what_the_readme_shows(clone: Path) -> None:
    step = _step("promcp run --topology l-cust benchmark.yaml --out traces/tour")
    recorded = _step(
        "promcp run --topology l-cust benchmark.yaml --out examples/default-run"
    )  # what it shows
    assert step.command.replace("traces/tour", "examples/default-run") == recorded.command
    out = _run(step.command, clone)
    assert out.returncode == 0, out.stderr[-3000:]
    got, shown = out.stdout.splitlines(), list(recorded.output)
    # the tasks table: same tasks, status, rounds, tools called, expected (wall times differ)
    ours = [_cells(r)[:5] for r in _table(got, "tasks") if r.startswith("│")]
    theirs = [_cells(r)[:5] for r in _table(shown, "tasks") if r.startswith("│")]
    assert sorted(ours) == sorted(theirs)
    header = next(line for line in shown if line.startswith("promcp report —"))
    assert header in got
    title = "Tokens per task by phase"
    assert _table(got, title) == _table(shown, title)  # every token figure, to the digit
    dataset = clone / "traces" / "tour"
    assert reader_problems(dataset) == []
    # only Parquet under the Hive layout (an emptied journal folder may stay: readers skip "_" names)
    left = [p.name for p in dataset.iterdir() if not (p.name == "_journal" and not any(p.iterdir()))]
    assert sorted(left) == ["_content", "topology=l-cust"]
    assert (clone / "traces" / "tour.scratch" / "logs").is_dir()


def test_the_tour_after_step_1_in_order(clone: Path) -> None:
    # step 2: where the tokens went, as shown to the character (a report of the committed example)
    step2 = _step("promcp report examples/default-run --section origins --section init")
    out = _run(step2.command, clone)
    assert out.returncode == 0 and out.stdout.rstrip("\n").splitlines() == list(step2.output), out.stdout
    # what it cost: the import is quiet, its report is the README's
    if SHARED_DATA.is_dir():
        imp = _step("promcp import ../shared/data/exports/claude-code-codemie-4c2ddfdc-parallel-tools.jsonl")
        out = _run(imp.command, clone)
        assert out.returncode == 0 and out.stdout == "" and out.stderr == "", (out.stdout, out.stderr)
        cost = _step("promcp report traces/cc --section cost --section cache")
        out = _run(cost.command, clone)
        assert out.stdout.rstrip("\n").splitlines() == list(cost.output), out.stdout
    # step 3: the page
    html = _step("promcp report examples/default-run --html report.html")
    out = _run(html.command, clone)
    assert out.returncode == 0 and out.stdout.startswith("wrote report.html"), out.stderr
    # step 4: the pandas snippet gives the README's token sums per stage
    block = re.search(r"```pycon\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert block is not None
    shown = block.group(1).splitlines()
    df = pd.read_parquet(clone / "examples" / "default-run")  # a plain Parquet reader opens the dataset
    sums = df.groupby("stage", observed=True)[["tokens_in", "tokens_out", "footprint_tokens"]].sum()
    for row in shown:
        parts = row.split()
        if len(parts) == 5 and parts[0] in set(sums.index.astype(str)):
            assert [int(x) for x in parts[1:4]] == sums.loc[parts[0]].astype(int).tolist(), row
    # step 5: the what-if of the example runs
    assert _run(_step("promcp whatif examples/default-run").command, clone).returncode == 0
    # step 7: the scripted upstream answers as an Anthropic API would
    up = _step("python examples/scripted_upstream.py").command.replace("--port 8765 &", "--port 0")
    proc = subprocess.Popen(
        [sys.executable, *shlex.split(up)[1:]], cwd=clone, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        body = {
            "model": "m",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
        }
        req = urllib.request.Request(url + "/v1/messages", json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert b"message_start" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # step 9: the host of examples/ writes the events the README shows (without a receiver: locally only)
    host = _step("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python examples/host.py")
    out = _run("python examples/host.py", clone)
    assert out.returncode == 0, out.stderr
    local = pd.read_parquet(clone / "local").sort_values("seq")
    want = [
        line.split()
        for c in TOUR
        if c.command.startswith("python -c \"import pandas as pd; print(pd.read_parquet('fleet')")
        for line in c.output[1:]
        if line.strip() and line.strip() != "…"
    ]
    got = [
        [str(r.stage), str(r.phase), "NaN" if pd.isna(r.tool) else str(r.tool)] for r in local.itertuples()
    ]
    assert [w[:3] for w in want] == got[: len(want)]
    assert len(local) == 10 and host.command.endswith("examples/host.py")
