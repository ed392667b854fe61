"""DNS-rebinding protection through ``promcp proxy mcp --upstream`` (issue 23, item 11), against a real mcp SDK server
that protects itself (``tests/fault_servers/faulty.py`` on 127.0.0.1: the SDK's ``TransportSecuritySettings``, 421 for
a foreign ``Host``, 403 for a foreign ``Origin``): the proxy refuses a foreign ``Host`` or ``Origin`` itself (403,
one log line), relays loopback ones, and never turns a ``Host`` it was told to allow into the one the server
trusts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.integration.test_proxy_mcp_http import (
    ACCEPT,
    PROMCP,
    faulty,
    free_port,
    outcome,
    wait_port,
)
from tests.stubs.mcp_messages import INIT

pytestmark = pytest.mark.servers


def post(url: str, **headers: str) -> httpx.Response:
    with httpx.Client(timeout=30) as client:
        return client.post(url, json=INIT, headers={**ACCEPT, **headers})


def test_foreign_host_and_origin_refused_and_the_servers_own_check_kept(tmp_path: Path) -> None:
    from promcp.proxy.mcp.http import McpHttpProxy

    up, port = free_port(), free_port()
    with faulty("plain", up, tmp_path):
        upstream = f"http://127.0.0.1:{up}/mcp"
        assert post(upstream, host="evil.example").status_code == 421  # the server's own check, directly
        assert post(upstream, origin="http://evil.example").status_code == 403

        log = (tmp_path / "proxy.log").open("wb")
        cmd = [*PROMCP, "proxy", "mcp", "--upstream", upstream, "--out", str(tmp_path / "ds")]
        proxy = subprocess.Popen([*cmd, "--listen", f"127.0.0.1:{port}"], stderr=log)
        try:
            wait_port(port, proxy)
            url = f"http://127.0.0.1:{port}/mcp"
            refused = post(url, host="evil.example")
            assert refused.status_code == 403 and "not a loopback name" in refused.text
            for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example:80"):
                got = post(url, origin=origin)
                assert got.status_code == 403 and "not a loopback origin" in got.text, origin
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
                assert post(url, host=host, origin=f"http://localhost:{port}").status_code == 200, host
            assert outcome(url, [("lookup", {"key": "k"})]) == "ok:value of k"  # a real client session
        finally:
            proxy.terminate()
            proxy.wait(60)
            log.close()
        lines = (tmp_path / "proxy.log").read_text().splitlines()
        refusals = [line for line in lines if "refused" in line]
        assert len(refusals) == 4 and "Traceback" not in "\n".join(lines)  # one line per refused request
        assert all("(403)" in line for line in refusals) and "evil.example" in refusals[0]

        # the user allows one more name: it is relayed as it is, and the server refuses it as it would directly
        allowed = McpHttpProxy(
            upstream,
            out=tmp_path / "ds2",
            allow_hosts=["evil.example"],
            allow_origins=["http://evil.example"],
        )
        with allowed:
            assert (
                post(allowed.url, host="evil.example").status_code == 421
            )  # not laundered into the server's name
            got = post(allowed.url, origin="http://evil.example")
            assert got.status_code == 403 and "Invalid Origin" in got.text  # the server's own answer
            assert post(allowed.url, host="localhost").status_code == 200
        # '*' admits any origin (the server still judges it) but not any host
        with McpHttpProxy(upstream, out=tmp_path / "ds3", allow_origins=["*"]) as star:
            assert "Invalid Origin" in post(star.url, origin="https://app.example").text
            refused = post(star.url, host="evil.example")
            assert refused.status_code == 403 and "promcp proxy" in refused.text
