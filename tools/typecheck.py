"""Type-check the installed package layout with mypy (strict, as configured in pyproject.toml).

The repository keeps `collectors/` and `analysis/` beside `promcp/`, but they install as `promcp.collectors` and
`promcp.analysis`. mypy reads folders, not setup.py's package_dir, so this script builds a throw-away view of the
installed layout out of symlinks and checks `-p promcp` there. Extra arguments go to mypy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="promcp-typecheck-") as tmp:
        view = Path(tmp) / "promcp"
        view.mkdir()
        for entry in (ROOT / "promcp").iterdir():
            if entry.name not in ("__pycache__", "collectors", "analysis"):
                (view / entry.name).symlink_to(entry)
        (view / "collectors").symlink_to(ROOT / "collectors")
        (view / "analysis").symlink_to(ROOT / "analysis")
        env = {**os.environ, "MYPYPATH": tmp}
        cmd = [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "-p",
            "promcp",
            *sys.argv[1:],
        ]
        return subprocess.run(cmd, env=env, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
