"""Acknowledged means written (issue 23, item 1): a real ``promcp collect`` killed with SIGKILL under load from
OTLP senders, started again with the same command, then ``promcp finalize``: every batch it answered 200 is in the
dataset — the prompts it still held in memory at the kill included (tests/collect_kill.py). Without a restart,
``promcp finalize`` replays the spool instead."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.collect_kill import kept, kill_and_restart


def test_every_batch_answered_200_survives_sigkill_and_restart(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    result = kill_and_restart(out, seconds=2.0)
    assert result["restart rc"] == 0, result["restart stderr"]
    assert result["finalize"].returncode == 0, result["finalize"].stderr
    assert result["spooled at kill"], "nothing was spooled at the kill: the load did not reach the collector"
    assert "replayed" in result["restart stderr"], result["restart stderr"]
    figures = kept(out, result)
    assert figures["prompts 200"] > 20 and figures["traces 200"] > 2, figures
    assert figures["prompts kept"] == figures["prompts 200"], figures
    assert figures["traces kept"] == figures["traces 200"], figures
    assert not list((out / "_spool").glob("*.spool"))  # replayed, recorded, removed


def test_finalize_replays_what_a_killed_collector_acknowledged(tmp_path: Path) -> None:
    """No collector started again: ``promcp finalize`` records the spool the killed one left."""
    out = tmp_path / "ds"
    result = kill_and_restart(out, seconds=1.5, restart=False)
    assert result["spooled at kill"]
    assert result["finalize"].returncode == 0, result["finalize"].stderr
    assert "replayed" in result["finalize"].stderr and "finalized" in result["finalize"].stdout, result[
        "finalize"
    ]
    figures = kept(out, result)
    assert figures["prompts 200"] > 10 and figures["prompts kept"] == figures["prompts 200"], figures
    assert figures["traces kept"] == figures["traces 200"], figures
    assert not list((out / "_spool").glob("*.spool"))


def test_a_batch_the_spool_cannot_take_is_not_acknowledged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Disk full, read-only, or (here) the spool folder's name taken by a file: 503, said once, and nothing queued."""
    import httpx2 as httpx

    from promcp.collect import Collector
    from tests.integration.test_collect import _request

    (tmp_path / "_spool").write_text("in the way")
    caplog.set_level(logging.INFO, logger="promcp")
    col = Collector(tmp_path, port=0).start()
    url = "http://{}:{}/v1/logs".format(*col.address)
    try:
        for _ in range(2):
            got = httpx.post(url, content=_request(1), headers={"content-type": "application/x-protobuf"})
            assert got.status_code == 503 and got.headers["retry-after"] == "1"
    finally:
        stats = col.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "promcp.collect"]
    assert sum("cannot write the spool" in line for line in said) == 1, said
    assert stats.requests == {} and stats.records == 0 and stats.rejected == {503: 2}


def test_what_a_stopped_worker_could_not_record_is_recorded_by_the_next_collector(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recording worker dies (the dataset's ``_journal`` is a file, found when the held prompts are journaled at
    stop): the batches it had acknowledged stay in the spool; once the folder is fixed, the next collector on it
    records them."""
    import httpx2 as httpx

    import promcp.analysis as pa
    from promcp.collect import Collector
    from tests.integration.test_collect import _request

    (tmp_path / "_journal").write_text("not a folder")
    caplog.set_level(logging.INFO, logger="promcp")
    col = Collector(tmp_path, port=0).start()
    url = "http://{}:{}/v1/logs".format(*col.address)
    proto = {"content-type": "application/x-protobuf"}
    acknowledged = []
    try:
        for n in range(5):  # prompts held open: journaled (and failing) when the collector stops
            if httpx.post(url, content=_request(1, f"w{n}"), headers=proto).status_code == 200:
                acknowledged.append(f"w{n}")
    finally:
        stats = col.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "promcp.collect"]
    assert col.stopped is not None and stats.lost >= 1 and len(acknowledged) >= 2, (stats, said)
    assert any("kept in the spool" in line for line in said), said
    (tmp_path / "_journal").unlink()
    again = Collector(tmp_path, port=0).start()
    again.wait_replayed(30)
    stats = again.stop()
    assert stats.replayed == len(acknowledged), (stats, said)
    tasks = {str(t).split(":")[0] for t in pa.load(tmp_path)["task_id"].unique()}
    assert tasks == set(acknowledged)
