"""What ``promcp.instrument()`` configured for every hook: the footprint tokenizer, the clock, and which tokenizer
counts a given model's text."""

from __future__ import annotations

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.stages import SYSTEM_CLOCK, Clock
from promcp.tokenizers import CachedTokenizer


class Settings:
    tokenizer: CachedTokenizer | None = None  # footprints of MCP traffic (``instrument(tokenizer=…)``)
    clock: Clock = SYSTEM_CLOCK  # tests inject a FakeClock


settings = Settings()
_by_model: dict[str | None, CachedTokenizer] = {}


def footprint_tokenizer() -> CachedTokenizer:
    """The tokenizer ``instrument()`` was given (``o200k_base`` when the hooks were installed without one)."""
    if settings.tokenizer is None:
        from promcp import tokenizers

        settings.tokenizer = tokenizers.get(DEFAULT_TOKENIZER)
    return settings.tokenizer


def tokenizer_for(model: str | None) -> CachedTokenizer:
    """The model's own tokenizer when promcp knows it (``tokenizers.for_model``), else the footprint tokenizer."""
    tok = _by_model.get(model)
    if tok is not None:
        return tok
    from promcp import tokenizers
    from promcp.errors import TokenizerError

    try:
        found = tokenizers.get(tokenizers.for_model(model, default="")) if model else None
    except TokenizerError:  # e.g. a .gguf label whose file is not here: fall back, do not lose the event
        found = None
    tok = found or footprint_tokenizer()
    _by_model[model] = tok
    return tok


def reset() -> None:
    """Forget per-model tokenizer choices (uninstrument)."""
    _by_model.clear()
