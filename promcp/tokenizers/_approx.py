"""Labelled approximations for models without a public tokenizer.

Anthropic publishes no tokenizer for Claude 3 and later. ``approx:claude`` counts with ``cl100k_base`` and scales
by a calibration factor; every row it produces carries ``token_source = approx`` and the tokenizer label
``approx:claude``, so it is never mistaken for an exact count. ``approx:<base>@<factor>`` (e.g.
``approx:o200k_base@1.1``) builds any other scaled approximation. The factor and how it was calibrated are in
docs/tokens.md.
"""

from __future__ import annotations

import math

from promcp.errors import TokenizerError
from promcp.events import TokenSource
from promcp.tokenizers._base import BaseTokenizer
from promcp.tokenizers._tiktoken import ENCODINGS, TiktokenTokenizer

#: Claude tokens per cl100k token. See docs/tokens.md for the calibration on genuine Claude Code usage.
CLAUDE_FACTOR = 1.0

_PRESETS = {"claude": ("cl100k_base", CLAUDE_FACTOR)}


def describe(label: str) -> str | None:
    """What an ``approx:`` label stands for, e.g. ``approx:claude`` → ``cl100k_base × 1.0``; None otherwise.

    Tables that show counts under an approximation print this beside them (nothing is loaded).
    """
    if not label.startswith("approx:"):
        return None
    spec = label.removeprefix("approx:")
    if spec in _PRESETS:
        base, factor = _PRESETS[spec]
    else:
        base, sep, factor_text = spec.partition("@")
        try:
            factor = float(factor_text) if sep else 1.0
        except ValueError:
            return None
    return f"{base} × {factor:g}" if factor != int(factor) else f"{base} × {factor:.1f}"


class ApproxTokenizer(BaseTokenizer):
    source = TokenSource.APPROX

    def __init__(self, label: str, base: str, factor: float) -> None:
        if base not in ENCODINGS:
            raise TokenizerError(f"approximation base {base!r} is not one of {', '.join(ENCODINGS)}")
        if not (0.1 <= factor <= 10):
            raise TokenizerError(f"approximation factor {factor} is out of range (0.1–10)")
        self.name = label
        self.factor = factor
        self._base = TiktokenTokenizer(base)

    @classmethod
    def from_spec(cls, spec: str) -> ApproxTokenizer:
        spec = spec.removeprefix("approx:")
        if spec in _PRESETS:
            base, factor = _PRESETS[spec]
            return cls(f"approx:{spec}", base, factor)
        base, sep, factor_text = spec.partition("@")
        try:
            factor = float(factor_text) if sep else 1.0
        except ValueError as exc:
            raise TokenizerError(f"bad approximation factor in 'approx:{spec}'") from exc
        return cls(f"approx:{spec}", base, factor)

    def count(self, text: str) -> int:
        n = self._base.count(text)
        return n if self.factor == 1.0 else math.ceil(n * self.factor)
