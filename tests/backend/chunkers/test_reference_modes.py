"""The reference modes of the embedding chunkers against the Chroma report's code, transcribed here.

``cluster cap=pieces`` is ClusterSemanticChunker's ``_optimal_segmentation`` (a full similarity
matrix, ``dp`` from zero, strict ``>``), ``semantic_max search=mean`` is KamradtModifiedChunker's
bisection for ``total_tokens // avg_chunk_size`` cuts, and ``semantic split=regex`` takes LangChain
SemanticChunker's sentences. The transcriptions below are written from the reference code, not from
``backend.chunkers.semantic``; they run on the chunker's own pieces and embedding vectors (read
through the same cache, so the vectors are the very ones the chunker used), and the chunk spans must
be the same piece groups. The documents are the bundled samples' first ~900 tokens (as in
``test_semantic_chunkers.py``): three languages and layouts at a fraction of the embedding cost.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import backend.chunkers  # noqa: F401  (registers the chunkers)
from backend.chunkers import ModelContext, make_chunker
from backend.chunkers.semantic import (
    as_curve,
    cluster_segmentation,
    mean_threshold,
    piece_spans,
    regex_sentence_spans,
)
from backend.errors import ParameterError
from backend.text.document import Document
from backend.tokenizers import SpanCounter
from tests.backend.chunkers.test_semantic_chunkers import reference_segmentation, sample_prefix

SAMPLES = ("narrative", "technical", "chinese")


@pytest.fixture(scope="module")
def context(embedder):
    """The bundled embedder (the shared ``embedder`` fixture) and the test run's default cache."""
    return ModelContext(embedder=embedder, device="cpu")


# --- the reference code, transcribed ------------------------------------------------------------


def reference_cluster_segmentation(vectors: np.ndarray, max_cluster: int) -> list[tuple[int, int]]:
    """ClusterSemanticChunker._optimal_segmentation (transcribed once, in test_semantic_chunkers): inclusive piece ranges."""
    clusters, _dp = reference_segmentation(np.asarray(vectors, dtype=np.float64), max_cluster)
    return [(int(a), int(b)) for a, b in clusters]


def reference_bisection(distances: list[float], number_of_cuts: int) -> tuple[float, list[int]]:
    """KamradtModifiedChunker.split_text's threshold search: ``(threshold, indices_above_thresh)``."""
    lower_limit, upper_limit = 0.0, 1.0
    distances_np = np.array(distances)
    while upper_limit - lower_limit > 1e-6:
        threshold = (upper_limit + lower_limit) / 2.0
        if np.sum(distances_np > threshold) > number_of_cuts:
            lower_limit = threshold
        else:
            upper_limit = threshold
    return threshold, [i for i, x in enumerate(distances) if x > threshold]


def groups_to_spans(units, groups) -> list[tuple[int, int]]:
    return [(units[a][0], units[b][1]) for a, b in groups]


def cuts_to_groups(n: int, cuts: list[int]) -> list[tuple[int, int]]:
    """The reference's grouping: a chunk ends after each index in ``cuts``; the rest is the last chunk."""
    out, start = [], 0
    for index in cuts:
        out.append((start, index))
        start = index + 1
    if start < n:
        out.append((start, n - 1))
    return out


# --- cluster cap=pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES)
def test_cluster_pieces_mode_is_the_reference_segmentation(sample, context):
    doc = sample_prefix(sample)
    for max_chunk_size in (200, 250):
        chunker = make_chunker("cluster", {"max_chunk_size": max_chunk_size, "cap": "pieces"})
        got = [(c.start, c.end) for c in chunker.chunk(doc, context)]
        pieces = piece_spans(doc.text, SpanCounter(chunker.tokenizer, doc.text), 50)
        vectors = context.embed([doc.text[s:e] for s, e in pieces])  # from the cache: the chunker's vectors
        expected = reference_cluster_segmentation(vectors, max_chunk_size // 50)
        assert got == groups_to_spans(pieces, expected), (sample, max_chunk_size)
        assert len(expected) > 3


def test_the_reference_recursion_starts_a_chunk_at_piece_0_when_no_reward_is_positive():
    """Pieces A B A B C C, at most 2 a chunk: every pair within 2 pieces is below the mean except C C."""
    a, b, c = np.eye(3)
    vectors = np.array([a, b, a, b, c, c])
    ref = reference_cluster_segmentation(vectors, 2)
    assert ref == [(0, 3), (4, 5)]  # four pieces in the first chunk: no dp[i] rose above 0 before C C
    allowed = np.ones((6, 2), dtype=bool)
    assert cluster_segmentation(vectors, allowed, from_zero=True) == ref
    # The optimum: A B A B as four single pieces (reward 0 each, not negative) and C C together.
    assert cluster_segmentation(vectors, allowed) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 5)]
    # With no positive reward anywhere the reference makes one chunk of the whole document.
    alternating = np.array([a, b] * 4)
    assert reference_cluster_segmentation(alternating, 2) == [(0, 7)]
    assert cluster_segmentation(alternating, np.ones((8, 2), dtype=bool), from_zero=True) == [(0, 7)]


