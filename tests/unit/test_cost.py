"""Cache columns and cost (analysis/cost.py): hand-computed prices, the price file, calls without a price, and the
report's cost and cache sections on real Claude Code exports."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import promcp.analysis as pa
from promcp.analysis.cost import PRICE_TABLE, Rates, call_costs, load_prices
from promcp.analysis.report import report
from promcp.collectors import import_path
from promcp.errors import ConfigError
from tests.conftest import SHARED_DATA

SONNET = (
    "claude-sonnet-4-5"  # Anthropic's list price: $3 input, $15 output, $0.30 cache read, $3.75 / $6 writes
)


def _call(
    topology: str, model: str | None, tokens_in: int, read: int | None, write: int | None, **more: int
) -> list[dict]:
    base = {
        "run_id": "r",
        "task_id": "t",
        "round": 1,
        "topology": topology,
        "model": model,
        "provider": "anthropic",
    }
    s1 = {**base, "stage": "S1", "tokens_in": tokens_in, "tokens_out": None, "cache_read_tokens": read,
          "cache_write_tokens": write, "cache_write_1h_tokens": more.get("write_1h")}  # fmt: skip
    s2 = {**base, "stage": "S6", "tokens_in": None, "tokens_out": more.get("out", 100)}
    return [s1, s2]


def _costs(rows: list[dict], prices: dict[str, Rates] | None = None) -> pd.DataFrame:
    return call_costs(pd.DataFrame(rows), prices)


def test_each_kind_of_input_token_is_priced_at_its_rate() -> None:
    # 1,000 uncached + 8,000 cache reads + 1,000 cache writes (5-minute), 100 output tokens
    [row] = _costs(_call("c-cust", SONNET, 10_000, 8_000, 1_000)).to_dict("records")
    assert row["input_usd"] == pytest.approx(1_000 * 3e-6 + 8_000 * 0.30e-6 + 1_000 * 3.75e-6)
    assert row["output_usd"] == pytest.approx(100 * 15e-6)
    assert row["total_usd"] == pytest.approx(row["input_usd"] + row["output_usd"])
    assert row["priced_by"] == PRICE_TABLE and row["reason"] is None
    # the same writes held for an hour cost 2× input instead of 1.25×
    [hour] = _costs(_call("c-cust", SONNET, 10_000, 8_000, 1_000, write_1h=1_000)).to_dict("records")
    assert hour["input_usd"] == pytest.approx(1_000 * 3e-6 + 8_000 * 0.30e-6 + 1_000 * 6e-6)
    # no cache use at all: plain input
    [plain] = _costs(_call("c-cust", SONNET, 2_000, 0, 0, out=0)).to_dict("records")
    assert plain["input_usd"] == pytest.approx(2_000 * 3e-6) and plain["output_usd"] == 0


def test_a_prompt_over_200k_tokens_is_priced_at_the_long_context_tier() -> None:
    # Sonnet 4.5 above 200k input tokens: $6 input, $0.60 cache read, $22.50 output per million (the whole call)
    [row] = _costs(_call("c-ots", SONNET, 300_000, 200_000, 0, out=1_000)).to_dict("records")
    assert row["input_usd"] == pytest.approx(100_000 * 6e-6 + 200_000 * 0.60e-6)
    assert row["output_usd"] == pytest.approx(1_000 * 22.5e-6)
    [short] = _costs(_call("c-ots", SONNET, 100_000, 0, 0, out=1_000)).to_dict("records")
    assert short["input_usd"] == pytest.approx(100_000 * 3e-6) and short["output_usd"] == pytest.approx(0.015)


def test_calls_without_a_price_are_null_with_the_reason() -> None:
    rows = [
        *_call("l-cust", "SmolLM2-135M-Instruct.Q4_1.gguf", 500, None, None),
        *[{**r, "task_id": "u"} for r in _call("c-cust", "no-such-model-xyz", 500, 0, 0)],
        *[{**r, "task_id": "v"} for r in _call("c-ots", SONNET, 500, None, None)],
    ]
    costs = _costs(rows).set_index("task_id")
    assert costs["total_usd"].isna().all()  # null, never 0
    assert costs.at["t", "reason"] == "local model: no price per token"
    assert "no price for model 'no-such-model-xyz'" in costs.at["u", "reason"]
    assert costs.at["v", "reason"] == "no provider usage (cache split unknown)"


def test_a_price_file_overrides_the_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {SONNET: {"input": 1.0, "output": 2.0, "cache_read": 0.5}, "mine": {"input": 4, "output": 8}}
        )
    )
    prices = load_prices(path)
    assert prices["mine"] == Rates(4.0, 8.0)
    [row] = _costs(_call("c-cust", SONNET, 3_000, 1_000, 1_000), prices).to_dict("records")
    # cache writes default to the input rate when the file gives none
    assert row["input_usd"] == pytest.approx((1_000 * 1.0 + 1_000 * 0.5 + 1_000 * 1.0) * 1e-6)
    assert row["output_usd"] == pytest.approx(100 * 2.0e-6) and row["priced_by"] == "price file"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "JSON object of model names"),
        ('{"m": {"input": 1}}', "missing 'output'"),
        ('{"m": {"input": -1, "output": 1}}', "input must be a number"),
        ('{"m": {"input": 1, "output": 1, "batch": 2}}', "unknown rate 'batch'"),
    ],
)
def test_bad_price_files_name_file_and_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        load_prices(path)
    assert "p.json" in str(err.value)


CLAUDE_CODE = sorted((SHARED_DATA / "exports").glob("claude-code-*.jsonl"))


@pytest.mark.skipif(not CLAUDE_CODE, reason="../shared/data/exports is not beside the repository")
def test_claude_code_exports_cache_columns_equal_the_usage_and_are_priced(tmp_path: Path) -> None:
    for export in CLAUDE_CODE:
        import_path(export, tmp_path)
    df = pa.load(tmp_path)
    inputs = df[df["stage"].isin(["S1", "S5"])]
    assert len(inputs) and inputs["cache_read_tokens"].notna().all()
    for _, row in inputs.iterrows():  # each column is the provider's own field, as reported
        usage = json.loads(row["attrs"])["usage"]
        assert row["cache_read_tokens"] == usage.get("cache_read_input_tokens", 0)
        assert row["cache_write_tokens"] == usage.get("cache_creation_input_tokens", 0)
        assert (
            row["tokens_in"] == usage["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
        )
    rep = report(tmp_path)  # cost and cache are shown by default when there is a cache split
    assert {"cost", "cache"} <= set(rep.tables)
    cache = rep.tables["cache"]
    assert int(cache["cache_read"].sum()) == int(inputs["cache_read_tokens"].sum())
    costs = call_costs(df)
    assert costs["total_usd"].notna().all() and (costs["total_usd"] > 0).all()
    assert any(PRICE_TABLE in n for n in rep.table_notes["cost"])


def test_the_clients_own_cost_is_shown_beside_promcps(tmp_path: Path) -> None:
    """Claude Code writes ``costUSD`` on assistant lines in some versions: the importer keeps it (the largest per
    message, like the usage) and the cost table's note puts promcp's price beside it."""
    src = Path(__file__).parent.parent / "fixtures" / "exports" / "claude-code-project" / "sess1.jsonl"
    lines = []
    for raw in src.read_text().splitlines():
        line = json.loads(raw)
        if line.get("type") == "assistant":
            line["costUSD"] = 0.01
        lines.append(json.dumps(line))
    session = tmp_path / "sess.jsonl"
    session.write_text("\n".join(lines) + "\n")
    import_path(session, tmp_path / "ds")
    df = pa.load(tmp_path / "ds")
    outputs = df[df["stage"].isin(["S2", "S6"])]
    client = [json.loads(a).get("client_cost_usd") for a in outputs["attrs"]]
    assert client and all(c == 0.01 for c in client)
    rep = report(tmp_path / "ds", sections=["cost"], include_incomplete=True)
    [note] = [n for n in rep.table_notes["cost"] if "the client reported" in n]
    assert f"${0.01 * len(client):,.4f} for {len(client)} of these call(s)" in note and "difference $" in note
