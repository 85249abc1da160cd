"""Span metrics of the Chroma report, excerpt search, chunking agreement and coverage.

Small cases are computed by hand; random spans are cross-checked against
:func:`reference_scores`, a plain procedural re-implementation of the reference code's loop
(chunks × references, intersections removed from the "unused" excerpt ranges one by one,
running unions), written independently of ``backend.retrieval.metrics``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.errors import ParameterError
from backend.retrieval.metrics import (
    ExcerptFinder,
    ExcerptMatch,
    agreement_matrices,
    boundary_iou,
    containing_chunks,
    coverage_profile,
    find_excerpt,
    precision_omega,
    reference_chunk_spans,
    retrieval_coverage,
    score_retrieval,
    span_overlap_similarity,
    span_scores,
    union_ranges,
)

# --- an independent re-implementation of the reference's procedure ---------------------------


def _merge(ranges):
    out = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _length(ranges):
    return sum(e - s for s, e in ranges)


def _meet(a, b):
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def _cut(ranges, cut):
    """Remove ``cut`` from every range (pieces of zero length may remain; they weigh nothing)."""
    out = []
    for s, e in ranges:
        if e <= cut[0] or s >= cut[1]:
            out.append((s, e))
            continue
        if s < cut[0]:
            out.append((s, cut[0]))
        if e > cut[1]:
            out.append((cut[1], e))
    return out


def reference_scores(retrieved, excerpts, other=0):
    """(recall, precision, iou) the way the reference loop computes them."""
    numerator, unused = [], list(excerpts)
    for chunk in retrieved:
        for ref in excerpts:
            inter = _meet(chunk, ref)
            if inter is not None:
                unused = _cut(unused, inter)
                numerator = _merge([inter] + numerator)
    num = _length(numerator)
    rec_den = _length(excerpts)
    prec_den = _length(retrieved) + other
    iou_den = prec_den + _length(unused)
    div = lambda a, b: a / b if b else 0.0  # noqa: E731
    return div(num, rec_den), div(num, prec_den), div(num, iou_den)


def reference_omega(chunks, excerpts):
    numerator, den_chunks, unused, count = [], [], list(excerpts), 0
    for chunk in chunks:
        hit = False
        for ref in excerpts:
            inter = _meet(chunk, ref)
            if inter is not None:
                hit = True
                unused = _cut(unused, inter)
                numerator = _merge([inter] + numerator)
                den_chunks = _merge([chunk] + den_chunks)
        count += hit
    den = _merge(den_chunks + unused)
    return (_length(numerator) / _length(den) if numerator and _length(den) else 0.0), count


# --- hand-computed cases ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retrieved", "excerpts", "other", "expected"),
    [
        ([(0, 10)], [(5, 15)], 0, (0.5, 0.5, 5 / 15)),  # half of each; 5 excerpt chars missed
        ([(0, 10), (5, 15)], [(8, 12)], 0, (1.0, 4 / 20, 4 / 20)),  # overlap counted twice in the denominators
        ([(0, 20)], [(0, 10), (5, 15)], 0, (15 / 20, 15 / 20, 15 / 20)),  # overlapping excerpts: summed, not united
        ([(0, 10)], [(0, 10)], 30, (1.0, 10 / 40, 10 / 40)),  # 30 characters retrieved from another corpus
        ([(20, 30)], [(0, 10)], 0, (0.0, 0.0, 0.0)),
        ([], [(0, 10)], 0, (0.0, 0.0, 0.0)),  # nothing retrieved: 0, not a division by zero
        ([(10, 20)], [(0, 10)], 0, (0.0, 0.0, 0.0)),  # touching is not overlapping
    ],
)
def test_span_scores_hand_computed(retrieved, excerpts, other, expected):
    s = span_scores(retrieved, excerpts, other_chars=other)
    assert (s.recall, s.precision, s.iou) == pytest.approx(expected)


def test_precision_omega_hand_computed():
    chunks = [(0, 10), (10, 20), (20, 30)]
    assert precision_omega(chunks, [(12, 18)]) == pytest.approx(6 / 10)
    assert containing_chunks(chunks, [(12, 18)]) == [1]
    # The reference's closed-interval test: chunk (0, 10) "meets" an excerpt starting at 10.
    assert containing_chunks(chunks, [(10, 15)]) == [0, 1]
    assert precision_omega(chunks, [(10, 15)]) == pytest.approx(5 / 20)
    # An excerpt partly outside every chunk (a gap): its uncovered part joins the denominator.
    assert precision_omega([(0, 10)], [(5, 15)]) == pytest.approx(5 / 15)
    assert precision_omega([(0, 10), (20, 30)], [(40, 50)]) == 0.0


def test_metrics_need_an_excerpt():
    with pytest.raises(ParameterError, match="at least one excerpt"):
        span_scores([(0, 1)], [])
    with pytest.raises(ParameterError, match="at least one excerpt"):
        precision_omega([(0, 1)], [])


def test_union_ranges_merges_overlapping_and_touching():
    assert union_ranges([(5, 8), (0, 3), (3, 4), (7, 10), (12, 12)]) == [(0, 4), (5, 10)]


# --- cross-check on random spans -------------------------------------------------------------


def _random_ranges(rng: random.Random, n: int, limit: int = 200, max_len: int = 40):
    out = []
    for _ in range(n):
        s = rng.randrange(0, limit)
        out.append((s, min(limit, s + rng.randrange(1, max_len))))
    return out


@pytest.mark.parametrize("seed", range(300))
def test_span_scores_match_the_reference_procedure(seed):
    rng = random.Random(seed)
    retrieved = _random_ranges(rng, rng.randrange(0, 8))
    excerpts = _random_ranges(rng, rng.randrange(1, 5))
    other = rng.choice([0, 0, rng.randrange(1, 100)])
    s = span_scores(retrieved, excerpts, other_chars=other)
    assert (s.recall, s.precision, s.iou) == pytest.approx(reference_scores(retrieved, excerpts, other), abs=1e-12)


@pytest.mark.parametrize("seed", range(300))
def test_precision_omega_matches_the_reference_procedure(seed):
    rng = random.Random(seed)
    # A chunking: consecutive spans with random gaps and overlaps, sorted by start.
    chunks, at = [], 0
    while at < 300:
        start = max(0, at + rng.randrange(-10, 5))
        end = start + rng.randrange(1, 40)
        chunks.append((start, end))
        at = end
    excerpts = _random_ranges(rng, rng.randrange(1, 4), limit=300)
    omega, count = reference_omega(chunks, excerpts)
    assert precision_omega(chunks, excerpts) == pytest.approx(omega, abs=1e-12)
    assert len(containing_chunks(chunks, excerpts)) == count


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), max_size=6),
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), min_size=1, max_size=4),
)
def test_scores_agree_with_character_sets(raw_retrieved, raw_excerpts):
    retrieved = [(s, s + n) for s, n in raw_retrieved]
    excerpts = [(s, s + n) for s, n in raw_excerpts]
    r_chars = {i for s, e in retrieved for i in range(s, e)}
    e_chars = {i for s, e in excerpts for i in range(s, e)}
    num = len(r_chars & e_chars)
    s = span_scores(retrieved, excerpts)
    assert s.recall == pytest.approx(num / sum(e - b for b, e in excerpts))
    assert 0.0 <= s.iou <= s.precision <= 1.0
    assert 0.0 <= s.recall <= 1.0


# --- excerpt search --------------------------------------------------------------------------

TEXT = "Alpha beta.  Gamma\n\ndelta epsilon.\tZeta eta theta. Gamma delta."


def test_find_excerpt_exact_first():
    m = find_excerpt(TEXT, "Gamma delta")
    assert m == ExcerptMatch(TEXT.index("Gamma delta"), TEXT.index("Gamma delta") + 11, True)


@pytest.mark.parametrize(
    ("excerpt", "expected"),
    [
        ("beta. Gamma delta epsilon.", "beta.  Gamma\n\ndelta epsilon."),
        ("epsilon. Zeta", "epsilon.\tZeta"),
        ("  Gamma\ndelta  ", "Gamma\n\ndelta"),  # surrounding whitespace of the excerpt is not required
        ("Alphabeta.", "Alpha beta."),  # whitespace-insensitive both ways
    ],
)
def test_find_excerpt_whitespace_insensitive_has_exact_offsets(excerpt, expected):
    m = find_excerpt(TEXT, excerpt)
    assert m is not None and not m.exact
    assert TEXT[m.start : m.end] == expected


@pytest.mark.parametrize("excerpt", ["gamma delta", "Omega", "", "   ", "beta. Gamma delta epsilon!"])
def test_find_excerpt_misses(excerpt):
    assert find_excerpt(TEXT, excerpt) is None


def test_finder_reuses_its_offset_map_and_searches_from_an_offset():
    finder = ExcerptFinder(TEXT)
    first = finder.find("Gamma")
    second = finder.find("Gamma", first.end)
    assert (first.start, second.start) == (TEXT.index("Gamma"), TEXT.rindex("Gamma"))
    assert finder.find("Gamma\ndelta", first.end) is not None  # the second "Gamma delta" (exact space)
    text = "x\u00a0y \u2028z"  # non-ASCII whitespace counts as whitespace
    assert ExcerptFinder(text).find("x y z") == ExcerptMatch(0, len(text), False)


# --- agreement and coverage ------------------------------------------------------------------


def test_boundary_iou():
    assert boundary_iou([10, 20, 30], [11, 20, 40]) == pytest.approx(1 / 5)
    assert boundary_iou([10, 20, 30], [11, 20, 40], tolerance=1) == pytest.approx(2 / 4)
    assert boundary_iou([10, 20, 30], [11, 20, 40], tolerance=10) == pytest.approx(1.0)
    assert boundary_iou([], []) == 1.0
    assert boundary_iou([5], []) == 0.0
    # One-to-one: two boundaries near one other boundary match only once.
    assert boundary_iou([10, 12], [11], tolerance=2) == pytest.approx(1 / 2)
    with pytest.raises(ParameterError, match="tolerance"):
        boundary_iou([1], [1], tolerance=-1)


def test_span_overlap_similarity():
    a = [(0, 10), (10, 20)]
    assert span_overlap_similarity(a, a) == 1.0
    assert span_overlap_similarity(a, [(0, 20)]) == pytest.approx(0.5)
    assert span_overlap_similarity([(0, 10)], [(20, 30)]) == 0.0
    assert span_overlap_similarity([], []) == 1.0
    assert span_overlap_similarity(a, []) == 0.0
    # Overlapping chunks (ends not sorted with starts) are still matched.
    b = [(0, 30), (5, 10), (12, 20)]
    a_to_b = (10 * 0.5 + 10 * 0.8) / 20  # (0, 10) best with (5, 10); (10, 20) best with (12, 20)
    b_to_a = (30 * (10 / 30) + 5 * 0.5 + 8 * 0.8) / 43
    assert span_overlap_similarity(a, b) == pytest.approx((a_to_b + b_to_a) / 2)


def test_retrieval_coverage_counts_each_question_once_per_character():
    cov = retrieval_coverage(10, [[(0, 5), (3, 7)], [(6, 10)], []])
    assert cov.tolist() == [1, 1, 1, 1, 1, 1, 2, 1, 1, 1]
    assert retrieval_coverage(4, [[(2, 99)]]).tolist() == [0, 0, 1, 1]
    prof = coverage_profile(cov, 2)
    assert prof.tolist() == pytest.approx([1.0, 1.2])
    assert coverage_profile(np.zeros(0, dtype=np.int32), 5).size == 0
    with pytest.raises(ParameterError):
        coverage_profile(cov, 0)


def test_score_retrieval_has_all_four_metrics():
    s = score_retrieval([(10, 20)], [(0, 10), (10, 20), (20, 30)], [(12, 18)])
    assert s.to_json() == pytest.approx({"recall": 1.0, "precision": 0.6, "precision_omega": 0.6, "iou": 0.6})


def test_agreement_matrices_of_real_chunkings():
    from backend.chunkers import run_chunker
    from backend.chunking import ChunkerConfig
    from backend.text.document import Document

    doc = Document.from_text(TEXT * 20, source="t.txt")
    chunkings = [
        run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 20})),
        run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 20})),
        run_chunker(doc, ChunkerConfig.make("fixed_token", {"chunk_size": 15})),
    ]
    bounds, overlap = agreement_matrices(chunkings, tolerance=3)
    assert bounds.shape == overlap.shape == (3, 3)
    assert np.allclose(np.diag(bounds), 1) and np.allclose(bounds, bounds.T) and np.allclose(overlap, overlap.T)
    assert bounds[0, 1] == 1.0 and overlap[0, 1] == 1.0
    assert bounds[0, 2] == pytest.approx(boundary_iou(chunkings[0].boundaries, chunkings[2].boundaries, 3))
    assert 0 < overlap[0, 2] < 1
    other = run_chunker(Document.from_text("Another text.", source="o.txt"), ChunkerConfig.make("recursive"))
    with pytest.raises(ParameterError, match="same document"):
        agreement_matrices([chunkings[0], other])


# --- where the reference scores a chunk ------------------------------------------------------

# Four sentence chunks; the first and third have the same text.
LOCATE_TEXT = "Alpha beta gamma. Delta epsilon. Alpha beta gamma. Zeta eta"
LOCATE_CHUNKS = [(0, 17), (18, 32), (33, 50), (51, 59)]


def _rigorous_exact(document, target):
    """The reference's rigorous_document_search when the target is in the document, verbatim in effect."""
    if target.endswith("."):
        target = target[:-1]
    start = document.find(target)
    return start, start + len(target)


