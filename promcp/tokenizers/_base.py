"""The tokenizer interface and the content-hash count cache."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from promcp.events import TokenSource

_LONE_SURROGATES = "surrogatepass"


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


#: Texts longer than this (characters) are counted piece by piece, so memory does not grow with the text: a
#: tokenizer's list of ids for a 50 MB text alone is ~400 MB of Python ints.
PIECE_CHARS = 1 << 20
_SPLIT_TRIES = 256


def pieces(text: str, size: int = PIECE_CHARS) -> list[tuple[int, int]]:
    """``(start, end)`` slices of ``text`` of at most ``size`` characters, cut where every regex pre-tokenizer cuts.

    The cut is right after a single line break, or else right before a single space, between two non-space
    characters: tiktoken's cl100k/o200k and GPT-2-style BPE (GGUF and HF files) never join a token across such a
    point, so the pieces' counts add up to the whole text's (checked in tests/unit/test_tokenizers.py). A piece with
    neither in its second half is cut at ``size`` (the count may then differ by a token or two at that cut).
    """
    out: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while n - start > size:
        end = start + size
        cut = _cut(text, "\n", 1, start + size // 2, end)
        if cut < 0:
            cut = _cut(text, " ", 0, start + size // 2, end)
        cut = cut if cut > start else end
        out.append((start, cut))
        start = cut
    out.append((start, n))
    return out


def _cut(text: str, sep: str, after: int, lo: int, hi: int) -> int:
    """The last single ``sep`` in ``text[lo:hi]`` between two non-space characters (index + ``after``), or -1."""
    for _ in range(_SPLIT_TRIES):
        at = text.rfind(sep, lo, hi)
        if at <= 0:
            return -1
        if not text[at + 1].isspace() and not text[at - 1].isspace():
            return at + after
        hi = at
    return -1


class CachedTokenizer:
    """A tokenizer with a count cache keyed by a content hash of the text: (Python's SipHash of the string, length).

    The cache holds hashes, not texts, so a long run does not keep every tool result alive. Python caches a
    string's hash on the object, so re-counting the same schema string costs one dict lookup (~0.1 µs; a BLAKE2b
    digest of the UTF-8 bytes, tried first, cost ~1.5 µs for a typical schema). With 64 hash bits plus the length
    the chance of any collision among a million cached texts is below 1e-7. The cache is bounded (``max_entries``);
    when full it is cleared, which keeps lookups O(1) without LRU bookkeeping on the hot path.
    """

    def __init__(self, base: BaseTokenizer, max_entries: int = 1_000_000) -> None:
        self.base = base
        self.name = base.name
        self.source = base.source
        self._cache: dict[tuple[int, int], int] = {}
        self._max = max_entries
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count(self, text: str) -> int:
        key = (hash(text), len(text))
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        n = self.count_uncached(text)
        if len(self._cache) >= self._max:
            with self._lock:
                self._cache.clear()
        self._cache[key] = n
        return n

    def count_uncached(self, text: str) -> int:
        if len(text) <= PIECE_CHARS:
            return self.base.count(text)
        return sum(self.base.count(text[a:b]) for a, b in pieces(text))

    def encode(self, text: str) -> list[int]:
        return self.base.encode(text)

    def clear(self) -> None:
        self._cache.clear()
        self.hits = self.misses = 0

    def __repr__(self) -> str:
        return (
            f"<CachedTokenizer {self.name} entries={len(self._cache)} hits={self.hits} misses={self.misses}>"
        )
