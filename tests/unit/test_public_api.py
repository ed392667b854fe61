"""``import promcp`` exposes exactly what a user calls, lazily: nothing else shows in ``dir(promcp)`` and the
instrumentation is imported only when first used (``promcp.flush()`` works without importing ``promcp.shims``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import promcp

REPO = Path(__file__).resolve().parents[2]
PUBLIC = [
    "Recorder",
    "__version__",
    "flush",
    "instrument",
    "record_chat",
    "record_session",
    "scope",
    "uninstrument",
    "wrap_anthropic",
    "wrap_chat",
    "wrap_openai",
]


def test_dir_is_the_public_api() -> None:
    assert dir(promcp) == PUBLIC == sorted(promcp.__all__)
    for name in PUBLIC[2:]:
        assert callable(getattr(promcp, name)), name
    assert isinstance(promcp.Recorder, type) and isinstance(promcp.__version__, str)
    assert not hasattr(promcp, "Any") and not hasattr(promcp, "TYPE_CHECKING")


def test_import_is_cheap_and_flush_works_without_importing_the_shims() -> None:
    code = (
        "import sys, promcp\n"
        "assert 'promcp.shims' not in sys.modules, 'import promcp loaded the instrumentation'\n"
        "promcp.flush()\n"  # nothing recorded yet: a no-op, but it must resolve
        "assert 'promcp.shims' in sys.modules\n"
        "from promcp.shims import flush\n"
        "assert promcp.flush is flush\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
