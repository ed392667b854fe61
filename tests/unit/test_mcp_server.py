"""``promcp mcp``'s tools through the mcp SDK's own client (in-process), over the committed example dataset and a
two-run copy of it: each answer's structured content, its bounds, and errors as one-line tool errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from promcp.analysis.report import report
from promcp.servers.dataset import MAX_JSON_CHARS, DatasetTools, _bounded, build_server
from tests.conftest import REPO
from tests.stubs.ports import free_port
from tests.unit.test_docs import _clone_run

EXAMPLE = REPO / "examples" / "default-run"


def _call(tools: DatasetTools, name: str, args: dict[str, Any] | None = None) -> Any:
    async def go() -> Any:
        async with Client(build_server(tools)) as client:
            return await client.call_tool(name, args or {})

    return anyio.run(go)


def test_tools_are_listed_read_only() -> None:
    async def go() -> Any:
        async with Client(build_server(DatasetTools(EXAMPLE))) as client:
            return await client.list_tools()

    listed = anyio.run(go).tools
    assert {t.name for t in listed} == {"report", "top_schemas", "whatif", "diff", "footprint"}
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in listed)


def test_report_is_promcp_report_of_the_latest_run() -> None:
    result = _call(DatasetTools(EXAMPLE), "report")
    assert not result.is_error
    data = result.structured_content
    assert set(data["tables"]) == {"phases", "origins"} and data["summary"].startswith("promcp report")
    assert result.content[0].text == data["summary"] and json.loads(result.content[1].text) == data
    direct = report(EXAMPLE, sections=["origins"], latest=1).tables["origins"]
    got = {r["origin"]: r["per_task_mean"] for r in data["tables"]["origins"]}
    assert got == pytest.approx(dict(zip(direct["origin"], direct["per_task_mean"], strict=True)))


def test_top_schemas_ranks_and_bounds() -> None:
    tools = DatasetTools(EXAMPLE)
    data = _call(tools, "top_schemas", {"limit": 3}).structured_content
    top = data["tables"]["top"]
    assert len(top) == 3 and top[0]["schema_tokens"] >= top[1]["schema_tokens"] >= top[2]["schema_tokens"]
    assert data["tools"] == sum(s["tools"] for s in data["tables"]["servers"]) == 27
    assert len(data["tables"]["never_called"]) == data["never_called_count"]
    assert len(_call(tools, "top_schemas", {"limit": 1000}).structured_content["tables"]["top"]) == 27


def test_errors_are_one_line_tool_errors(tmp_path: Path) -> None:
    tools = DatasetTools(EXAMPLE)
    for name, args, words in [
        ("report", {"sections": ["nope"]}, "unknown section"),
        ("diff", {}, "needs two runs"),
        ("footprint", {"command": ["python", "-m", "promcp.servers.echo"]}, "--allow-spawn"),
        ("report", {"run": "no-such-run"}, "no-such-run"),
        (
            "footprint",
            {"url": f"http://127.0.0.1:{free_port()}/mcp", "timeout_s": 0.5},
            "did not accept connections",
        ),
    ]:
        result = _call(tools, name, args)
        assert result.is_error and len(result.content) == 1, (name, result)
        text = result.content[0].text
        assert words in text and "\n" not in text and "Traceback" not in text, text
    gone = DatasetTools(tmp_path / "missing")
    assert _call(gone, "report").is_error


def test_diff_and_whatif_over_two_runs(tmp_path: Path) -> None:
    dataset = tmp_path / "two"
    shutil.copytree(EXAMPLE, dataset)
    src = next(dataset.glob("topology=*/run_id=*/events.parquet"))
    _clone_run(src, dataset, "29991231T000000Z-00c10e")
    tools = DatasetTools(dataset)
    diffed = _call(tools, "diff").structured_content
    assert "29991231T000000Z-00c10e" in diffed["summary"] and diffed["tables"]["phases"]
    assert all(r["tokens_change"] == 0 for r in diffed["tables"]["phases"])  # a copy: no change
    whatif = _call(tools, "whatif", {"k": 2}).structured_content
    assert {r["strategy"] for r in whatif["tables"]["summary"]} >= {"full", "slim", "topk"}


def test_bounded_answers() -> None:
    body = {"tables": {"big": [{"text": "x" * 100, "i": i} for i in range(400)], "small": [{"a": 1}]}}
    out = _bounded(body)
    assert len(out["tables"]["big"]) <= 50 and out["truncated"]["big"].endswith("of 400 rows")
    wide = {"tables": {"big": [{"text": "x" * 2000, "i": i} for i in range(40)]}}
    assert len(json.dumps(_bounded(wide))) <= MAX_JSON_CHARS


def test_proxy_config_never_wraps_promcp_mcp(tmp_path: Path) -> None:
    from promcp.proxy.mcp.clients import wrap_config

    servers = {
        "promcp": {"command": "/venv/bin/promcp", "args": ["mcp", "traces/"]},
        "promcp-module": {"command": "/venv/bin/python", "args": ["-m", "promcp.cli", "mcp", "traces/"]},
        "other": {"command": "npx", "args": ["-y", "mcp", "promcp"]},
    }
    w = wrap_config({"mcpServers": servers}, "claude-code", out=tmp_path, promcp=["/x/promcp"])
    assert w.wrapped == ["other"] and set(w.kept) == {"promcp", "promcp-module"}
    assert w.config["mcpServers"]["promcp"] == servers["promcp"]