def test_reference_chunk_spans_drop_a_final_period_and_take_the_first_occurrence():
    got = reference_chunk_spans(LOCATE_TEXT, LOCATE_CHUNKS)
    assert got == [(0, 16), (18, 31), (0, 16), (51, 59)]
    assert got == [_rigorous_exact(LOCATE_TEXT, LOCATE_TEXT[s:e]) for s, e in LOCATE_CHUNKS]
    assert reference_chunk_spans("a. b.", [(0, 2), (1, 2)]) == [(0, 1), (0, 0)]  # "." alone: empty at 0
    assert reference_chunk_spans("", []) == []


@pytest.mark.parametrize(
    ("chunk", "excerpt", "exact", "located"),
    [
        # the excerpt's final period is outside the located chunk: 13 of 14 characters
        (1, (18, 32), (1.0, 1.0, 1.0), (13 / 14, 13 / 13, 13 / 14)),
        # the second "Alpha beta gamma." is scored at the first one: it misses its own excerpt
        (2, (33, 50), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0)),
        # no period: both ways agree
        (3, (51, 59), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0)),
    ],
)
def test_a_question_scored_on_exact_and_on_reference_spans(chunk, excerpt, exact, located):
    spans = reference_chunk_spans(LOCATE_TEXT, LOCATE_CHUNKS)
    for retrieved, expected in (([LOCATE_CHUNKS[chunk]], exact), ([spans[chunk]], located)):
        s = span_scores(retrieved, [excerpt])
        assert (s.recall, s.precision, s.iou) == pytest.approx(expected)
        assert reference_scores(retrieved, [excerpt]) == pytest.approx(expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["ab", "a.", ".", "b ", "ab."]), min_size=1, max_size=12), st.data())
def test_reference_chunk_spans_match_the_reference_search(pieces, data):
    text = "".join(pieces)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))) | {0, len(text)})
    spans = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    assert reference_chunk_spans(text, spans) == [_rigorous_exact(text, text[a:b]) for a, b in spans]
