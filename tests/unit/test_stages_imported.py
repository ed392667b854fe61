"""The import builders (promcp.stages.imported): the provider total against the export's context, a failed tool
result's one error type, and readers showing the legacy value of older datasets under today's name."""

from __future__ import annotations

import pandas as pd

from promcp import analysis, tokenizers
from promcp.events import Event, Origin, Part, Stage, Status, TimingQuality, TokenSource
from promcp.stages import (
    ImportContext,
    ImportedCall,
    ImportedToolUse,
    Interval,
    imported_input_event,
    imported_tool_events,
)
from promcp.wire import Usage

CTX = ImportContext(tokenizers.get("cl100k_base"), "anthropic")


def _input(total: int) -> Event:
    call = ImportedCall(usage=Usage(input_tokens=total, output_tokens=3, source=TokenSource.PROVIDER))
    parts = [Part(Origin.USER, "prompt", 10), Part(Origin.HISTORY, "msg:1", 30)]
    return imported_input_event(
        CTX, call, task_id="c#1", round=1, parts=parts, model="m", conversation="c", prompt_at=5
    )


def test_provider_total_above_the_export_is_unobserved_context_below_it_scales() -> None:
    above = _input(100)
    assert [(p.key, p.tokens) for p in above.parts or []] == [
        ("prompt", 10),
        ("msg:1", 30),
        ("unobserved", 60),
    ]
    assert above.tokens_in == 100 and above.attrs is not None and above.attrs["tokens_in_estimate"] == 40
    below = _input(20)
    assert [p.tokens for p in below.parts or []] == [5, 15] and below.attrs is not None
    assert below.attrs["origin_scale"] == 0.5
    # no prefill interval: the split is unknown, the input sits at the prompt without a latency
    assert (above.t_start_ns, above.latency_ms, above.timing_quality) == (5, None, TimingQuality.NONE)


def test_a_failed_tool_result_is_tool_error_with_the_exports_own_type_kept() -> None:
    use = ImportedToolUse(
        call_id="t1",
        name="x:y",
        tool="y",
        server="x",
        mcp=True,
        arguments="{}",
        result="denied",
        is_error=True,
        result_span=Interval(1, 3_000_001, TimingQuality.EXACT),
        attrs={"error_type": "PermissionDenied"},
    )
    s3, s4 = imported_tool_events(CTX, use, task_id="c#1", key="t1", round=1, model="m")
    assert (s3.stage, s4.stage, s4.status, s4.error_type) == (Stage.S3, Stage.S4, Status.ERROR, "tool_error")
    assert s4.attrs is not None and s4.attrs["error_type"] == "PermissionDenied" and s4.latency_ms == 3.0
    use.result = None
    _, lost = imported_tool_events(CTX, use, task_id="c#1", key="t1", round=1, model="m")
    assert (lost.status, lost.error_type) == (Status.CANCELLED, "no_result")


def test_readers_show_the_legacy_is_error_as_tool_error() -> None:
    old = Event(stage=Stage.S4, task_id="c#1", run_id="r", seq=0, status=Status.ERROR, error_type="is_error")
    errors = analysis.errors(pd.DataFrame([old.to_dict()]))
    assert errors["error_type"].tolist() == ["tool_error"]
