"""The docs match the code: every shell command in README.md, docs/ and examples/ runs (or is listed below with the
reason it cannot run here), `promcp report` outputs shown in the README are the real output, the Python examples of
docs/analysis.md run, every error_type the code writes is documented, the JSON Schema in docs/run.md is the
schema, and every relative link resolves (issue 18 items 11 and 12)."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO

DOC_FILES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "examples" / "README.md",
]
#: The width the README's recorded outputs were printed at.
COLUMNS = "120"

#: Commands that cannot run in a test, each with the reason (a new documented command must run or be listed here).
SKIP: dict[str, str] = {
    "make demo": "installs everything and runs 16 tasks (minutes)",
    "make test": "is the test suite",
    "CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON' .venv/bin/pip install "
    "--no-cache-dir --force-reinstall --no-deps llama-cpp-python==0.3.36": "rebuilds llama.cpp (minutes)",
    "make paper-scale GGUF=/models/qwen2.5-7b-instruct-q4_k_m.gguf CONTEXT=32768": "needs a 7B GGUF (hours)",
    "make paper-scale-ci": "LLM run of two tasks with the whole install check (its output is recorded in the doc)",
    "promcp run --topology l-cust benchmark.yaml": "the whole default benchmark (minutes)",
    "promcp run --topology l-cust benchmark.yaml --out examples/default-run --task calc-mul --task time-tokyo "
    "--task dates-sse-between --task everything-http-sum --task multi-days-hours": "records the shipped example",
    "promcp run --topology l-cust benchmark.yaml --out traces/tour --task calc-mul --task time-tokyo "
    "--task dates-sse-between --task everything-http-sum --task multi-days-hours": "LLM run: "
    "tests/integration/test_readme_tour.py runs it and compares its tables with the README",
    "python examples/scripted_upstream.py --port 8765 &": "a loopback upstream in the background for real Claude "
    "Code (test_readme_tour starts it and checks it answers)",
    "SCRIPTED_UPSTREAM=http://127.0.0.1:8765": "a shell variable for the next command",
    "promcp run benchmark.yaml --task calc-mul --task fs-read": "LLM run (minutes on 2 cores)",
    "promcp run benchmark.yaml --task calc-mul --task time-tokyo --out /tmp/diff-demo": "LLM run (the output shown)",
    "promcp diff --dataset /tmp/diff-demo": "needs the two LLM runs above",
    "promcp run benchmark.yaml --model path/to/model.gguf": "placeholder: your GGUF file",
    "promcp run bench.yaml --backend anthropic --check": "needs an Anthropic API key and the network",
    "promcp run benchmark.yaml --dry-run": "starts all 11 servers: `promcp doctor`, run here, takes the same path",
    "promcp doctor bench.yaml --backend ollama --model qwen2.5:7b --no-servers": "placeholder: your benchmark file",
    "ANTHROPIC_API_KEY=... promcp run --topology c-cust --backend anthropic benchmark.yaml": "cloud API",
    "OPENAI_API_KEY=... promcp run --topology c-cust --backend openai --model gpt-4o-mini benchmark.yaml": "cloud API",
    "promcp run --topology l-cust --backend ollama --model qwen2.5:7b benchmark.yaml": "needs an Ollama server",
    "promcp run --topology l-cust --backend openai --base-url http://127.0.0.1:8080/v1 benchmark.yaml": "needs a "
    "llama.cpp server",
    "promcp import ~/Downloads/conversations.json --out traces/desktop": "placeholder: your own export",
    "promcp bench convert mcp-bench …": "abbreviated: the full commands are in docs/paper-scale.md",
    "promcp import conversations.json": "placeholder: your own export (fixtures: test_import_formats)",
    "promcp import ~/.claude/projects": "placeholder: your Claude Code sessions",
    "promcp import ~/.codex/sessions": "placeholder: your Codex sessions (test_import_codex: a real Codex run's)",
    "promcp import conversations.json --format chatgpt --out traces/ --since 2026-01-01 --conversation <id>": "placeholder",
    "promcp import conversations.json --tokenizer o200k_base": "placeholder: your own export",
    "promcp bench convert mcp-bench DATA/tasks/mcp-bench/mcpbench_tasks_single_runner_format.json --catalog "
    "DATA/catalogs/mcp-bench-servers.json --paper-subset -o mcp-bench-paper.yaml [--model model.gguf "
    '--context-window 32768] [--prompt task] [--no-distraction] [--per-server N] [--servers "Wikipedia,NixOS"] '
    "[--max-rounds N] [--replay-arg=--latency-ms=20-80]": "synopsis with placeholders (test_bench_convert)",
    "promcp bench convert mcp-universe DATA/tasks/mcp-universe/configs/{financial_analysis,location_navigation,"
    "web_search}.yaml --catalog DATA/catalogs/mcp-universe-servers.json --catalog "
    "DATA/catalogs/official-reference-servers.json -o u.yaml": "placeholder DATA (test_bench_convert)",
    "promcp bench convert tool-rot DATA/catalogs/tool-rot -o tool-rot.yaml": "placeholder DATA (test_bench_convert)",
    "promcp bench convert tool-attention DATA/catalogs/tool-attention -o tool-attention.yaml": "placeholder DATA",
    "promcp run --topology l-cust mcp-bench-paper.yaml": "LLM run of 30 tasks",
    "python -m promcp.servers.replay --catalog FILE --server NAME --transport stdio|streamable-http|sse [--host "
    "127.0.0.1 --port 8000] [--responses FILE] [--latency-ms 50|20-80] [--latency-per-kb-ms X] "
    "[--result-bytes 1500] [--seed 0]": "synopsis of a server (test_replay_server)",
    "promcp whatif traces/my-run": "placeholder: your run",
    "promcp report traces/ --html report.html --whatif wi.json": "placeholder: a saved what-if (test_report_html: "
    "test_whatif_json_reads_back_into_the_same_document)",
    "promcp whatif ../shared/data/catalogs/tool-rot --k 3": "runs in test_whatif_reference (embeddings, slow)",
    "promcp whatif ../shared/data/catalogs --plot scaling.png": "503 tools re-embedded per subset (4 minutes)",
    "promcp whatif CAT.json --queries q.jsonl --strategy topk --strategy two-phase --scorer bm25 --format csv": (
        "placeholder catalog"
    ),
    "promcp import conversations.json --content none": "placeholder: your own export (tests/unit/test_redact.py: every content mode)",
    "promcp import": "reads this machine's client folders (test_import_index: test_no_path_reads_claude_config_dir)",
    "promcp import conversations.json --replace": "placeholder: your own export (test_importing_the_same_file_twice_is_detected)",
    "promcp proxy config --client claude-code --out traces/claude --write": "edits ~/.claude.json for real Claude Code "
    "(test_real_claude_code_starts_the_wrapped_server: the same steps in a private HOME)",
    "claude mcp list": "real Claude Code with the wrapped server (test_real_claude_code_starts_the_wrapped_server)",
    "python -c \"import pandas as pd; print(pd.read_parquet('traces/claude')[['stage','phase','mcp_method','latency_ms',"
    "'footprint_tokens','status']].to_string(index=False))\"": "reads the dataset the two commands above wrote",
    "promcp proxy config --client claude-code --undo": "restores ~/.claude.json (test_real_claude_code_starts_the_wrapped_server)",
    'promcp record --out traces/claude --upstream "$SCRIPTED_UPSTREAM" -- claude -p "Remember that promcp records '
    'every stage." --allowedTools mcp__memory__create_entities': "real Claude Code against the tests' scripted "
    "upstream (test_record_claude_code)",
    "promcp proxy llm --upstream https://api.anthropic.com --out traces/llm": "a long-running proxy to the network "
    "(test_proxy_llm runs it on loopback)",
    "promcp proxy config --client claude-code --out traces --write": "edits ~/.claude.json (test_real_claude_code_starts_the_wrapped_server)",
    "promcp record -- claude": "runs Claude Code against the real API (test_record_claude_code: offline)",
    "promcp record -- gemini": "runs the Gemini CLI against the real API (test_record_gemini: offline)",
    'promcp record -- gemini -p "…" -o json': "runs the Gemini CLI against the real API (test_record_gemini)",
    'promcp record -- codex exec "…"': "runs Codex against the real API (test_record_codex: offline)",
    "promcp import ../shared/data/exports/claude-code-codemie-4c2ddfdc-parallel-tools.jsonl --out traces/cc "
    "--quiet": "reads ../shared beside the repository (test_cost imports the same exports)",
    "promcp report traces/cc --section cost --section cache": "needs the import above (test_cost: the same tables)",
    "promcp collect": "a long-running receiver (test_collect runs it on loopback with real Claude Code)",
    "promcp collect --listen 127.0.0.1:4318 --out traces/fleet --rotate 3600 --idle 30": "a long-running receiver",
    "promcp import otel-logs.jsonl --out traces/fleet": "placeholder: your Collector's file (test_collect)",
    "CLAUDE_CODE_ENABLE_TELEMETRY=1 OTEL_LOGS_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf "
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_LOG_TOOL_DETAILS=1 claude": "interactive Claude Code "
    "against the real API (test_collect: the same variables, offline)",
    "promcp collect --out fleet &": "a receiver in the background (test_collect_spans: the same round trip)",
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python examples/host.py": "needs the receiver above "
    "(test_readme_tour runs examples/host.py; test_collect_spans: instrument() exporting to the receiver)",
    "kill -INT %1": "stops the background receiver above",
    "python -c \"import pandas as pd; print(pd.read_parquet('fleet').sort_values('seq')[['stage','phase','tool',"
    "'latency_ms','footprint_tokens']].to_string(index=False))\"": "reads the dataset the commands above wrote",
    "promcp collect --grpc 127.0.0.1:4317": "a long-running receiver (test_collect: Claude Code over gRPC)",
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python my_host.py": "placeholder: your host",
    "promcp export traces/ --otlp http://127.0.0.1:6006": "needs a Phoenix server (test_export: a real one)",
    "ANTHROPIC_API_KEY=… promcp footprint --tokenizers anthropic:count_tokens,o200k_base -- python -m "
    "promcp.servers.scicalc": "needs an Anthropic key and the network (test_footprint_exact: a loopback stub)",
    "promcp footprint --tokenizers anthropic:count_tokens:claude-haiku-4-5 --budget 8000 -- …": "placeholder "
    "server; needs a key (test_footprint_exact: another model and a budget)",
    'promcp export traces/ --otlp http://collector:4318 --header "x-api-key=…"': "placeholder: your endpoint",
    "promcp export traces/ --otlp http://127.0.0.1:4317 --protocol grpc": "needs an OTLP/gRPC endpoint "
    "(test_export: promcp collect --grpc and Phoenix over gRPC)",
    "promcp collect --listen 127.0.0.1:4319 --out traces/copy &": "a receiver in the background "
    "(test_export: the same round trip)",
    "promcp export examples/default-run --otlp http://127.0.0.1:4319 --state /tmp/copy.json": "needs the receiver "
    "above (test_export: the same round trip)",
    "PHOENIX_WORKING_DIR=/tmp/phoenix PHOENIX_HOST=127.0.0.1 phoenix serve &": "a long-running Phoenix server "
    "(test_export starts one per test session)",
    "promcp export examples/default-run --otlp http://127.0.0.1:6006 --project default-run": "needs the Phoenix "
    "server above (test_export)",
    "promcp run benchmark.yaml --strategy topk:3": "LLM run of 16 tasks (test_run_strategies: the same path, scripted)",
    "promcp proxy llm --upstream https://api.anthropic.com --strategy topk:5:bm25 --out traces/topk": "a long-running "
    "proxy to the network (test_proxy_llm_rewrite runs the same rewrite on loopback, per API family)",
    "promcp record --strategy slim -- claude": "runs Claude Code against the real API (test_record_strategy: offline)",
    "python tests/perf/bench_proxy_strategy.py 60": "a benchmark (minutes; loads the embedding model)",
    "promcp run benchmark.yaml --strategy slim --out traces/slim": "LLM run of 16 tasks (minutes)",
    "promcp run benchmark.yaml --strategy search-tool:3:bm25": "LLM run (test_run_strategies: search-tool)",
    "promcp run --topology l-cust benchmark.yaml --task calc-mul --task multi-days-hours --strategy full --out "
    "traces/strat": "LLM run (17 min on the shared machine; its table is in docs/whatif.md)",
    "promcp run --topology l-cust benchmark.yaml --task calc-mul --task multi-days-hours --strategy topk:3 --out "
    "traces/strat": "LLM run (its table is in docs/whatif.md)",
    "promcp diff 20261126T223617Z-e3745b 20261126T225654Z-ded910 --dataset traces/strat --format markdown": "needs "
    "the two LLM runs above (test_run_strategies: the same diff on a scripted run)",
    "promcp run --topology l-cust benchmark.yaml --task calc-mul --task multi-days-hours --strategy full --out "
    "traces/strat2": "LLM run (24 min on the shared machine; its table is in docs/whatif.md)",
    "promcp run --topology l-cust benchmark.yaml --task calc-mul --task multi-days-hours --strategy topk:3:bm25 "
    "--out traces/strat2": "LLM run (its table is in docs/whatif.md)",
    "promcp report traces/strat2 --format markdown": "needs the two LLM runs above (test_run_strategies: the same "
    "section on a scripted run)",
    "for s in full slim dedup topk:3:bm25 search-tool:3:bm25 two-phase:3:bm25; do": "six whole-benchmark LLM runs "
    "(2-6.5 min each; their table is in docs/whatif.md)",
    "promcp run --topology l-cust benchmark.yaml --strategy $s --out traces/strat-all": "the loop's LLM run",
    "done": "the loop's end",
    "promcp report traces/strat-all --section strategies --format markdown": "needs the six LLM runs above "
    "(test_run_strategies: the same section on a scripted run)",
    "promcp run --topology l-cust benchmark.yaml --task fs-read --task git-status --strategy topk:3:bm25 --out "
    "traces/strat-all": "LLM run (8 min on the shared machine; its table is in docs/whatif.md)",
    "promcp run --topology l-cust benchmark.yaml --task fs-read --task git-status --strategy two-phase:3:bm25 --out "
    "traces/strat-all": "LLM run (5 min on the shared machine; its table is in docs/whatif.md)",
    "promcp report traces/strat-all --run 7947be --run bece5e --run 774770 --task fs-read --task git-status "
    "--section strategies --format markdown": "needs the LLM runs above (test_run_strategies: the same section on "
    "a scripted run)",
    "promcp run --topology l-cust benchmark.yaml --strategy topk:3:bm25 --out traces/strat-all": "LLM run of 16 "
    "tasks (13 min on the shared machine; its table is in docs/whatif.md)",
    "promcp diff 7947be 1b258f --dataset traces/strat-all --table strategies --format markdown": "needs the LLM "
    "runs above (test_run_strategies: the same table on a scripted run)",
}


@dataclass(frozen=True)
class DocCommand:
    path: Path
    command: str
    output: tuple[str, ...]  # the output shown below a ``$`` line (console blocks)


def _strip_comment(line: str) -> str:
    return re.sub(r"\s{2,}#\s.*$", "", line).rstrip()


def doc_commands() -> list[DocCommand]:
    out: list[DocCommand] = []
    for path in DOC_FILES:
        for lang, body in re.findall(
            r"```(bash|sh|console)\n(.*?)```", path.read_text(encoding="utf-8"), re.S
        ):
            lines = body.splitlines()
            i = 0
            while i < len(lines):
                line = lines[i]
                if lang == "console" and not line.startswith("$ "):
                    i += 1
                    continue
                text = _strip_comment(line[2:] if lang == "console" else line.strip())
                i += 1
                if not text or text.startswith("#"):
                    continue
                while text.endswith("\\") and i < len(lines):
                    text = text[:-1].rstrip() + " " + _strip_comment(lines[i].strip())
                    i += 1
                shown: list[str] = []
                while lang == "console" and i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
                out.append(DocCommand(path, " ".join(text.split()), tuple(shown)))
    return out


COMMANDS = doc_commands()
RUNNABLE = list(dict.fromkeys(c.command for c in COMMANDS if c.command not in SKIP))


def test_every_skip_is_still_in_the_docs() -> None:
    documented = {c.command for c in COMMANDS}
    assert not set(SKIP) - documented, "remove skips of commands the docs no longer show"


def _clone_run(src: Path, dest_root: Path, run_id: str) -> None:
    """A copy of a run under another run id (a second run in the sandbox, for --latest and diff)."""
    table = pq.read_table(src)
    meta = dict(table.schema.metadata or {})
    header = json.loads(meta[b"promcp.run"])
    old = header["run_id"]
    header.update(run_id=run_id, created_ns=int(header.get("created_ns") or 0) + 60_000_000_000)
    meta[b"promcp.run"] = json.dumps(header).encode()
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.schema.get_field_index("run_id")
    ids = pc.cast(table.column(col), pa.string())
    table = table.set_column(col, "run_id", pc.replace_substring(ids, old, run_id)).replace_schema_metadata(
        meta
    )
    dest = dest_root / f"topology={header['topology']}" / f"run_id={run_id}" / "events.parquet"
    dest.parent.mkdir(parents=True)
    pq.write_table(table, dest)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A working directory like a fresh clone after a run: the repository's files, two runs in traces/."""
    root = tmp_path
    for name in ("examples", "benchmark.yaml", "node_modules"):
        (root / name).symlink_to(REPO / name)
    src = next((REPO / "examples" / "default-run").glob("topology=*/run_id=*/events.parquet"))
    import shutil

    shutil.copytree(src.parent.parent.parent, root / "traces")
    _clone_run(src, root / "traces", "29991231T000000Z-00c10e")
    return root


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "COLUMNS": COLUMNS,
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        # the code under test, not whatever the venv's editable install points at
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
    }
    if argv[0] == "python":
        argv[0] = sys.executable
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("command", RUNNABLE)
def test_documented_command_runs(command: str, sandbox: Path) -> None:
    out = _run(command, sandbox)
    assert out.returncode == 0, f"{command}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    assert "Traceback" not in out.stderr
    shown = [
        c.output
        for c in COMMANDS
        if c.command == command and c.output and command.startswith("promcp report")
    ]
    for lines in shown:  # a report of the committed example is deterministic: the doc shows the real output
        assert out.stdout.rstrip("\n").splitlines() == list(lines), command


