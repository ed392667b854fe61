"""CI-sized paper-scale run with a distraction server (complements test_replay_run.py): `promcp run` with the embedded local model through replay servers of the MCP-Bench dump.

Task 1 (FruityVice) must give INIT (spawn, ready, initialize, tools_discovery) and S1–S6, with the discovery
footprint equal to the catalog's under the run's tokenizer and S4 marked synthetic. Task 2 adds the Medical
Calculator (22 tools, ~7.5k tokens) as a distraction server under a 2,048-token window: a context_overflow event with
the counts, not a crash.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promcp import analysis, tokenizers
from promcp.catalogs import load_catalog

ROOT = Path(__file__).resolve().parents[2]
DUMP = ROOT / ".." / "shared" / "data" / "catalogs" / "mcp-bench-servers.json"

BENCH = """\
name: replay-ci
llm: {{backend: llama-cpp, context_window: 2048}}
sampling: {{temperature: 0.0, max_tokens: 48, seed: 0, tool_choice: first}}
policy: {{max_rounds: 2}}
servers:
  fruityvice: {{mode: replay, catalog: "{dump}", replay_server: FruityVice}}
  medical-calculator: {{mode: replay, catalog: "{dump}", replay_server: Medical Calculator}}
tasks:
  - id: fruit
    prompt: "How much sugar is in a banana? Use the fruit nutrition tool."
    servers: [fruityvice]
    expected_tools: ["fruityvice:get_fruit_nutrition"]
  - id: fruit-distracted
    prompt: "How much sugar is in a banana?"
    servers: [fruityvice]
    distraction_servers: [medical-calculator]
"""


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    if not DUMP.exists():
        pytest.skip(f"shared reference data not present: {DUMP}")
    pytest.importorskip("llama_cpp")
    tmp = tmp_path_factory.mktemp("replay-overflow")
    bench = tmp / "bench.yaml"
    bench.write_text(BENCH.format(dump=DUMP.resolve().as_posix()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "promcp.cli", "run", str(bench), "--out", str(tmp / "traces")],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return analysis.load(tmp / "traces")


def _attrs(row):  # type: ignore[no-untyped-def]
    value = row["attrs"]
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def test_init_and_s1_to_s6_through_replay_servers(events) -> None:  # type: ignore[no-untyped-def]
    init = events[(events.stage == "INIT") & (events.server == "fruityvice")]
    assert set(init.phase) >= {"spawn", "ready", "initialize", "tools_discovery"}
    task = events[events.task_id == "fruit"]
    assert {"S1", "S2", "S3", "S4", "S5", "S6"} <= set(task.stage)
    s4 = task[task.stage == "S4"].iloc[0]
    assert s4["server"] == "fruityvice" and _attrs(s4)["synthetic"] is True


def test_schema_footprint_equals_the_catalogs(events) -> None:  # type: ignore[no-untyped-def]
    cat = load_catalog(DUMP)
    for server, name in (("fruityvice", "FruityVice"), ("medical-calculator", "Medical Calculator")):
        disc = events[
            (events.stage == "INIT") & (events.phase == "tools_discovery") & (events.server == server)
        ]
        row = disc.iloc[0]
        expected = cat.server(name).footprint(tokenizers.get(row.tokenizer))
        assert row.footprint_tokens == expected["tokens"]
        assert row.footprint_bytes == expected["bytes"]
        assert {k: v["tokens"] for k, v in _attrs(row)["tools"].items()} == {
            k: v["tokens"] for k, v in expected["tools"].items()
        }
    s1 = events[(events.task_id == "fruit") & (events.stage == "S1")].iloc[0]
    fruit = events[(events.phase == "tools_discovery") & (events.server == "fruityvice")].iloc[0]
    # the prompt's schema tokens are the catalog's, plus at most one separator token per tool (chat template)
    assert fruit.footprint_tokens <= s1.in_schemas <= fruit.footprint_tokens + 1


def test_distraction_servers_overflow_the_window_as_an_event(events) -> None:  # type: ignore[no-untyped-def]
    task = events[events.task_id == "fruit-distracted"]
    over = task[task.status == "context_overflow"]
    assert len(over) == 1
    row = over.iloc[0]
    disc = events[events.phase == "tools_discovery"].groupby("server").footprint_tokens.first()
    schemas = disc["fruityvice"] + disc["medical-calculator"]
    assert schemas <= row.in_schemas <= schemas + 1 + 22  # 23 tools, at most one separator token each
    assert row.tokens_in > row.context_window == 2048
    assert not {"S2", "S3", "S4", "S6"} & set(task.stage)  # nothing was sent to the model
