"""The tokenizer interface and the content-hash count cache."""

from __future__ import annotations

import hashlib
import threading
from abc import ABC, abstractmethod

from promcp.events import TokenSource

_LONE_SURROGATES = "surrogatepass"


def _utf8(text: str) -> bytes:
    # Exports can carry lone surrogates (\ud83d without its pair); they must not crash a count.
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", _LONE_SURROGATES)


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (tokenizers reject them)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


class BaseTokenizer(ABC):
    """One tokenizer. ``name`` is the label written into events' ``tokenizer`` column."""

    #: label recorded in events (stable across machines: no absolute paths)
    name: str
    #: ``tokenizer`` for exact tokenizers, ``approx`` for labelled approximations
    source: TokenSource = TokenSource.TOKENIZER

    @abstractmethod
    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens added, special-token text counted as ordinary text)."""

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError(f"{self.name} does not expose token ids")


class CachedTokenizer:
    """A tokenizer with a count cache keyed by a 128-bit BLAKE2b digest of the UTF-8 text.

    The cache holds digests, not texts, so a long run does not keep every tool result alive. It is bounded
    (``max_entries``); when full it is cleared, which keeps lookups O(1) without LRU bookkeeping on the hot path.
    """

    def __init__(self, base: BaseTokenizer, max_entries: int = 1_000_000) -> None:
        self.base = base
        self.name = base.name
        self.source = base.source
        self._cache: dict[bytes, int] = {}
        self._max = max_entries
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count(self, text: str) -> int:
        key = hashlib.blake2b(_utf8(text), digest_size=16).digest()
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        n = self.base.count(text)
        if len(self._cache) >= self._max:
            with self._lock:
                self._cache.clear()
        self._cache[key] = n
        return n

    def count_uncached(self, text: str) -> int:
        return self.base.count(text)

    def encode(self, text: str) -> list[int]:
        return self.base.encode(text)

    def clear(self) -> None:
        self._cache.clear()
        self.hits = self.misses = 0

    def __repr__(self) -> str:
        return f"<CachedTokenizer {self.name} entries={len(self._cache)} hits={self.hits} misses={self.misses}>"
