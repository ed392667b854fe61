"""Export rate of ``promcp export``: spans/s of a synthetic dataset (tests/synth.py: realistic rounds with parts
by origin) read, turned into spans and sent, in one run of this script:

* ``build`` — reading the run and building the spans (with their carried rows), sent nowhere: the exporter's own
  cost;
* ``collect`` — into a real ``promcp collect`` on loopback (its own process, OTLP/HTTP protobuf), the receiver
  journaling every row; then the collector is stopped and the dataset counted: events in = events out;
* ``phoenix`` (``--phoenix``, when arize-phoenix is installed) — into a real ``phoenix serve`` on loopback.

    .venv/bin/python tests/perf/bench_export.py [--tasks 2000] [--batch 512] [--phoenix]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.* when run as a script

from promcp.events import Topology
from promcp.export import export_dataset
from promcp.export.send import make_sender
from promcp.export.state import ExportState
from tests import synth
from tests.conftest import write_dataset
from tests.stubs.ports import free_port, wait_port

PROMCP = [sys.executable, "-m", "promcp.cli"]


class _Nowhere:
    url = "nowhere"
    rejected = 0

    def send(self, request: Any) -> None:
        request.SerializeToString()  # the bytes a sender would write

    def close(self) -> None:
        pass


def _export(ds: Path, sender: Any, state: Path, batch: int) -> tuple[int, float]:
    result = export_dataset(ds, sender, ExportState(state, "bench"), project="bench", batch=batch)
    sender.close()
    return result.spans, result.seconds


def _phoenix(work: Path) -> tuple[subprocess.Popen[bytes], str] | None:
    exe = Path(sys.executable).parent / "phoenix"
    if not exe.exists():
        return None
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    proc = subprocess.Popen(
        [str(exe), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.5)
    proc.kill()
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--phoenix", action="store_true", help="also export into a real phoenix serve")
    args = ap.parse_args()
    rows: list[tuple[str, int, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ds = write_dataset(root / "ds", synth.events(args.tasks, topologies=(Topology.C_CUST,)))
        spans, seconds = _export(ds, _Nowhere(), root / "s0.json", args.batch)
        rows.append(("build (no destination)", spans, seconds, "—"))
        port = free_port()
        col = subprocess.Popen(
            [*PROMCP, "collect", "--listen", f"127.0.0.1:{port}", "--out", str(root / "col")],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_port(port)
            spans, seconds = _export(
                ds, make_sender(f"http://127.0.0.1:{port}", "http/protobuf"), root / "s1.json", args.batch
            )
        finally:
            col.send_signal(signal.SIGINT)
            col.communicate(timeout=600)
        import promcp.analysis as pa

        n_in, n_out = len(pa.load(ds)), len(pa.load(root / "col"))
        rows.append(("promcp collect (OTLP/HTTP protobuf)", spans, seconds, f"{n_out:,} of {n_in:,} events"))
        if args.phoenix:
            started = _phoenix(root / "phoenix")
            if started is None:
                print("phoenix: not installed or did not start", file=sys.stderr)
            else:
                proc, base = started
                try:
                    spans, seconds = _export(
                        ds, make_sender(base, "http/protobuf"), root / "s2.json", args.batch
                    )
                finally:
                    proc.terminate()
                    proc.wait(60)
                rows.append(("Arize Phoenix (OTLP/HTTP protobuf)", spans, seconds, "—"))
    base_rate = rows[0][1] / rows[0][2]
    print(
        f"promcp export: {args.tasks:,} synthetic tasks, batches of {args.batch} spans, load {os.getloadavg()[0]:.1f}"
    )
    print("| destination | spans | seconds | spans/s | × build | events recorded |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, spans, seconds, note in rows:
        rate = spans / seconds
        print(f"| {name} | {spans:,} | {seconds:.2f} | {rate:,.0f} | {rate / base_rate:.2f} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
