"""A command given by name imports its own module only: ``promcp report`` starts without the recorder, the host,
the proxies and the other commands' dependencies (issue 26: a fresh ``promcp report``'s start-up)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]

_PROBE = """
import json, sys
from promcp.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules(*argv: str) -> tuple[int, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=ROOT, check=False
    )
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    return int(last["code"]), set(last["modules"])


def test_report_loads_only_its_own_command() -> None:
    code, modules = _modules("report", "examples/default-run", "--section", "phases")
    assert code == 0
    assert "promcp.cli.report" in modules
    others = {
        m
        for m in modules
        if m.startswith("promcp.cli.")
        and m not in ("promcp.cli.report", "promcp.cli._common", "promcp.cli._logging")
    }
    assert others == set()
    # nor the journal-part merge (and the stage builders it links with) when the dataset has no parts to merge
    for heavy in (
        "promcp.recorder",
        "promcp.host",
        "promcp.proxy",
        "jsonschema",
        "httpx",
        "promcp.store.parts",
        # nor a tokenizer: the example's counts are exact, and no table of this report recounts anything
        "promcp.tokenizers",
        "tiktoken",
        # nor pandas: the phase table alone is computed in DuckDB (promcp/analysis/phase_report.py)
        "pandas",
    ):
        assert not any(m == heavy or m.startswith(heavy + ".") for m in modules), heavy


def test_compact_loads_only_its_own_command(tmp_path: Path) -> None:
    code, modules = _modules("compact", str(tmp_path), "--quiet")
    assert code == 0
    assert "promcp.cli.compact" in modules
    assert not any(m.startswith("promcp.analysis") or m == "pandas" for m in modules)
