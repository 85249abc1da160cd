"""Tokenizers: the bundled cl100k file, offsets, and exact span counts from one tokenization."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.errors import ParameterError
from backend.tokenizers import CL100K_SHA256, TOKENIZER_NAMES, SpanCounter, bundled_cl100k_path, get_tokenizer


def test_cl100k_is_the_official_file_and_encodes_known_ids():
    raw = gzip.decompress(bundled_cl100k_path().read_bytes())
    import hashlib

    assert hashlib.sha256(raw).hexdigest() == CL100K_SHA256
    tok = get_tokenizer("cl100k")
    assert tok.encode("hello world") == [15339, 1917]
    # Special-token text in a document is ordinary text, never a control token.
    assert 100257 not in tok.encode("<|endoftext|>")


@pytest.mark.parametrize("name", ["cl100k", "minilm", "words", "chars"])
def test_token_starts_are_ascending_offsets(name):
    tok = get_tokenizer(name)
    text = "Héllo  wörld, 北京欢迎你 😀 e\u0301 end."
    starts = tok.token_starts(text).tolist()
    assert starts == sorted(starts)
    assert all(0 <= s < len(text) for s in starts)
    assert len(starts) == tok.count(text) or name == "minilm"


def test_unknown_tokenizer_is_a_parameter_error():
    with pytest.raises(ParameterError, match="unknown tokenizer 'gpt9'"):
        get_tokenizer("gpt9")
    assert set(TOKENIZER_NAMES) == {"cl100k", "minilm", "smollm2", "words", "chars"}


_pieces = st.sampled_from(
    ["word", " word", "  ", " ", ".", ". ", "\n", "\n\n", "\t", "3.14", "1234567", "北京", "😀", "e\u0301",
     "don't", "(x)", "--", "Über", " Über", "a", "'s", "\u00a0", "<|endoftext|>"]
)


@pytest.mark.parametrize("name", ["cl100k", "words", "chars"])
@settings(max_examples=150, deadline=None)
@given(parts=st.lists(_pieces, min_size=1, max_size=120), data=st.data())
def test_span_counter_equals_counting_each_span_alone(name, parts, data):
    tok = get_tokenizer(name)
    text = "".join(parts)
    counter = SpanCounter(tok, text)
    spans = []
    for _ in range(12):
        a = data.draw(st.integers(0, len(text)))
        b = data.draw(st.integers(a, len(text)))
        spans.append((a, b))
    spans.append((0, len(text)))
    assert counter.count_many(spans) == [tok.count(text[a:b]) for a, b in spans]


def test_span_counter_on_long_prose_matches_direct_counts():
    tok = get_tokenizer("cl100k")
    text = ("The quick brown fox, e.g. Dr. Fox, jumps over 3.14 lazy dogs!\n\n" * 200) + "Über 北京 😀."
    counter = SpanCounter(tok, text)
    spans = [(i, min(len(text), i + w)) for i in range(0, len(text), 97) for w in (70, 300, 1500)]
    assert counter.count_many(spans) == [tok.count(text[a:b]) for a, b in spans]


def test_model_tokenizers_load_offline_from_the_bundled_packages():
    lm = get_tokenizer("smollm2")  # converted from the GGUF once, then read from the data dir
    emb = get_tokenizer("minilm")
    text = "Chunk Lab runs offline. 北京"
    assert lm.count(text) > 5 and emb.count(text) > 5
    assert SpanCounter(lm, text).count_many([(0, len(text)), (6, 15)]) == [lm.count(text), lm.count(text[6:15])]
