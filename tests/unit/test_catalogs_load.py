"""promcp.catalogs on the shared reference catalogs and on malformed input (errors name the file and the entry)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp.catalogs import FORMATS, load_catalog, render_tool
from promcp.errors import ConfigError
from promcp.host.llm.base import LLMBackend, ToolSpec
from promcp.tokenizers import get as get_tokenizer

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "catalogs"

#: the ProMCP paper's 15 MCP-Bench servers: (tools, o200k tokens as promcp's host renders them)
PAPER_SUBSET = {
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


def _shared(name: str) -> Path:
    path = DATA / name
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
def test_every_shared_catalog_loads(name: str, fmt: str, servers: int, tools: int) -> None:
    catalog = load_catalog(_shared(name))
    assert catalog.format == fmt
    assert len(catalog.servers) == servers
    assert len(catalog.tools()) == tools
    assert load_catalog(_shared(name), format=fmt).names() == catalog.names()
    qualified = [t.qualified_name for t in catalog.tools()]
    assert len(set(qualified)) == len(qualified), "qualified names must be unique across the catalog"


def test_raw_tools_are_kept_exactly_as_listed() -> None:
    path = _shared("mcp-bench-servers.json")
    source = json.loads(path.read_text(encoding="utf-8"))["servers"]["Wikipedia"]["tools"]
    server = load_catalog(path).server("Wikipedia")
    assert [dict(t) for t in server.tools] == list(source.values())
    assert [t.name for t in server.tools] == list(source)
    first = server.tools[0]
    assert first.wire["inputSchema"] == source[first.name]["input_schema"]
    # key order inside the schema is the recorded order (it decides the rendered text)
    assert json.dumps(first.wire["inputSchema"]) == json.dumps(source[first.name]["input_schema"])


def test_paper_subset_counts_and_footprint_match_the_host() -> None:
    catalog = load_catalog(_shared("mcp-bench-servers.json"))
    tok = get_tokenizer("o200k_base")
    total_tools = total_tokens = 0
    for name, (n_tools, tokens) in PAPER_SUBSET.items():
        server = catalog.server(name)
        fp = server.footprint(tok)
        # the host's own rendering (LLMBackend.render_tool default) gives the same text for every tool
        for t in server.tools:
            spec = ToolSpec(t.name, t.description, dict(t.input_schema), server.name, t.name)
            assert render_tool(t) == LLMBackend.render_tool(None, spec)  # type: ignore[arg-type]
        assert (fp["n_tools"], fp["tokens"]) == (n_tools, tokens), name
        total_tools += fp["n_tools"]
        total_tokens += fp["tokens"]
    assert total_tools == 151
    assert abs(total_tokens - 20_800) <= 208


def test_duplicate_names_across_servers_are_namespaced_not_merged() -> None:
    catalog = load_catalog(_shared("paper-tools-flat.json"))
    geocode = [t for t in catalog.tools() if t.name == "maps_geocode"]
    assert len(geocode) == 2
    assert {t.server for t in geocode} == {"mcp-bench:Google Maps", "mcp-universe:google-maps"}
    assert {t.qualified_name for t in geocode} == {
        "mcp-bench-google-maps__maps_geocode",
        "mcp-universe-google-maps__maps_geocode",
    }
    # two benchmarks' same-slug servers are told apart, both kept whole
    assert {"mcp-bench:Wikipedia", "mcp-universe:wikipedia"} <= set(catalog.names())


def test_duplicates_in_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    tool = {"name": "search", "description": "d", "inputSchema": {"type": "object"}}
    path.write_text(json.dumps([{"server": "a", "tools": [tool]}, {"server": "b", "tools": [tool]}]))
    catalog = load_catalog(path)
    assert sorted(t.qualified_name for t in catalog.tools()) == ["a__search", "b__search"]
    assert [t.server for t in catalog.tools()] == ["a", "b"]


@pytest.mark.parametrize(
    ("content", "key", "words"),
    [
        (
            '{"servers": {"W": {"tools": {"s": {"name": "s", "input_schema": 3}}}}}',
            'servers["W"].tools["s"]',
            "schema",
        ),
        (
            '{"servers": {"W": {"tools": {"s": {"name": "t", "input_schema": {}}}}}}',
            'servers["W"].tools["s"]',
            "names itself",
        ),
        ('[{"server": "a", "tools": [{"description": "x", "inputSchema": {}}]}]', "[0].tools[0]", "name"),
        (
            '[{"server": "a", "tools": [{"name": "x", "inputSchema": {}}, {"name": "x", "inputSchema": {}}]}]',
            "[0].tools[1]",
            "twice",
        ),
        (
            '[{"name": "x", "inputSchema": {}, "server": "s"}, {"name": "y", "inputSchema": {}}]',
            "[1]",
            "server",
        ),
        ('[{"id": "nounderscore", "full_schema": {"name": "x", "inputSchema": {}}}]', "[0].id", "id"),
        ('{"tools": [{"name": "x", "inputSchema": {"type": "string"}}]}', "tools[0]", "object"),
        (
            '{"servers": {"W": {"tools": {"s": {"name": "s", "description": "d", "input_schema": []}}}}}',
            'servers["W"].tools["s"].input_schema',
            "must be a JSON object",
        ),
        ('{"servers": {"W": {"name": "W"}}}', 'servers["W"].tools', "needs 'tools'"),
    ],
)
def test_malformed_input_names_file_and_entry(tmp_path: Path, content: str, key: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_catalog(path)
    assert info.value.source == str(path)
    assert info.value.key is not None and info.value.key.startswith(key), info.value.key
    assert words in str(info.value)


def test_unreadable_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"servers": {\n  "a": ')
    with pytest.raises(ConfigError, match="invalid JSON") as info:
        load_catalog(bad)
    assert info.value.line == 2
    with pytest.raises(ConfigError, match="not a known tool catalog"):
        (tmp_path / "n.json").write_text("42")
        load_catalog(tmp_path / "n.json")
    with pytest.raises(ConfigError, match="no catalog file"):
        load_catalog(tmp_path)
    with pytest.raises(ConfigError, match="unknown catalog format"):
        load_catalog(bad, format="nope")
    assert "mcp-bench" in FORMATS


def test_captured_tools_list_keeps_its_bytes(tmp_path: Path) -> None:
    text = (
        '{"tools": [{"name": "b", "inputSchema": {"type": "object", "properties": {}}, "description": "x"}]}'
    )
    path = tmp_path / "echo.tools.json"
    path.write_text(text)
    server = load_catalog(path).server("echo")
    assert server.tools_list_bytes() == text.encode()


def test_captured_tools_list_keeps_exact_bytes_and_envelopes(tmp_path: Path) -> None:
    body = (
        b'{"tools":[{"name":"get","description":"G\\u00e9t","inputSchema":{"type":"object"},'
        b'"annotations":{"readOnlyHint":true}}]}'
    )
    f = tmp_path / "weather.tools.json"
    f.write_bytes(body + b"\n")
    server = load_catalog(f).server("weather")
    assert server.tools_list_bytes() == body
    assert server.tools[0].wire["annotations"] == {"readOnlyHint": True}
    envelope = tmp_path / "wiki.json"
    envelope.write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "result": json.loads(body)}))
    assert load_catalog(envelope).server("wiki").tools_list_result() == json.loads(body)
