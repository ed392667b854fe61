"""A plain byte tee for tests: ``python tee_relay.py PREFIX -- COMMAND ARGS…`` runs COMMAND and copies its stdin
and stdout through, saving what went in to ``PREFIX.in`` and what came out to ``PREFIX.out``.

Placed on both sides of ``promcp proxy mcp`` (client → tee → proxy → tee → server), it lets a test compare what the
client received with what the server sent, byte for byte. Test scaffolding only: it records nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def _copy(src: int, dst: int, log: str, close_dst: bool) -> None:
    with open(log, "wb") as fh:
        while True:
            chunk = os.read(src, 65536)
            if not chunk:
                break
            fh.write(chunk)
            fh.flush()
            view = memoryview(chunk)
            while view:
                view = view[os.write(dst, view) :]
    if close_dst:
        os.close(dst)


def main() -> int:
    prefix, sep, *command = sys.argv[1:]
    assert sep == "--", "usage: tee_relay.py PREFIX -- COMMAND ARGS…"
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    threading.Thread(target=_copy, args=(0, child.stdin.fileno(), prefix + ".in", True), daemon=True).start()
    out = threading.Thread(target=_copy, args=(child.stdout.fileno(), 1, prefix + ".out", False))
    out.start()
    code = child.wait()
    out.join(5)
    return code


if __name__ == "__main__":
    sys.exit(main())
