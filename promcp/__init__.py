"""promcp — token-flow profiling and tracing for Model Context Protocol (MCP) agents.

The public API is small:

* :func:`instrument` / :func:`uninstrument` — record the stages of your own MCP host (mcp SDK 2.x) with one line
  (implemented in :mod:`promcp.shims`, imported only when first used so ``import promcp`` stays cheap);
* :mod:`promcp.analysis` — load traces into pandas and compute the phase-attribution tables;
* :mod:`promcp.events` — the event record every source writes; :mod:`promcp.tokenizers` — offline token counting;
* :class:`Recorder` and :func:`scope` — for sources of your own.

The command line (``promcp run``, ``promcp import``, ``promcp report``, …) is documented in the README.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promcp._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from promcp.recorder import Recorder, scope
    from promcp.shims import instrument, uninstrument

__all__ = ["Recorder", "__version__", "instrument", "scope", "uninstrument"]

_LAZY = {
    "instrument": "promcp.shims",
    "uninstrument": "promcp.shims",
    "Recorder": "promcp.recorder",
    "scope": "promcp.recorder",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'promcp' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
