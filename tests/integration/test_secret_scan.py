"""Secrets never reach a file (issue 23, item 12): planted in free text through a ``promcp record`` session (LLM
proxy and MCP proxy), ``promcp proxy mcp`` and ``promcp import``, and as an API key, an ``authorization`` header, a
cookie and an MCP server's environment secret in the ``record`` session, in each content mode (tests/secret_scan.py);
then every file written is read back and searched for the planted literals and with detect-secrets' detectors.
``redacted`` and ``none``: none anywhere; ``full``: the content files keep the texts verbatim (what ``full`` means),
the event files (previews) still hold none; the credentials are in no file in any mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.secret_scan import (
    EVERYTHING,
    MODES,
    record_import,
    record_proxy,
    record_session,
    scan,
    wait_merged,
)

pytestmark = pytest.mark.servers


@pytest.mark.parametrize("mode", MODES)
def test_no_planted_secret_in_any_file_written(mode: str, tmp_path: Path) -> None:
    if not EVERYTHING.exists():
        pytest.skip("mcp-server-everything is not installed (run `make install`)")
    out = tmp_path / "ds"
    record_session(out, mode, tmp_path)
    record_proxy(out, mode)
    record_import(out, mode, tmp_path)
    wait_merged(out)
    found = scan(out)
    assert any(f.endswith("events.parquet") for f in found["files"]), found["files"]
    assert any(f"run_id=record-{mode}" in f for f in found["files"]), found["files"]
    assert found["events"] == [] and found["credentials"] == [] and found["detect-secrets"] == [], found
    if mode == "full":
        assert "password" in found["content"]  # verbatim, as asked
    else:
        assert found["content"] == [], found