def test_analysis_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    text = (REPO / "docs" / "analysis.md").read_text(encoding="utf-8")
    scope: dict[str, object] = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        exec(compile(block, "docs/analysis.md", "exec"), scope)


def _error_types_in_code() -> dict[str, str]:
    """Every ``error_type`` the code writes as a literal: ``error_type="…"``, ``Failure.of("…")``,
    ``Failure(status, "…")`` → where."""
    from promcp import events

    found: dict[str, str] = {}
    for path in [*(REPO / "promcp").rglob("*.py"), *(REPO / "collectors").rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg == "error_type":
                values.append(node.value)
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "of" and _named(func.value, "Failure"):
                    values.extend(node.args[:1])
                elif _named(func, "Failure"):
                    values.extend(node.args[1:2])
            for value in values:
                text = value.value if isinstance(value, ast.Constant) else None
                if isinstance(value, ast.Name) and value.id.isupper():  # a name of the vocabulary's
                    text = getattr(events, value.id, None)
                if isinstance(text, str):
                    found.setdefault(text, f"{path.relative_to(REPO)}:{value.lineno}")
    return found


def _named(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def test_every_error_type_is_in_the_vocabulary_and_documented() -> None:
    from promcp.events import ERROR_TYPES, LEGACY_ERROR_TYPES
    from promcp.wire._errors import STATUS_TYPES

    written = _error_types_in_code()
    assert {"tool_error", "no_result", "mcp_error", "upstream_cut"} <= set(written)  # the scan really reads
    outside = {v: where for v, where in written.items() if v not in ERROR_TYPES}
    assert not outside, f"error_type values written but not in promcp.events.ERROR_TYPES: {outside}"
    assert set(STATUS_TYPES.values()) | {"http_error"} <= ERROR_TYPES
    assert set(LEGACY_ERROR_TYPES.values()) <= ERROR_TYPES and not set(LEGACY_ERROR_TYPES) & ERROR_TYPES
    events_md = (REPO / "docs" / "events.md").read_text(encoding="utf-8")
    section = events_md.split("## `error_type` values", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", section))
    missing = ERROR_TYPES - documented
    assert not missing, f"promcp.events.ERROR_TYPES values docs/events.md does not list: {sorted(missing)}"


def test_run_md_schema_is_the_schema() -> None:
    from promcp.host._schema import BENCHMARK_SCHEMA

    text = (REPO / "docs" / "run.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(.*?)```", text, re.S)
    assert block is not None
    assert json.loads(block.group(1)) == BENCHMARK_SCHEMA


def test_relative_links_resolve() -> None:
    broken = []
    for path in DOC_FILES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(REPO)} → {target}")
    assert not broken, broken
