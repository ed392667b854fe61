"""A GGUF model's own vocabulary through llama.cpp (``vocab_only=True``: loads in well under a second)."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from promcp.errors import TokenizerError
from promcp.tokenizers._base import BaseTokenizer, clean_text


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """llama.cpp prints model metadata on fd 2 even with verbose=False in some builds; keep it off the terminal."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


class GGUFTokenizer(BaseTokenizer):
    def __init__(self, path: Path) -> None:
        path = path.expanduser()
        if not path.is_file():
            raise TokenizerError(f"GGUF file not found: {path}")
        try:
            import llama_cpp
        except ImportError as exc:
            raise TokenizerError(
                "counting with a GGUF vocabulary needs llama-cpp-python: pip install 'promcp[local]'"
            ) from exc
        try:
            with quiet_stderr():
                self._llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        except Exception as exc:  # llama.cpp raises ValueError/RuntimeError on a bad file
            raise TokenizerError(f"cannot load the vocabulary of {path}: {exc}") from exc
        # llama-cpp-python frees the model in __del__, which fails noisily at interpreter shutdown once its
        # module globals are gone; closing it at exit, while they still exist, keeps shutdown quiet.
        atexit.register(self._llama.close)
        self.path = path
        self.name = f"gguf:{path.name}"
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        data = clean_text(text).encode("utf-8")
        with self._lock:
            return list(self._llama.tokenize(data, add_bos=False, special=False))

    def count(self, text: str) -> int:
        return len(self.encode(text))
