"""promcp.catalogs: every shared catalog format reads with the right counts; bad input names file and entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp import tokenizers
from promcp.catalogs import load_catalog
from promcp.errors import ConfigError

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "catalogs"

PAPER_15 = {  # the ProMCP paper's 15 MCP-Bench servers: tools and o200k tokens as the host renders them
    "Wikipedia": (9, 519),
    "Paper Search": (19, 2485),
    "Scientific Computing": (26, 4024),
    "Medical Calculator": (22, 6476),
    "Hugging Face": (10, 763),
    "Game Trends": (7, 243),
    "OSINT Intelligence": (7, 204),
    "Weather Data": (4, 375),
    "NASA Data": (21, 2738),
    "Car Price Evaluator": (3, 299),
    "Reddit": (2, 234),
    "Movie Recommender": (1, 51),
    "NixOS": (18, 2207),
    "FruityVice": (1, 122),
    "Call for Papers": (1, 60),
}


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared reference data not present: {path}")
    return path


@pytest.mark.parametrize(
    ("name", "fmt", "servers", "tools"),
    [
        ("mcp-bench-servers.json", "mcp-bench", 28, 257),
        ("mcp-bench-servers-relisted.json", "server-list", 17, 152),
        ("mcp-universe-servers.json", "server-list", 8, 21),
        ("official-reference-servers.json", "server-list", 5, 44),
        ("paper-tools-flat.json", "flat", 29, 221),
        ("tool-rot", "flat", 6, 54),
        ("tool-attention", "tool-attention", 6, 120),
    ],
)
def test_shared_catalogs_read(name: str, fmt: str, servers: int, tools: int) -> None:
    cat = load_catalog(_need(DATA / name))
    assert cat.format == fmt
    assert len(cat.servers) == servers
    assert len(cat.tools()) == tools
    # qualified names are unique across the catalog; every tool has an object input schema on the wire
    assert len({t.qualified_name for t in cat.tools()}) == tools
    assert all(t.wire["inputSchema"].get("type", "object") == "object" for t in cat.tools())


def test_paper_subset_151_tools_and_20_8k_o200k_tokens() -> None:
    cat = load_catalog(_need(DATA / "mcp-bench-servers.json")).subset(list(PAPER_15))
    o200k = tokenizers.get("o200k_base")
    fp = cat.footprint(o200k)
    assert {s: (v["n_tools"], v["tokens"]) for s, v in fp.items()} == PAPER_15
    total = sum(v["tokens"] for v in fp.values())
    assert sum(v["n_tools"] for v in fp.values()) == 151
    assert abs(total - 20_800) / 20_800 <= 0.01
    # the tools/list results a replay server sends, counted whole, are within 1 % too
    listed = sum(o200k.count(s.tools_list_bytes().decode()) for s in cat.servers)
    assert abs(listed - 20_800) / 20_800 <= 0.011


def test_raw_dict_kept_exactly_and_wire_is_mcp_shape() -> None:
    cat = load_catalog(_need(DATA / "mcp-bench-servers.json"))
    src = json.loads((DATA / "mcp-bench-servers.json").read_text(encoding="utf-8"))
    tool = cat.server("wikipedia").tool("search_wikipedia")
    assert dict(tool) == src["servers"]["Wikipedia"]["tools"]["search_wikipedia"]
    assert set(tool.wire) == {"name", "description", "inputSchema"}
    assert tool.key == "Wikipedia/search_wikipedia"
    universe = load_catalog(DATA / "mcp-universe-servers.json")
    date = universe.server("date").tools[0]
    assert "outputSchema" in date.wire  # every MCP field the capture kept stays on the wire
    assert universe.server("date").meta["protocolVersion"] == "2025-11-25"


def test_duplicate_names_across_servers_are_namespaced(tmp_path: Path) -> None:
    f = tmp_path / "dup.json"
    schema = {"type": "object", "properties": {}}
    f.write_text(
        json.dumps(
            [
                {
                    "server": "Alpha One",
                    "tools": [
                        {"name": "search", "inputSchema": schema},
                        {"name": "a", "inputSchema": schema},
                    ],
                },
                {"server": "beta", "tools": [{"name": "search", "description": "b", "inputSchema": schema}]},
            ]
        )
    )
    cat = load_catalog(f)
    names = [(t.server, t.name, t.qualified_name) for t in cat.tools()]
    assert names == [
        ("Alpha One", "search", "alpha-one__search"),
        ("Alpha One", "a", "a"),
        ("beta", "search", "beta__search"),
    ]
    # a subset without the clash gets plain names back
    assert [t.qualified_name for t in cat.subset(["beta"]).tools()] == ["search"]


@pytest.mark.parametrize(
    ("content", "key", "what"),
    [
        (
            {"servers": {"W": {"tools": {"s": {"name": "s", "description": "d", "input_schema": []}}}}},
            'servers["W"].tools["s"].input_schema',
            "must be a JSON object",
        ),
        (
            {"servers": {"W": {"tools": {"s": {"name": "t", "input_schema": {}}}}}},
            'servers["W"].tools["s"].name',
            "names itself 't'",
        ),
        ({"servers": {"W": {"name": "W"}}}, 'servers["W"].tools', "needs 'tools'"),
        (
            [
                {
                    "server": "x",
                    "tools": [
                        {"name": "a", "inputSchema": {"type": "object"}},
                        {"name": "a", "inputSchema": {}},
                    ],
                }
            ],
            "[0].tools[1]",
            "twice",
        ),
        (
            [{"server": "x", "tools": [{"description": "no name", "inputSchema": {}}]}],
            "[0].tools[0].name",
            "name",
        ),
        ([{"name": "a", "inputSchema": {}}, {"server": "s", "name": "b"}], "[0]", ""),
        (
            [{"id": "nounderscore", "summary": "", "full_schema": {"name": "n", "inputSchema": {}}}],
            "[0].id",
            "<server>__<tool>",
        ),
        ([{"server": "s", "name": "b", "inputSchema": {"type": "string"}}], "[0].inputSchema", "'object'"),
    ],
)
def test_malformed_catalogs_name_file_and_entry(tmp_path: Path, content: object, key: str, what: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(content))
    with pytest.raises(ConfigError) as info:
        load_catalog(f)
    assert info.value.source == str(f)
    if key != "[0]" or what:
        assert info.value.key == key
        assert what in str(info.value)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.json"
    f.write_text('{"servers": {\n  "W": {\n    "tools": [}\n')
    with pytest.raises(ConfigError) as info:
        load_catalog(f)
    assert info.value.line == 3 and "invalid JSON" in str(info.value)
    with pytest.raises(ConfigError, match="no catalog file"):
        load_catalog(tmp_path)
    with pytest.raises(ConfigError, match="unknown catalog format"):
        load_catalog(f, format="nope")


def test_captured_tools_list_keeps_exact_bytes(tmp_path: Path) -> None:
    body = b'{"tools":[{"name":"get","description":"G\\u00e9t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}'
    f = tmp_path / "weather.tools.json"
    f.write_bytes(body + b"\n")
    server = load_catalog(f).server("weather")
    assert server.tools_list_bytes() == body
    assert server.tools[0].wire["annotations"] == {"readOnlyHint": True}
    envelope = tmp_path / "wiki.json"
    envelope.write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "result": json.loads(body)}))
    assert load_catalog(envelope).server("wiki").tools_list_result() == json.loads(body)
