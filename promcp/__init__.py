"""promcp — token-flow profiling and tracing for Model Context Protocol (MCP) agents.

What a program calls (each name is imported on first use, so ``import promcp`` stays cheap):

* :func:`instrument` / :func:`uninstrument` — record the stages of your own MCP host (mcp SDK 2.x, and the
  OpenAI / Anthropic SDKs) with one line; :func:`flush` — journal everything recorded so far;
* :func:`record_session` — record one MCP session into a recorder of your own (a harness with several runs);
* :func:`wrap_openai`, :func:`wrap_anthropic`, :func:`wrap_chat`, :func:`record_chat` — record LLM calls;
* :class:`Recorder` and :func:`scope` — where events go, and the task / round / tool-call a block belongs to.

Subpackages for more: :mod:`promcp.analysis` (load traces into pandas, the phase tables), :mod:`promcp.events`
(the event record), :mod:`promcp.tokenizers` (offline token counting), :mod:`promcp.stages` and
:mod:`promcp.wire` (the stage builders and provider wire formats, for sources of your own). The command line
(``promcp run``, ``promcp import``, ``promcp report``, …) is documented in the README.
"""

from __future__ import annotations

from promcp._version import __version__

# ``typing`` is not imported at run time: the stdio proxy's relay starts through this package (docs/proxy.md)
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from promcp.recorder import Recorder, scope
    from promcp.shims import (
        flush,
        instrument,
        record_chat,
        record_session,
        uninstrument,
        wrap_anthropic,
        wrap_chat,
        wrap_openai,
    )

__all__ = [
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

_LAZY = {
    "instrument": "promcp.shims",
    "uninstrument": "promcp.shims",
    "flush": "promcp.shims",
    "record_session": "promcp.shims",
    "wrap_openai": "promcp.shims",
    "wrap_anthropic": "promcp.shims",
    "wrap_chat": "promcp.shims",
    "record_chat": "promcp.shims",
    "Recorder": "promcp.recorder",
    "scope": "promcp.recorder",
}

del TYPE_CHECKING


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'promcp' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API only (subpackages are imported by name: ``promcp.analysis``, ``promcp.events``…)."""
    return sorted(__all__)
