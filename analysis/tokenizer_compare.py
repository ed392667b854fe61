"""Tokenizer comparison over the same texts (the paper's Table 5).

For each tokenizer: total and mean tokens, tokens per character and per UTF-8 byte, the ratio to the reference
tokenizer (the first one named), and Pearson's r between its per-text counts and the reference's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd


def compare_tokenizers(texts: Iterable[str], names: Sequence[str]) -> pd.DataFrame:
    """Count every text under every tokenizer in ``names``; one row per tokenizer.

    Columns: ``tokenizer, token_source, texts, chars, bytes, tokens, tokens_mean, tokens_per_char,
    tokens_per_byte, ratio_to_ref, pearson_r``. The first name is the reference (ratio 1, r 1).
    """
    if not names:
        raise ValueError("name at least one tokenizer")
    from promcp import tokenizers  # loaded here: a report without this table loads no tokenizer

    texts = [t for t in texts if t]
    chars = np.array([len(t) for t in texts], dtype="float64")
    nbytes = np.array([len(t.encode("utf-8", "surrogatepass")) for t in texts], dtype="float64")
    counts: dict[str, np.ndarray] = {}
    rows = []
    for name in names:
        tok = tokenizers.get(name)
        counts[name] = np.array([tok.count(t) for t in texts], dtype="float64")
    ref = counts[names[0]]
    for name in names:
        c = counts[name]
        tok = tokenizers.get(name)
        total = float(c.sum())
        if len(texts) > 1 and c.std() > 0 and ref.std() > 0:
            r = float(np.corrcoef(ref, c)[0, 1])
        else:
            r = float("nan")
        rows.append(
            {
                "tokenizer": tok.name,
                "token_source": tok.source.value,
                "texts": len(texts),
                "chars": int(chars.sum()),
                "bytes": int(nbytes.sum()),
                "tokens": int(total),
                "tokens_mean": float(c.mean()) if len(texts) else float("nan"),
                "tokens_per_char": total / chars.sum() if chars.sum() else float("nan"),
                "tokens_per_byte": total / nbytes.sum() if nbytes.sum() else float("nan"),
                "ratio_to_ref": total / ref.sum() if ref.sum() else float("nan"),
                "pearson_r": r,
            }
        )
    return pd.DataFrame(rows)
