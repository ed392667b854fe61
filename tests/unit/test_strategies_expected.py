"""Expected-tool accuracy of a strategy run is scored on the tasks the run ran, not on every task of the benchmark."""

from __future__ import annotations

import pandas as pd

from promcp.analysis.strategies import _expected_hits


def test_a_run_of_some_tasks_is_scored_on_those_tasks() -> None:
    events = pd.DataFrame(
        {
            "run_id": ["full-16", "full-16", "topk-2", "topk-2"],
            "task_id": ["fs-read", "git-status", "fs-read", "git-status"],
            "stage": ["S3", "S1", "S3", "S3"],
            "server": ["filesystem", None, "filesystem", "git"],
            "tool": ["read_text_file", None, "read_text_file", "git_show"],
            "attrs": [{}, {}, {}, {}],
        }
    )
    expected = {
        "fs-read": ["filesystem:read_text_file"],
        "git-status": ["git:git_status"],
        "calc-mul": ["scicalc:calculate"],  # in the benchmark, run by neither
    }
    assert _expected_hits(events, expected) == {
        ("full-16", "fs-read"): True,
        ("full-16", "git-status"): False,
        ("topk-2", "fs-read"): True,
        ("topk-2", "git-status"): False,
    }
