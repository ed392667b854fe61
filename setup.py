"""Map the repository folders onto the installed package names.

`promcp/`, `collectors/` and `analysis/` sit side by side in the repository (the layout a newcomer reads), but they
install as `promcp`, `promcp.collectors` and `promcp.analysis`: no generic top-level `collectors` or `analysis` module
ever lands in site-packages. tests/integration/test_packaging.py builds the wheel and proves it.
"""

from setuptools import find_packages, setup

ROOTS = {"promcp": "promcp", "promcp.collectors": "collectors", "promcp.analysis": "analysis"}

packages: list[str] = []
package_dir: dict[str, str] = {}
for package, folder in ROOTS.items():
    package_dir[package] = folder
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
