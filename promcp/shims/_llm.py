"""LLM client wrappers (placeholder until implemented)."""

from __future__ import annotations

from promcp.shims._patch import Patches


def install(patches: Patches) -> None:
    del patches


def reset() -> None:
    pass
