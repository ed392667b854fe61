"""A Hugging Face tokenizer from a local ``tokenizer.json`` (``tokenizers``) or directory (``transformers``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from promcp.errors import TokenizerError
from promcp.tokenizers._base import BaseTokenizer, clean_text

_GENERIC_NAMES = frozenset({"model", "tokenizer", "tokenizer.json", "snapshot", "main"})


class HFTokenizer(BaseTokenizer):
    def __init__(self, path: Path) -> None:
        path = path.expanduser()
        file = path / "tokenizer.json" if path.is_dir() else path
        # label without machine paths; a generic folder name ("model", "tokenizer") keeps its parent for clarity
        label = (
            f"{path.parent.name}/{path.name}"
            if path.name in _GENERIC_NAMES and path.parent.name
            else path.name
        )
        self.name = f"hf:{label}"
        self._fast: Any = None
        self._slow: Any = None
        if file.is_file() and file.suffix == ".json":
            from tokenizers import Tokenizer

            try:
                self._fast = Tokenizer.from_file(str(file))
                # tokenizer.json files often enable padding/truncation for model inputs; a count must not see them
                self._fast.no_padding()
                self._fast.no_truncation()
            except Exception as exc:
                raise TokenizerError(f"cannot load tokenizer file {file}: {exc}") from exc
        elif path.is_dir():
            # A directory without tokenizer.json (sentencepiece/vocab files): let transformers build it, offline.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from transformers import AutoTokenizer

                self._slow = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            except Exception as exc:
                raise TokenizerError(f"cannot load a Hugging Face tokenizer from {path}: {exc}") from exc
        else:
            raise TokenizerError(f"no tokenizer.json or tokenizer directory at {path}")

    def encode(self, text: str) -> list[int]:
        text = clean_text(text)
        if self._fast is not None:
            return list(self._fast.encode(text, add_special_tokens=False).ids)
        return list(self._slow.encode(text, add_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self.encode(text))
