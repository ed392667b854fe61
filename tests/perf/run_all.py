"""Run every benchmark script in tests/perf/ one after the other (``make perf``); each prints its own table.

Benchmarks are scripts, not tests: they assert nothing and measure ratios within one run. Run them on a machine
that is otherwise idle; pass script names to run only some (``run_all.py bench_store.py``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    wanted = set(sys.argv[1:])
    scripts = sorted(p for p in HERE.glob("bench_*.py") if not wanted or p.name in wanted)
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, str(script)], check=False).returncode
        print(f"--- {script.name}: exit {rc}, {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
