"""The footprint's counting and gate on a listing built in the test (no server): per-tool tokens equal the INIT
builder's counts, the strategies come from the what-if module, and budget / baseline / tolerance decide as
documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promcp import tokenizers
from promcp.errors import ConfigError
from promcp.footprint import Listing, Tolerance, footprint_of, judge, read_baseline
from promcp.wire.mcp import tool_text_of

SHARED = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "description": "Street and number"},
        "city": {"type": "string", "description": "City name, in full"},
    },
}
TOOLS = [
    {
        "name": "ship",
        "title": "Ship",
        "description": "Ship a parcel to an address.",
        "inputSchema": {
            "type": "object",
            "properties": {"to": SHARED, "weight": {"type": "number", "default": 1}},
        },
    },
    {
        "name": "bill",
        "description": "Send the bill to an address.",
        "inputSchema": {"type": "object", "properties": {"to": SHARED}},
        "annotations": {"readOnlyHint": False},
    },
]


def _fp(tools: list[dict[str, object]] = TOOLS) -> object:
    return footprint_of(
        Listing(tools=tools, events=[], wall_ms=1.0), ["o200k_base", "cl100k_base"], server="s"
    )


def test_counts_follow_the_init_rule_and_the_strategies() -> None:
    fp = _fp()
    tok = tokenizers.get("o200k_base")
    assert fp.total("o200k_base") == sum(tok.count(tool_text_of(t)[1]) for t in TOOLS)
    assert fp.tools[0].listed_bytes > fp.tools[0].bytes  # title, default… are listed, not rendered
    by = {(s.strategy, s.tokenizer): s for s in fp.strategies}
    assert by[("slim", "o200k_base")].saving > 0  # the default keyword goes
    assert (
        by[("dedup", "o200k_base")].tokens + by[("dedup", "o200k_base")].saving
        == by[("full", "o200k_base")].tokens
    )
    assert fp.fields[0].tokens >= fp.fields[-1].tokens and {f.field for f in fp.fields} >= {
        "description",
        "parameters.to",
    }


@pytest.mark.parametrize(
    ("text", "base", "allowed"), [("5%", 1000, 50.0), ("200", 1000, 200.0), ("0", 10, 0.0)]
)
def test_tolerance(text: str, base: int, allowed: float) -> None:
    assert Tolerance.parse(text).allowed(base) == allowed


@pytest.mark.parametrize("text", ["five", "-3", "%"])
def test_bad_tolerance(text: str) -> None:
    with pytest.raises(ConfigError, match="tolerance"):
        Tolerance.parse(text)


def test_budget_and_baseline(tmp_path: Path) -> None:
    fp = _fp()
    total = fp.total("o200k_base")
    assert judge(fp, budget=total).passed and not judge(fp, budget=total - 1).passed
    saved = tmp_path / "base.json"
    only_ship = _fp(TOOLS[:1])
    saved.write_text(
        json.dumps(
            {
                "totals": {"o200k_base": only_ship.total("o200k_base")},
                "tables": {
                    "tools": [
                        {
                            "tool": "ship",
                            "tokenizer": "o200k_base",
                            "tokens": only_ship.tools[0].tokens["o200k_base"],
                        }
                    ]
                },
            }
        )
    )
    verdict = judge(fp, baseline=read_baseline(saved))
    assert not verdict.passed and "regression" in verdict.failures[0]
    assert [c["status"] for c in verdict.changes if c["tool"] == "bill"] == ["added"]
    assert judge(fp, baseline=read_baseline(saved), tolerance=Tolerance.parse("100%")).passed
    saved.write_text(json.dumps({"totals": {"gguf:x.gguf": 5}}))
    assert "same --tokenizers" in judge(fp, baseline=read_baseline(saved)).failures[0]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[1]", "not a `promcp footprint"),
        ("{", "is not JSON"),
        ('{"totals": {"a": "x"}}', "not a `promcp footprint"),
    ],
)
def test_bad_baselines(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=words):
        read_baseline(path)
    with pytest.raises(ConfigError, match="cannot read"):
        read_baseline(tmp_path / "missing.json")
