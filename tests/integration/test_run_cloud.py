"""``promcp run --topology c-cust`` with network backends, against stub LLM servers and a real MCP server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import promcp.analysis as pa
from tests.stubs.llm_http import StubServer, anthropic_agent, ollama_agent, openai_agent

BENCH = """
name: cloud-smoke
llm:
  backend: anthropic
  model: claude-sonnet-4-5
servers:
  echo:
    command: python
    args: [-m, promcp.servers.echo]
tasks:
  - id: echo-once
    prompt: "Echo the word hello back to me."
    servers: [echo]
    expected_tools: ["echo:echo"]
"""


def _run(bench: Path, base_url: str, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "promcp.cli",
            "run",
            "--topology",
            "c-cust",
            "--base-url",
            base_url,
            "--out",
            str(out),
            str(bench),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


@pytest.mark.servers
def test_c_cust_anthropic_records_provider_usage(tmp_path: Path) -> None:
    bench = tmp_path / "bench.yaml"
    bench.write_text(BENCH)
    out = tmp_path / "out"
    with StubServer(anthropic_agent, wire="anthropic") as stub:
        proc = _run(bench, stub.url, out, ANTHROPIC_API_KEY="sk-ant-test-key", COLUMNS="120")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert stub.violations == [], "the agent loop's requests are valid Messages API requests"
    assert len(stub.requests) == 2, "one call that uses the tool, one that answers"
    assert "sk-ant-test-key" not in proc.stdout + proc.stderr
    df = pa.load(out)
    assert not df.astype(str).apply(lambda col: col.str.contains("sk-ant-test-key")).any().any()
    assert not any(b"sk-ant-test-key" in f.read_bytes() for f in out.rglob("*") if f.is_file())
    assert set(df["topology"].astype(str)) == {"c-cust"}
    stages = list(df.loc[df["task_id"].notna(), "stage"].astype(str))
    assert stages == ["S1", "S2", "S3", "S4", "S5", "S6"]
    llm = df[df["stage"].astype(str).isin(["S1", "S2", "S5", "S6"])]
    assert set(llm["token_source"].astype(str)) == {"provider"}
    assert set(llm["provider"].astype(str)) == {"anthropic"}
    s1 = df[df["stage"].astype(str) == "S1"].iloc[0]
    # the stub reports 472 input tokens + 200 cache writes: provider usage is ground truth
    assert s1["tokens_in"] == 472 + 200
    origins = ["in_system", "in_schemas", "in_user", "in_history", "in_tool_results"]
    assert sum(int(s1[c]) for c in origins) == s1["tokens_in"], "origins are scaled to the provider total"
    attrs = json.loads(s1["attrs"])
    assert attrs["tokens_in_estimate"] > 0 and attrs["origin_scale"] == round(
        672 / attrs["tokens_in_estimate"], 6
    )
    assert '"tokens_in_estimate"' in s1["attrs"] and s1["cache_write_tokens"] == 200
    assert s1["tokenizer"] == "approx:claude"
    s6 = df[df["stage"].astype(str) == "S6"].iloc[0]
    assert s6["tokens_out"] == 41
    s4 = df[df["stage"].astype(str) == "S4"].iloc[0]
    assert s4["server"] == "echo" and s4["status"] == "ok" and s4["footprint_tokens"] > 0
    assert df[df["stage"].astype(str) == "S2"].iloc[0]["tool_call_id"] == s4["tool_call_id"]
    # cost and cache (docs/accounting.md, "Cost"): the first call wrote 200 tokens to the cache, the second read 128
    rep = pa.report(out)
    assert {"cost", "cache", "schema_tax"} <= set(rep.tables)
    cache = rep.tables["cache"].set_index("origin")
    assert cache["cache_write"].sum() == 200 and cache["cache_read"].sum() == 128
    leading = cache[(cache["cache_read"] > 0) | (cache["cache_write"] > 0)].index
    assert set(leading) <= {"schemas", "system"}, (
        "a cache covers the prompt's prefix: tool definitions, system"
    )
    tax = rep.tables["schema_tax"].set_index(
        "schema"
    )  # the echo server's three tool definitions, on both calls
    assert set(tax.index) == {"echo/echo", "echo/reverse", "echo/word_count"} and set(tax["calls"]) == {2}
    echo = tax.loc[
        "echo/echo"
    ]  # first in the prompt: written by call 1, read by call 2 (one write, N-1 reads)
    assert echo["cache_writes"] > 0 and echo["cache_reads"] > 0 and echo["billed_usd"] < echo["no_cache_usd"]
    last = tax.loc["echo/word_count"]  # past the cached prefix: billed as uncached input both times
    assert last["cache_reads"] == last["cache_writes"] == 0 and last["billed_usd"] == last["no_cache_usd"]
    assert echo["deferred_usd"] > 0 and last["deferred_usd"] == 0  # never called: deferred, it is never sent
    costs = pa.call_costs(df)
    assert costs["total_usd"].notna().all() and len(costs) == 2
    # the what-if in dollars: slimming keeps the cached prefix, routing (top-k) breaks it
    from promcp.analysis.whatif import whatif_dataset

    what = whatif_dataset(out, scorer="bm25", strategies=["slim", "topk"], k=1).summary.set_index("strategy")
    assert what.at["full", "saved_usd"] == 0 and what.at["full", "saved_usd_cached"] == 0
    slim, topk = what.loc["slim"], what.loc["topk"]
    assert slim["saved_total"] > 0 and 0 < slim["saved_usd_cached"] < slim["saved_usd"]
    # top-1 of 3 tools saves tokens, but the calls lose their cached prefix: less saved with caching than without
    assert topk["saved_total"] > 0 and topk["saved_usd_cached"] < topk["saved_usd"]


@pytest.mark.servers
@pytest.mark.parametrize(
    ("backend", "replier", "tokens_in"), [("openai", openai_agent, 412), ("ollama", ollama_agent, 301)]
)
def test_c_cust_openai_compatible_and_ollama(
    tmp_path: Path, backend: str, replier: object, tokens_in: int
) -> None:
    bench = tmp_path / "bench.yaml"
    bench.write_text(
        BENCH.replace("backend: anthropic", f"backend: {backend}").replace(
            "model: claude-sonnet-4-5", "model: gpt-4o-mini" if backend == "openai" else "model: qwen2.5:7b"
        )
    )
    out = tmp_path / "out"
    with StubServer(replier, wire=backend) as stub:  # type: ignore[arg-type]
        base = stub.url + ("/v1" if backend == "openai" else "")
        proc = _run(bench, base, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert stub.violations == []
    df = pa.load(out)
    assert list(df.loc[df["task_id"].notna(), "stage"].astype(str)) == ["S1", "S2", "S3", "S4", "S5", "S6"]
    s1 = df[df["stage"].astype(str) == "S1"].iloc[0]
    assert s1["token_source"] == "provider" and s1["tokens_in"] == tokens_in
    if backend == "ollama":  # Ollama reports prefill time: the input event has exact latency
        s2 = df[df["stage"].astype(str) == "S2"].iloc[0]
        total = s1["latency_ms"] + s2["latency_ms"]  # the call's wall time, split once
        # the stub answers at once but reports a 640 ms prefill: the prefill is clamped to the call's total
        assert s1["latency_ms"] == pytest.approx(min(640.0, total)) and s1["timing_quality"] == "exact"
    else:
        assert pd.isna(s1["latency_ms"]) and s1["timing_quality"] == "none"


@pytest.mark.servers
def test_invalid_json_arguments_are_answered_with_an_error(tmp_path: Path) -> None:
    """A model that emits broken JSON arguments gets an error message back, as a real client does."""
    from tests.stubs.llm_http import Reply, openai_text, openai_tool_call

    replies = [Reply(200, openai_tool_call("echo", '{"text": "hel')), Reply(200, openai_text("Sorry."))]
    bench = tmp_path / "bench.yaml"
    bench.write_text(
        BENCH.replace("backend: anthropic", "backend: openai").replace("claude-sonnet-4-5", "gpt-4o")
    )
    out = tmp_path / "out"
    with StubServer(replies) as stub:
        proc = _run(bench, stub.url + "/v1", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    second = stub.requests[1].body["messages"][-1]
    assert second["role"] == "tool" and "not a JSON object" in second["content"]
    df = pa.load(out)
    s3 = df[df["stage"].astype(str) == "S3"].iloc[0]
    assert s3["status"] == "error" and s3["error_type"] == "invalid_arguments"


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.servers
def test_default_benchmark_with_backend_override_and_npm_server(tmp_path: Path) -> None:
    """The documented command: the repo's benchmark.yaml (llama-cpp in the file) run with ``--backend anthropic``
    against the official npm server-everything over stdio."""
    if not (REPO / "node_modules" / ".bin" / "mcp-server-everything").exists():
        pytest.skip("npm servers not installed (make install)")
    out = tmp_path / "out"
    with StubServer(anthropic_agent, wire="anthropic") as stub:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "promcp.cli",
                "run",
                "--topology",
                "c-cust",
                "--backend",
                "anthropic",
                "--base-url",
                stub.url,
                "--task",
                "everything-echo",
                "--out",
                str(out),
                "benchmark.yaml",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-key"},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert stub.violations == []
    sent = stub.requests[0].body
    assert sent["model"] == "claude-sonnet-4-5", "the file's llama-cpp model is not sent to Anthropic"
    df = pa.load(out)
    init = df[df["stage"].astype(str) == "INIT"]
    assert set(init["server"].astype(str)) == {"everything"}
    discovery = init[init["phase"].astype(str) == "tools_discovery"].iloc[0]
    listed = json.loads(discovery["attrs"])["tools"]
    assert sorted(t["name"] for t in sent["tools"]) == sorted(listed), "every listed tool is offered as sent"
    assert all("input_schema" in t for t in sent["tools"])
    llm = df[df["stage"].astype(str).isin(["S1", "S2", "S5", "S6"])]
    assert len(llm) == 4 and set(llm["token_source"].astype(str)) == {"provider"}
    s1 = llm[llm["stage"].astype(str) == "S1"].iloc[0]
    assert s1["tokens_in"] == 472 + 200 and s1["in_schemas"] > s1["in_user"] > 0, "13 tool schemas dominate"
    s3 = df[df["stage"].astype(str) == "S3"].iloc[0]
    assert s3["server"] == "everything" and s3["status"] == "ok"
