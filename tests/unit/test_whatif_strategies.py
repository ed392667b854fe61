"""Unit tests of the what-if strategies: each a pure function over plain tool dicts."""

from __future__ import annotations

import copy
import json

from promcp.analysis.whatif import strategies as st
from promcp.strategies.schema import (
    SLIM_SCHEMA_KEYWORDS,
    dedup_tools,
    slim_tool,
    tool_summary,
    wire_tool,
)

ADDR = {
    "type": "object",
    "description": "A postal address with street, city, postcode and country fields",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "country": {"type": "string"}},
}


def tool(name: str, desc: str, props: dict | None = None, **extra: object) -> dict:
    return {
        "name": name,
        "description": desc,
        "inputSchema": {"type": "object", "properties": props or {"q": {"type": "string"}}},
        **extra,
    }


TOOLS = [
    tool("ship", "Ship a parcel to an address", {"to": ADDR, "weight": {"type": "number"}}, server="post"),
    tool("bill", "Send an invoice to an address", {"to": ADDR}, server="post"),
    tool("weather", "Current weather for a city", {"city": {"type": "string"}}, server="wx"),
]


def test_full_sends_every_tool_as_listed() -> None:
    p = st.full(TOOLS)
    assert len(p.texts) == 3
    assert json.loads(p.texts[0])["name"] == "ship"
    assert "server" not in json.loads(p.texts[0])  # catalog bookkeeping is not sent
    assert p.visible == {"post/ship", "post/bill", "wx/weather"}
    assert p.tokens(len) == sum(len(t) for t in p.texts)


def test_slim_drops_only_listed_keywords_not_property_names() -> None:
    raw = tool(
        "t",
        "d",
        {
            "title": {"type": "string", "title": "Title", "default": "x"},
            "n": {"type": "integer", "examples": [1]},
        },
        title="T",
        outputSchema={"type": "object"},
        annotations={"readOnlyHint": True},
    )
    raw["inputSchema"] |= {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "additionalProperties": False,
    }
    before = copy.deepcopy(raw)
    slim = slim_tool(raw)
    assert raw == before  # pure
    assert set(slim) == {"name", "description", "inputSchema"}
    schema = slim["inputSchema"]
    assert "$schema" not in schema and "additionalProperties" not in schema
    assert schema["properties"]["title"] == {"type": "string"}  # the property named title stays
    assert schema["properties"]["n"] == {"type": "integer"}
    assert "default" in SLIM_SCHEMA_KEYWORDS
    p = st.slim([raw])
    assert p.tokens(len) < st.full([raw]).tokens(len)


def test_slim_keeps_additional_properties_when_it_is_a_schema() -> None:
    raw = tool("t", "d")
    raw["inputSchema"]["additionalProperties"] = {"type": "string"}
    assert slim_tool(raw)["inputSchema"]["additionalProperties"] == {"type": "string"}


def test_dedup_replaces_repeated_subschema_and_counts_definitions() -> None:
    rewritten, defs = dedup_tools(TOOLS)
    assert list(defs["$defs"].values()) == [ADDR]
    assert rewritten[0]["inputSchema"]["properties"]["to"] == {"$ref": "#/$defs/d0"}
    assert rewritten[1]["inputSchema"]["properties"]["to"] == {"$ref": "#/$defs/d0"}
    assert rewritten[2] == wire_tool(TOOLS[2])
    p = st.dedup(TOOLS)
    assert len(p.texts) == 4  # three tools + the $defs block
    assert p.tokens(len) < st.full(TOOLS).tokens(len)


def test_dedup_leaves_unique_or_small_subschemas_alone() -> None:
    rewritten, defs = dedup_tools([TOOLS[0], TOOLS[2]])
    assert defs == {}
    assert rewritten == [wire_tool(TOOLS[0]), wire_tool(TOOLS[2])]


def test_topk_keeps_k_best_ranked() -> None:
    p = st.topk(TOOLS, [2, 0, 1], 2)
    assert p.visible == {"wx/weather", "post/ship"}
    assert [json.loads(t)["name"] for t in p.texts] == ["weather", "ship"]


def test_search_tool_counts_definition_call_and_results() -> None:
    p = st.search_tool(TOOLS, [1, 0, 2], "invoice", 1)
    assert json.loads(p.texts[0])["name"] == "search_tools"
    assert json.loads(p.texts[1]) == {"name": "search_tools", "arguments": {"query": "invoice", "limit": 1}}
    assert [t["name"] for t in json.loads(p.texts[2])] == ["bill"]
    assert p.visible == {"post/bill"}


def test_two_phase_pool_lists_every_tool_but_only_promotes_k() -> None:
    p = st.two_phase(TOOLS, [0, 1, 2], 1)
    pool = p.texts[0].splitlines()
    assert pool == [
        "ship: Ship a parcel to an address",
        "bill: Send an invoice to an address",
        "weather: Current weather for a city",
    ]
    assert p.visible == {"post/ship"}
    assert len(p.texts) == 2


def test_tool_summary_prefers_catalog_summary_then_first_sentence() -> None:
    assert (
        tool_summary({"summary": "Short.", "full_schema": {"name": "x", "description": "Long. More."}})
        == "Short."
    )
    assert tool_summary({"name": "x", "description": "Reads a file. Use it for text."}) == "Reads a file."
    assert len(tool_summary({"name": "x", "description": "y" * 500})) == 120


def test_result_fields_keeps_only_used_json_leaves() -> None:
    result = json.dumps({"id": 4711, "name": "Alice Smith", "bio": "long text " * 20, "tags": ["a1", "b2"]})
    reduced = st.result_fields(result, ["The user is Alice Smith (id 4711)."])
    assert json.loads(reduced) == {"id": 4711, "name": "Alice Smith"}
    assert st.result_fields(result, ["nothing relevant"]) == ""


def test_result_fields_plain_text_keeps_used_lines() -> None:
    text = "header line\nTemperature: 21C in Paris\nunrelated footer"
    assert st.result_fields(text, ["It is 21C in Paris"]) == "Temperature: 21C in Paris"
