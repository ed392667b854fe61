"""Token counting a proxy could not finish, finished by a detached helper instead of lost.

Clients kill their servers soon after closing them (Claude Code: SIGINT 25 ms after closing stdin, SIGKILL 0.5 s
later), and counting the tokens of a large ``tools/list`` or ``tools/call`` result takes longer (10 MB of text:
~2 s). When the client closes, when a SIGINT / SIGTERM arrives and when the server exits, the proxy takes the
recorder's unfinished work (:meth:`promcp.recorder.Recorder.hand_off`: :class:`~.observer.Deferred` items of
plain measured values), writes it owner-only into the run's parts folder and starts
``python -m promcp.proxy.mcp.handoff FILE``, in its own session so the client's kill does not reach it. The
helper builds the events with the same builders, journals them as another part of the same run, removes the file,
and merges the run when no part is still being written.
"""

from __future__ import annotations

import os
import pickle
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from promcp.recorder import Recorder
from promcp.stages.link import link_tool_calls
from promcp.store.files import make_dirs
from promcp.store.parts import finalize_group, parts_dir

__all__ = ["hand_off", "main"]


def hand_off(recorder: Recorder) -> Path | None:
    """Move ``recorder``'s unfinished work to a detached helper; the file it reads (None: nothing to move)."""
    items = recorder.hand_off()
    if not items:
        return None
    folder = parts_dir(recorder.out, recorder.run_id)
    make_dirs(folder)
    path = folder / f".handoff-{os.getpid()}-{secrets.token_hex(4)}.pkl"
    payload: dict[str, Any] = {
        "out": str(Path(recorder.out).absolute()),
        "run_id": recorder.run_id,
        "topology": recorder.topology.value,
        "source": recorder.source,
        "part": f"{recorder.part or 'proxy'}-late",
        "content": recorder.content,
        "max_content_bytes": recorder.max_content_bytes,
        "items": [(seq, build) for seq, _scope, build in items],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
    subprocess.Popen(  # no shell; this interpreter
        [sys.executable, "-m", "promcp.proxy.mcp.handoff", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return path


def finish(path: Path) -> Path | None:
    """Build and journal the events of one hand-off file, remove it, and merge the run if nothing is live."""
    with path.open("rb") as fh:  # written owner-only by the proxy of this dataset a moment ago
        payload = pickle.load(fh)
    out = Path(payload["out"])
    rec = Recorder(
        out,
        topology=payload["topology"],
        source=payload["source"],
        run_id=payload["run_id"],
        part=payload["part"],
        content=payload["content"],
        max_content_bytes=payload["max_content_bytes"],
        meta={"handoff": True},
    )
    failed: list[str] = []
    for seq, build in sorted(payload["items"], key=lambda item: item[0]):
        build.put_text = rec.put_text
        try:
            event = build()
        except Exception as exc:  # one event that cannot be built must not take the others with it
            failed.append(f"seq {seq}: {type(exc).__name__}: {exc}")
            continue
        if event is not None:
            rec.emit(event)
    rec.close(finalize_run=False)
    path.unlink()
    for problem in failed:
        sys.stderr.write(f"promcp: hand-off {path.name}: an event could not be built ({problem})\n")
    return finalize_group(out, payload["run_id"], link=link_tool_calls)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m promcp.proxy.mcp.handoff FILE\n")
        return 2
    try:
        finish(Path(args[0]))
    except Exception as exc:  # the file stays for a later look; the run's other parts are unaffected
        sys.stderr.write(f"promcp: hand-off {args[0]} failed: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