@pytest.mark.parametrize("seed", range(25))
def test_cluster_from_zero_equals_the_reference_on_random_vectors(seed):
    rng = np.random.default_rng(300 + seed)
    n, k = int(rng.integers(2, 40)), int(rng.integers(1, 9))
    vectors = rng.normal(size=(n, 6))
    if seed % 3 == 0:
        vectors += np.repeat(rng.normal(size=(4, 6)) * 2, -(-n // 4), axis=0)[:n]  # topics
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    got = cluster_segmentation(vectors, np.ones((n, k), dtype=bool), from_zero=True)
    assert got == reference_cluster_segmentation(vectors, k)


def test_cluster_pieces_mode_on_a_chunk_size_below_the_piece_size(context):
    """One piece a chunk at least (the reference's ``max_chunk_size // 50`` would be 0 pieces)."""
    doc = Document.from_text("Bread is made from flour. Rain fell all night. " * 6, source="t.txt")
    chunks = make_chunker("cluster", {"max_chunk_size": 30, "cap": "pieces"}).chunk(doc, context).chunks
    assert chunks and all(doc.text[c.start : c.end] == c.text for c in chunks)


# --- semantic_max search=mean ----------------------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES)
def test_semantic_max_mean_mode_is_the_reference_bisection(sample, context):
    doc = sample_prefix(sample)
    for chunk_size in (300, 100):
        chunker = make_chunker("semantic_max", {"chunk_size": chunk_size, "search": "mean"})
        got = [(c.start, c.end) for c in chunker.chunk(doc, context)]
        counter = SpanCounter(chunker.tokenizer, doc.text)
        units = piece_spans(doc.text, counter, 50)
        n = len(units)
        # Our windows (the text from the first to the last piece), buffer 3 as in the reference.
        windows = [doc.text[units[max(0, i - 3)][0] : units[min(n - 1, i + 3)][1]] for i in range(n)]
        v = np.asarray(context.embed(windows), dtype=np.float64)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        distances = [1 - float(v[i] @ v[i + 1]) for i in range(n - 1)]
        total_tokens = sum(chunker.tokenizer.count(doc.text[s:e]) for s, e in units)
        threshold, cuts = reference_bisection(distances, total_tokens // chunk_size)
        assert got == groups_to_spans(units, cuts_to_groups(n, cuts)), (sample, chunk_size)
        assert len(cuts) >= total_tokens // chunk_size - 2 and len(cuts) >= 2

        curve = chunker.distance_curve(doc)
        assert curve.rule == "mean" and curve.amount == chunk_size and curve.forced == ()
        assert curve.threshold == pytest.approx(threshold, abs=1e-9)
        label = as_curve(curve, got, "piece").threshold_label
        assert label == f"threshold: bisection for {chunk_size}-token chunks on average (the reference code)"


@pytest.mark.parametrize("seed", range(20))
def test_mean_threshold_equals_the_reference_bisection(seed):
    rng = np.random.default_rng(seed)
    d = rng.beta(2, 6, size=int(rng.integers(1, 80)))
    if seed % 4 == 0:
        d = np.round(d, 2)  # ties
    if seed % 5 == 0:
        d[:3] = [1.02, -1e-9, 0.0][: min(3, d.size)]  # outside [0, 1], as float rounding and opposite vectors give
    total, avg = int(rng.integers(10, 5000)), int(rng.integers(20, 500))
    threshold, cuts = reference_bisection(list(d), total // avg)
    assert mean_threshold(d, total, avg) == threshold
    assert list(np.flatnonzero(d > mean_threshold(d, total, avg))) == cuts


# --- semantic split=regex --------------------------------------------------------------------------

REGEX_TEXT = (
    "  Dr. Smith arrived at 9 a.m. and left early!  Why?\n\nThe committee met on Tuesday. "
    "It approved the budget for the new library.  北京是中国的首都。上海很大。 Rain fell all night.\t"
)


def test_regex_sentences_are_langchains_as_exact_spans():
    spans = regex_sentence_spans(REGEX_TEXT)
    expected = [p.strip() for p in re.split(r"(?<=[.?!])\s+", REGEX_TEXT) if p.strip()]
    assert [REGEX_TEXT[s:e] for s, e in spans] == expected
    # Not the document's sentences: "Dr." alone, and no cut after a Chinese full stop.
    assert expected[0] == "Dr." and "北京是中国的首都。上海很大。 Rain fell all night." in expected
    assert regex_sentence_spans("") == [] and regex_sentence_spans("One. ") == [(0, 4)]


def test_semantic_regex_split_cuts_between_langchains_sentences(context):
    doc = Document.from_text(REGEX_TEXT * 3, source="t.txt")
    chunker = make_chunker("semantic", {"split": "regex", "amount": 70})
    chunker.context = context
    curve = chunker.distance_curve(doc)
    assert list(curve.units) == regex_sentence_spans(doc.text)
    chunks = chunker.chunk(doc, context).chunks
    assert [c.end for c in chunks[:-1]] == [curve.units[i][1] for i in curve.breakpoints]
    assert chunks[0].start == curve.units[0][0] and chunks[-1].end == curve.units[-1][1]
    blank = Document.from_text(" \n ", source="t.txt")
    assert make_chunker("semantic", {"split": "regex"}).chunk(blank, context).chunks == ()


# --- the defaults --------------------------------------------------------------------------------


def test_the_defaults_are_unchanged_and_a_bad_mode_is_named():
    assert make_chunker("cluster").values["cap"] == "tokens"
    with pytest.raises(ParameterError, match="cap must be one of tokens, pieces"):
        make_chunker("cluster", {"cap": "chars"})
    assert make_chunker("semantic_max").values["search"] == "cap"
    with pytest.raises(ParameterError, match="search must be one of cap, mean"):
        make_chunker("semantic_max", {"search": "median"})
    assert make_chunker("semantic").values["split"] == "document"
    with pytest.raises(ParameterError, match="split must be one of document, regex"):
        make_chunker("semantic", {"split": "nltk"})
