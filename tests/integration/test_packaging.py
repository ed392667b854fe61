"""Build the wheel, install it into a fresh virtual environment, and import the installed names."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (whl,) = out.glob("promcp-*.whl")
    return whl


def test_wheel_holds_only_promcp_packages(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert top == {"promcp"}, f"unexpected top-level entries in the wheel: {sorted(top)}"
    assert "promcp/analysis/tables.py" in names
    assert "promcp/collectors/__init__.py" in names
    assert "promcp/py.typed" in names
    # the HTML pages' style sheets and the report page's script are package data, read at run time
    assert {
        "promcp/analysis/views/document.css",
        "promcp/analysis/views/html/page.css",
        "promcp/analysis/views/html/page.js",
    } <= set(names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "promcp = promcp.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_imports_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
    )
    # dependencies come from the test environment's site-packages, appended after the fresh venv's own (a .pth
    # line is not a site directory, so the editable install of the checkout is NOT activated there)
    fresh_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(fresh_site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = (
        "import importlib.util, promcp, promcp.analysis, promcp.collectors, promcp.cli;"
        "assert importlib.util.find_spec('analysis') is None, 'bare analysis module installed';"
        "assert importlib.util.find_spec('collectors') is None, 'bare collectors module installed';"
        "print(promcp.__file__); print(promcp.analysis.__file__); print(promcp.__version__)"
    )
    out = subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path)
    paths = out.stdout.split()
    assert all(p.startswith(str(env_dir)) for p in paths[:2]), paths
    cli = subprocess.run(
        [str(env_dir / "bin" / "promcp"), "--version"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert cli.stdout.strip() == f"promcp {paths[2]}"
