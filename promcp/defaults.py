"""Defaults every source and command shares, in a module that imports nothing: the MCP proxy reads them before the
server it wraps has started."""

from __future__ import annotations

from typing import Final

#: The tokenizer promcp counts with when nothing names one (a footprint, a model it has no tokenizer for, an export
#: without one): OpenAI's current tiktoken encoding, offline. ``promcp.tokenizers.get_or_default`` is the one
#: fallback to it when a named tokenizer cannot be loaded.
DEFAULT_TOKENIZER: Final = "o200k_base"
