"""promcp/proxy/mcp/handoff.py: the detached helper journals every event of a hand-off it can build; one that cannot
be built is said and skipped, never the rest with it (a bad S3 took every later call of a ``record`` run with it)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from promcp.events import Event, Stage
from promcp.proxy.mcp.handoff import finish
from promcp.store.parts import parts_dir


class _Build:
    """A picklable stand-in for an observer's Deferred: builds one S3 event, or raises."""

    def __init__(self, n: int, broken: bool = False) -> None:
        self.n, self.broken = n, broken
        self.put_text = None

    def __call__(self) -> Event:
        if self.broken:
            raise ValueError("t_end_ns is before t_start_ns")
        return Event(stage=Stage.S3, t_start_ns=self.n, t_end_ns=self.n, tool="echo", jsonrpc_id=str(self.n))


def test_one_event_that_cannot_be_built_does_not_take_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promcp.analysis import load

    folder = parts_dir(tmp_path, "r1")
    folder.mkdir(parents=True)
    path = folder / f".handoff-{os.getpid()}-test.pkl"
    items = [(1, _Build(1)), (2, _Build(2, broken=True)), (3, _Build(3))]
    payload = {"out": str(tmp_path), "run_id": "r1", "topology": "c-ots", "source": "proxy:mcp",
               "part": "proxy-late", "content": "redacted", "max_content_bytes": None, "items": items}  # fmt: skip
    path.write_bytes(pickle.dumps(payload))
    finish(path)
    assert not path.exists()
    assert sorted(load(tmp_path)["jsonrpc_id"]) == ["1", "3"]
    assert "seq 2: ValueError: t_end_ns is before t_start_ns" in capsys.readouterr().err
