from __future__ import annotations

import msgspec
import pytest

from promcp.events import (
    COLUMNS,
    Event,
    Origin,
    Part,
    Phase,
    Stage,
    TimingQuality,
    decode_event,
    encode_event,
)


def test_phase_and_direction_follow_the_stage() -> None:
    e = Event(stage=Stage.S4, footprint_tokens=10)
    assert e.phase is Phase.TOOL_RESULT
    assert e.direction is not None and e.direction.value == "server->client"
    assert Event(stage=Stage.S5, tokens_in=3).phase is Phase.CONTEXT


def test_init_needs_a_startup_phase() -> None:
    with pytest.raises(ValueError, match="INIT event needs a phase"):
        Event(stage=Stage.INIT)
    with pytest.raises(ValueError, match="does not belong to stage S3"):
        Event(stage=Stage.S3, phase=Phase.CONTEXT)


def test_parts_fill_origin_columns_and_input_total() -> None:
    e = Event(
        stage=Stage.S1,
        parts=[
            Part(Origin.SYSTEM, "system", 5),
            Part(Origin.SCHEMAS, "a/b", 7),
            Part(Origin.SCHEMAS, "a/c", 3),
            Part(Origin.USER, "prompt", 2),
        ],
    )
    assert (e.in_system, e.in_schemas, e.in_user, e.in_history, e.in_tool_results) == (5, 10, 2, 0, 0)
    assert e.tokens_in == 17
    assert e.tokens_total == 17


def test_origins_must_sum_to_input_tokens() -> None:
    with pytest.raises(ValueError, match="sum to 9, but tokens_in is 10"):
        Event(stage=Stage.S5, tokens_in=10, in_system=4, in_user=5)


@pytest.mark.parametrize("field", ["tokens_in", "tokens_out", "footprint_tokens", "footprint_bytes"])
def test_negative_counts_are_rejected(field: str) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        Event(stage=Stage.S3, **{field: -1})


def test_timing_consistency() -> None:
    with pytest.raises(ValueError, match="negative"):
        Event(stage=Stage.S3, latency_ms=-0.1)
    with pytest.raises(ValueError, match="timing_quality 'none'"):
        Event(stage=Stage.S3, latency_ms=1.0, timing_quality=TimingQuality.NONE)
    with pytest.raises(ValueError, match="before t_start_ns"):
        Event(stage=Stage.S3, t_start_ns=10, t_end_ns=5)


def test_json_round_trip_keeps_every_column() -> None:
    e = Event(
        stage=Stage.S1,
        run_id="r",
        task_id="t",
        round=1,
        parts=[Part(Origin.USER, "prompt", 4)],
        attrs={"x": [1, 2]},
        latency_ms=1.5,
        model="m",
    )
    back = decode_event(encode_event(e))
    assert back == e
    assert set(e.to_dict()) == set(COLUMNS)


def test_decode_rejects_wrong_types_naming_the_field() -> None:
    with pytest.raises(msgspec.ValidationError, match="tokens_in"):
        decode_event(b'{"stage":"S1","tokens_in":"many"}')
    with pytest.raises(msgspec.ValidationError):
        decode_event(b'{"stage":"S9"}')
