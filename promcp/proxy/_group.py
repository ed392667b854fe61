"""Which run a proxy process writes, and where: the contract between proxies and whoever starts them.

Several processes belong to one client session — one ``promcp proxy mcp`` per MCP server the client starts, and
(``promcp record``) an LLM-API proxy — and they write **one run**: each process appends to its own journal part
(:mod:`promcp.store.parts`) of the same run id, and the last to end merges the parts into the run's Parquet file
(joined by :func:`promcp.stages.link.link_tool_calls`; ``python -m promcp.proxy._group DIR RUN_ID`` is that merge).

A process finds its dataset folder and run id, first match wins:

======================  ==============================  ==================================================
what                    dataset folder                  run id
======================  ==============================  ==================================================
command-line flag       ``--out DIR``                   ``--run-id ID``
environment             ``PROMCP_OUT``                  ``PROMCP_RUN_ID``
otherwise               ``traces`` (relative to the     the client session: the process that started the
                        working directory)              proxy (its start time, name and pid), so every
                                                        server one client process starts lands in one run
======================  ==============================  ==================================================

A parent such as ``promcp record`` sets ``PROMCP_OUT`` and ``PROMCP_RUN_ID`` in the environment of the client it
starts (clients pass their environment on to the servers they spawn, and ``promcp proxy config`` writes ``--out``
into every wrapped server), starts its own recorders with ``Recorder(out, run_id=…, part=…)``, and once the
client has exited calls :func:`promcp.store.parts.finalize_group` (a no-op while a part is still being written).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

TYPE_CHECKING = False  # no ``typing`` / ``dataclasses`` at run time: the stdio relay imports this module
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "DEFAULT_OUT",
    "ENV_OUT",
    "ENV_RUN_ID",
    "RunTarget",
    "client_session_run_id",
    "finalize_later",
    "resolve_target",
]

ENV_OUT: Final = "PROMCP_OUT"
ENV_RUN_ID: Final = "PROMCP_RUN_ID"
DEFAULT_OUT: Final = "traces"
#: processes between a client and its servers that are not the client itself (launchers, shells)
_LAUNCHERS: Final = frozenset(
    {"sh", "bash", "dash", "zsh", "fish", "env", "timeout", "nohup", "npx", "npm", "uvx"}
)
_RUN_ID_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class RunTarget:
    """Where a proxy records: dataset folder, run id, and which rule chose the run id."""

    __slots__ = ("chosen_by", "out", "run_id")

    def __init__(self, out: Path, run_id: str, chosen_by: str) -> None:
        self.out = out
        self.run_id = run_id
        self.chosen_by = chosen_by  # "flag", "env" or "client-session"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunTarget):
            return NotImplemented
        return (self.out, self.run_id, self.chosen_by) == (other.out, other.run_id, other.chosen_by)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunTarget(out={self.out!r}, run_id={self.run_id!r}, chosen_by={self.chosen_by!r})"


def check_run_id(run_id: str) -> str:
    """``run_id`` when it can name files (letters, digits, ``._-``; up to 128), else ValueError."""
    if not _RUN_ID_OK.match(run_id):
        raise ValueError(f"run id {run_id!r} must be letters, digits, '.', '_' or '-' (at most 128)")
    return run_id


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(name, parent pid, start time in clock ticks since boot) of a process, from /proc (Linux)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return name, int(fields[1]), int(fields[19])


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def client_session_run_id(pid: int | None = None) -> str:
    """A run id naming the client session that started this process: ``<UTC start>-<client>-<pid>`` of the
    nearest ancestor that is not a launcher (shell, ``npx``, …). Every proxy one client process starts gets the
    same id; a restarted client gets a new one. Without /proc: the parent pid and today's date."""
    pid = os.getppid() if pid is None else pid
    info = _stat(pid)
    while info is not None and info[0] in _LAUNCHERS and info[1] > 1:
        parent = _stat(info[1])
        if parent is None:
            break
        pid, info = info[1], parent
    if info is None:
        return f"{time.strftime('%Y%m%d', time.gmtime())}-client-{pid}"
    name, _, ticks = info
    boot = _boot_time()
    started = boot + ticks / os.sysconf("SC_CLK_TCK") if boot is not None else time.time()
    label = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:24] or "client"
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}-{label}-{pid}"


def resolve_target(
    out: Path | None, run_id: str | None, environ: dict[str, str] | os._Environ[str] | None = None
) -> RunTarget:
    """The dataset folder and run id by the rules above (ValueError for a run id that cannot name a file)."""
    env = os.environ if environ is None else environ
    folder = out or (Path(env[ENV_OUT]) if env.get(ENV_OUT) else Path(DEFAULT_OUT))
    if run_id:
        return RunTarget(folder, check_run_id(run_id), "flag")
    if env.get(ENV_RUN_ID):
        return RunTarget(folder, check_run_id(env[ENV_RUN_ID]), "env")
    return RunTarget(folder, client_session_run_id(), "client-session")


def finalize_later(out: Path, run_id: str) -> None:
    """Merge the run's parts in a detached process (its own session, so the client's kill of the proxy — Claude
    Code sends SIGKILL 0.5 s after closing a server — cannot cut it short, and the proxy exits at once). It does
    nothing while another part is still being written; parts it cannot merge stay for ``promcp finalize``."""
    subprocess.Popen(  # no shell; the same interpreter and promcp as this process
        [sys.executable, "-m", "promcp.proxy._group", str(Path(out).absolute()), run_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m promcp.proxy._group DIR RUN_ID``: merge one run's parts, tool calls joined (what a proxy starts
    as it exits, :func:`finalize_later`)."""
    from promcp.stages.link import link_tool_calls
    from promcp.store.parts import finalize_group

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m promcp.proxy._group DATASET_DIR RUN_ID\n")
        return 2
    try:
        from promcp.proxy.mcp.stdio_recorder import record_orphans

        # a stdio proxy's frame journal that nobody is on (its relay was killed before its recorder started)
        record_orphans(Path(args[0]), args[1])
        finalize_group(Path(args[0]), args[1], link=link_tool_calls)
    except Exception as exc:  # reported, not raised: the parts stay for `promcp finalize`
        sys.stderr.write(f"promcp: could not merge run {args[1]} in {args[0]}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
