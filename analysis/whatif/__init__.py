"""promcp.analysis.whatif — what the tools tax would be under another schema or routing strategy.

>>> from promcp import tokenizers
>>> from promcp.analysis import whatif
>>> tools = whatif.load_tools("../shared/data/catalogs/tool-rot")
>>> queries = whatif.read_queries("../shared/data/catalogs/tool-rot/fixtures/benchmark_queries.jsonl")
>>> res = whatif.evaluate_catalog(tools, queries, tokenizers.get("cl100k_base").count, k=3)
>>> whatif.summarize(whatif.turns_frame(res))

Strategies are small pure functions in :mod:`promcp.analysis.whatif.strategies`; docs/whatif.md says exactly
what each one sends and how it is counted.
"""

from __future__ import annotations

import pandas as pd

from promcp.analysis.whatif import strategies
from promcp.analysis.whatif._catalog_eval import (
    CATALOG_STRATEGIES,
    CatalogResult,
    Query,
    TurnCost,
    evaluate_catalog,
)
from promcp.analysis.whatif._dataset_eval import (
    DATASET_STRATEGIES,
    DatasetResult,
    evaluate_dataset,
    skipped_note,
)
from promcp.analysis.whatif._fixtures import load_tools, query_file
from promcp.analysis.whatif._queries import read_queries
from promcp.analysis.whatif._result import (
    RESULT_FILE,
    SCALING_COLUMNS,
    WhatifResult,
    counter,
    read_result,
    whatif_dataset,
)
from promcp.analysis.whatif._scaling import plot_scaling, scaling, union_tools
from promcp.analysis.whatif._summary import SUMMARY_COLUMNS, summarize
from promcp.analysis.whatif.strategies import STRATEGIES, Payload
from promcp.strategies.routing import SCORERS, Bm25Index, Router, embedding_model
from promcp.strategies.schema import (
    SLIM_SCHEMA_KEYWORDS,
    SLIM_TOOL_KEYS,
    dedup_tools,
    slim_tool,
    tool_summary,
    wire_tool,
)


def turns_frame(result: CatalogResult) -> pd.DataFrame:
    """The per-(query, strategy) rows of a catalog evaluation as a DataFrame."""
    return pd.DataFrame([t.__dict__ for t in result.turns])


__all__ = [
    "CATALOG_STRATEGIES",
    "DATASET_STRATEGIES",
    "RESULT_FILE",
    "SCALING_COLUMNS",
    "SCORERS",
    "SLIM_SCHEMA_KEYWORDS",
    "SLIM_TOOL_KEYS",
    "STRATEGIES",
    "SUMMARY_COLUMNS",
    "Bm25Index",
    "CatalogResult",
    "DatasetResult",
    "Payload",
    "Query",
    "Router",
    "TurnCost",
    "WhatifResult",
    "counter",
    "dedup_tools",
    "embedding_model",
    "evaluate_catalog",
    "evaluate_dataset",
    "load_tools",
    "plot_scaling",
    "query_file",
    "read_queries",
    "read_result",
    "scaling",
    "skipped_note",
    "slim_tool",
    "strategies",
    "summarize",
    "tool_summary",
    "turns_frame",
    "union_tools",
    "whatif_dataset",
    "wire_tool",
]
