"""Chunker invariants (property tests) and exact expected chunks for small inputs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.chunkers import REGISTRY, chunker_specs, make_chunker
from backend.errors import ParameterError
from backend.text.document import Document
from backend.tokenizers import get_tokenizer
from tests.invariants import check_invariants

BASELINES = ("fixed_token", "recursive", "sentence", "paragraph")

_alphabet = st.sampled_from(
    list("abcdefghij ABC  \n\n\t.,;:!?-'\"()0123456789")
    + ["Dr.", "e.g.", "U.S.", "3.14", "。", "！", "？", "；", "，", "北京", "中文", "😀", "👩‍💻", "é", "e\u0301", "\u00a0", "•", "- "]
)
texts = st.one_of(
    st.lists(_alphabet, max_size=400).map("".join),
    st.text(max_size=300),
    st.just(""),
    st.just("   \n\n \t "),
    st.integers(1, 3000).map(lambda n: "x" * n),  # one giant word
    st.integers(1, 400).map(lambda n: "喵" * n),
    st.integers(1, 200).map(lambda n: "😀" * n),
)


def _doc(text: str) -> Document:
    return Document.from_text(text, source="prop.txt")


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("tok", ["cl100k", "words", "chars"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, size=st.integers(1, 60), overlap_frac=st.sampled_from([0.0, 0.0, 0.3, 0.6]))
def test_chunker_invariants(name, tok, text, size, overlap_frac):
    tokenizer = get_tokenizer(tok)
    params = {"chunk_size": size}
    overlap = int(size * overlap_frac) if name != "paragraph" else 0
    if name != "paragraph":
        params["chunk_overlap"] = overlap
    doc = _doc(text)
    chunking = make_chunker(name, params, tok).chunk(doc)
    check_invariants(doc, chunking, size, overlap_allowed=overlap > 0, tokenizer=tokenizer)


@pytest.mark.parametrize("name", BASELINES)
def test_empty_and_whitespace_documents_give_no_chunks(name):
    for text in ["", "  \n\n\t "]:
        assert len(make_chunker(name).chunk(_doc(text))) == 0


def test_fixed_token_exact_windows_words():
    doc = _doc("one two three four five six seven")
    got = [(c.start, c.end, c.text, c.tokens) for c in make_chunker("fixed_token", {"chunk_size": 3}, "words").chunk(doc)]
    assert got == [(0, 14, "one two three ", 3), (14, 28, "four five six ", 3), (28, 33, "seven", 1)]


def test_fixed_token_overlap_words():
    doc = _doc("a b c d e f g")
    got = [c.text for c in make_chunker("fixed_token", {"chunk_size": 4, "chunk_overlap": 2}, "words").chunk(doc)]
    assert got == ["a b c d ", "c d e f ", "e f g"]


def test_fixed_token_cl100k_tiles_text_exactly():
    text = "Chunk Lab compares chunkers. " * 40
    doc = _doc(text.strip())
    chunks = make_chunker("fixed_token", {"chunk_size": 50}, "cl100k").chunk(doc).chunks
    assert "".join(c.text for c in chunks) == doc.text
    assert all(c.tokens == 50 for c in chunks[:-1])


def test_fixed_token_multibyte_character_boundaries():
    doc = _doc("😀" * 10 + "北京欢迎你" * 5)
    chunks = make_chunker("fixed_token", {"chunk_size": 2}, "cl100k").chunk(doc).chunks
    assert "".join(c.text for c in chunks) == doc.text
    assert "\ufffd" not in "".join(c.text for c in chunks)


def test_recursive_exact_chunks_chars():
    # LangChain's quirk is kept on purpose: "." starts the next piece, so a lone "." can be a chunk.
    text = "Alpha beta.\n\nGamma delta epsilon.\nZeta."
    chunks = make_chunker("recursive", {"chunk_size": 15}, "chars").chunk(_doc(text)).chunks
    assert [(c.start, c.end, c.text) for c in chunks] == [
        (0, 11, "Alpha beta."),
        (13, 24, "Gamma delta"),
        (25, 32, "epsilon"),
        (32, 33, "."),
        (34, 39, "Zeta."),
    ]


def test_recursive_matches_langchain_on_chroma_configuration():
    langchain = pytest.importorskip("langchain_text_splitters")
    tok = get_tokenizer("cl100k")
    para = (
        "Retrieval quality depends on chunking. Dr. Smith measured recall, precision and IoU! "
        "Did overlap help? Sometimes.\nA new line starts here with more words to split.\n\n"
    )
    text = (para * 30).strip()
    for size, overlap in [(200, 0), (50, 0), (30, 10)]:
        lc = langchain.RecursiveCharacterTextSplitter(
            chunk_size=size,
            chunk_overlap=overlap,
            length_function=tok.count,
            separators=["\n\n", "\n", ".", "?", "!", " ", ""],
        )
        expected = [c for c in lc.split_text(text)]
        got = [c.text for c in make_chunker("recursive", {"chunk_size": size, "chunk_overlap": overlap}).chunk(_doc(text))]
        assert got == expected, (size, overlap)


def test_recursive_repeated_text_offsets_are_exact():
    # text.find()-based offset recovery maps every repeat to the first occurrence; spans must not.
    text = "\n\n".join(["Same paragraph again."] * 5)
    chunks = make_chunker("recursive", {"chunk_size": 6}).chunk(_doc(text)).chunks
    assert [c.start for c in chunks] == [0, 23, 46, 69, 92]


def test_sentence_chunker_keeps_sentences_whole_and_overlaps_whole_sentences():
    text = "One two three. Four five six. Seven eight nine. Ten eleven twelve."
    doc = _doc(text)
    chunks = make_chunker("sentence", {"chunk_size": 6, "chunk_overlap": 3}, "words").chunk(doc).chunks
    assert [c.text for c in chunks] == [
        "One two three. Four five six.",
        "Four five six. Seven eight nine.",
        "Seven eight nine. Ten eleven twelve.",
    ]


def test_paragraph_chunker_packs_paragraphs():
    text = "p1 a b\n\np2 c d\n\np3 e f g h i j k l"
    chunks = make_chunker("paragraph", {"chunk_size": 6}, "words").chunk(_doc(text)).chunks
    assert [c.text for c in chunks][:1] == ["p1 a b\n\np2 c d"]
    assert all(c.tokens <= 6 for c in chunks)


@pytest.mark.parametrize(
    "name,params,message",
    [
        ("recursive", {"chunk_size": 200, "chunk_overlap": 300}, "chunk_overlap (300) must be smaller than chunk_size (200)"),
        ("fixed_token", {"chunk_size": 0}, "chunk_size (0) must be at least 1"),
        ("sentence", {"chunk_size": "abc"}, "chunk_size must be int, got 'abc'"),
        ("paragraph", {"chunk_overlap": 3}, "unknown parameter 'chunk_overlap'"),
        ("nope", {}, "unknown chunker 'nope'"),
    ],
)
def test_bad_parameters_name_the_value(name, params, message):
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_chunker(name, params)


def test_registry_describes_every_chunker():
    specs = {s["name"]: s for s in chunker_specs()}
    assert set(BASELINES) <= set(specs)
    for name, spec in specs.items():
        assert spec["family"] and spec["doc"], name
        assert [p["name"] for p in spec["params"]] == [p.name for p in REGISTRY[name].params]
        for p in spec["params"]:
            assert {"name", "type", "default", "min", "max", "choices", "help"} <= set(p)
            assert p["help"], (name, p["name"])


def test_run_report_summarizes_a_chunkers_meta_and_reaches_the_stats():
    from backend.chunking import Chunk, ChunkerConfig, Chunking
    from backend.metrics.stats import chunking_stats

    base = Chunking(ChunkerConfig.make("moc"), (Chunk(0, 0, 5, "hello", 1),), 0.01, "doc", 5)
    assert base.run_report is None and "report" not in chunking_stats([base])[0]
    meta = {"content_loss": 0.125, "gap_chunks": [1, 4, 6], "granularity": "120-150", "router": "paragraph",
            "model_calls": 4, "cache_hits": 2, "repairs": 1}
    ch = Chunking(base.config, base.chunks, 0.01, "doc", 5, meta=tuple(sorted(meta.items())))
    assert ch.run_report == (
        "content loss 12.5 % (3 gap chunks) · granularity 120-150 (paragraph router) · 4 model calls, 2 cached, 1 repair"
    )
    assert chunking_stats([ch])[0]["report"] == ch.run_report


def test_sentence_overlap_never_pushes_a_chunk_over_the_limit():
    # Found by test_chunker_invariants: the carried sentence "4aeb\n" plus the next one count 9
    # tokens apart but 11 as one span (cl100k merges across the boundary), over chunk_size 10.
    doc = _doc("aaaaaaabaaaaae.g.3.14aeb\naA\naAaae")
    chunks = make_chunker("sentence", {"chunk_size": 10, "chunk_overlap": 3}, "cl100k").chunk(doc).chunks
    assert [(c.start, c.end, c.tokens) for c in chunks] == [(0, 10, 4), (10, 24, 9), (25, 33, 7)]
