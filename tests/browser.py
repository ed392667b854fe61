"""Open a local page in the system's real headless Chromium (Debian package ``chromium``, installed by
``make browser``), driven by Playwright, with the network off: every request the page makes and every console
message are recorded so a test can assert there were none. Used by the HTML report test and benchmark.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
#: Flags that work as root in a container: no sandbox, no GPU, nothing that phones home.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def require_chromium() -> None:
    """Skip without the browser on a developer's machine; fail under CI, where ``make test`` installs it."""
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return
    message = f"{CHROMIUM} is missing: `make browser` installs the Debian package chromium"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class Session:
    page: Any
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [text for kind, text in self.console if kind in ("error", "pageerror")]


@contextlib.contextmanager
def open_page(path: Path, *, width: int = 1280, height: int = 900, scripts: bool = True) -> Iterator[Session]:
    """Load ``path`` from its ``file://`` URL in a fresh profile, offline; yield the page and what it did."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="promcp-chromium-") as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=list(FLAGS),
            viewport={"width": width, "height": height},
            java_script_enabled=scripts,
            offline=True,
        )
        try:
            session = Session(ctx.pages[0] if ctx.pages else ctx.new_page())

            def route(r: Any) -> None:  # anything but the page's own file is refused, and remembered
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    session.blocked.append(r.request.url)
                    r.abort()

            ctx.route("**/*", route)
            ctx.on("request", lambda req: session.requests.append(req.url))
            session.page.on("console", lambda m: session.console.append((m.type, m.text)))
            session.page.on("pageerror", lambda e: session.console.append(("pageerror", str(e))))
            session.page.goto(path.resolve().as_uri(), wait_until="load")
            yield session
        finally:
            ctx.close()


def embedded(page: Path, element_id: str = "promcp-data") -> Any:
    """The JSON a report page embeds in ``<script type="application/json" id=…>`` (read without a browser)."""
    import json
    import re

    text = page.read_text(encoding="utf-8")
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', text, re.S)
    assert m, f"no #{element_id} in {page}"
    return json.loads(m.group(1))
