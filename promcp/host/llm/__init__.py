"""LLM backends of the promcp host; the interface and registry are in :mod:`promcp.host.llm.base`."""

from promcp.host.llm.base import LLMBackend, get_backend

__all__ = ["LLMBackend", "get_backend"]
