"""Meta-Chunking's rules, combination and margin-sampling loop (pure functions, no model).

The boundary rules are checked against small hand-worked sequences and against a literal,
independent transcription of the issue's two rules on random sequences with ties.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.chunkers.meta.algorithms import (
    Boundaries,
    Candidate,
    boundaries_at,
    boundary_candidates,
    chunk_count_curve,
    combine,
    find_minima,
    margin_messages,
    margin_sampling_steps,
    meta_chunk_ranges,
    overlap_ranges,
    ranges_from_steps,
    sentence_values,
    suggest_thresholds,
    theta_curve,
    theta_grid,
)
from backend.errors import ParameterError
from backend.text.document import Document
from backend.tokenizers import SpanCounter, get_tokenizer


def literal_reference(v, theta):
    """The authors' find_minima, transcribed from the issue."""
    out = []
    for i in range(1, len(v) - 1):
        if v[i] < v[i - 1] and v[i] < v[i + 1]:
            if v[i - 1] - v[i] >= theta or v[i + 1] - v[i] >= theta:
                out.append(i)
        elif v[i] < v[i - 1] and v[i] == v[i + 1]:
            if v[i - 1] - v[i] >= theta:
                out.append(i)
    return out


def literal_paper(v, theta):
    """Eq. 3 as printed, transcribed from the issue (nan: never a boundary)."""
    out = []
    for i in range(1, len(v) - 1):
        if any(math.isnan(x) for x in (v[i - 1], v[i], v[i + 1])):
            continue
        if min(v[i - 1], v[i + 1]) - v[i] > theta or (v[i - 1] - v[i] > theta and v[i + 1] == v[i]):
            out.append(i)
    return out


def test_reference_rule_on_a_worked_example():
    v = [5.0, 3.0, 4.0, 2.0, 2.0, 6.0, 5.5, 7.0]
    # 1: min, drops 2 and 1; 3: plateau, drop 2; 6: min, drops 0.5 and 1.5.
    assert find_minima(v, 0) == [1, 3, 6]
    assert find_minima(v, 1.5) == [1, 3, 6]  # the larger drop counts, and >= keeps it
    assert find_minima(v, 1.75) == [1, 3]
    assert find_minima(v, 2.0) == [1, 3]
    assert find_minima(v, 2.01) == []
    assert [(c.index, c.drop) for c in boundary_candidates(v)] == [(1, 2.0), (3, 2.0), (6, 1.5)]


def test_paper_rule_on_the_same_example():
    v = [5.0, 3.0, 4.0, 2.0, 2.0, 6.0, 5.5, 7.0]
    # 1: smaller drop 1; 3: plateau, drop 2; 6: smaller drop 0.5; > is strict.
    assert find_minima(v, 0, "paper") == [1, 3, 6]
    assert find_minima(v, 0.5, "paper") == [1, 3]
    assert find_minima(v, 1.0, "paper") == [3]
    assert find_minima(v, 2.0, "paper") == []
    # a negative θ also cuts where the value does not dip (eq. 3 read literally)
    assert find_minima(v, -1.0, "paper") == literal_paper(v, -1.0) == [1, 3, 4, 6]


def test_the_first_and_last_sentences_never_close_a_chunk():
    assert find_minima([1.0, 5.0, 0.5], 0) == []
    assert find_minima([0.5], 0) == []
    assert find_minima([], 0) == []


def test_nan_is_never_a_minimum_nor_makes_one():
    nan = math.nan
    v = [5.0, nan, 4.0, 1.0, 3.0, 2.0, nan]
    assert find_minima(v, 0) == literal_reference(v, 0) == [3]
    assert find_minima(v, 0, "paper") == literal_paper(v, 0) == [3]


def test_sentence_values_nll_or_ppl_and_none_as_nan():
    v = sentence_values([1.0, None, 2.0], "nll")
    assert v[0] == 1.0 and math.isnan(v[1]) and v[2] == 2.0
    p = sentence_values([1.0, 2.0], "ppl")
    assert p.tolist() == [math.exp(1.0), math.exp(2.0)]
    with pytest.raises(ParameterError, match="value must be one of"):
        sentence_values([1.0], "bits")
    with pytest.raises(ParameterError, match="rule must be one of"):
        find_minima([1.0, 0.0, 1.0], 0, "loose")


values = st.lists(st.integers(0, 6).map(lambda k: k / 2), min_size=0, max_size=40)
thetas = st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 2.5, 10.0])


@settings(max_examples=400, deadline=None)
@given(values, thetas)
def test_both_rules_match_literal_transcriptions(v, theta):
    assert find_minima(v, theta, "reference") == literal_reference(v, theta)
    assert find_minima(v, theta, "paper") == literal_paper(v, theta)


@settings(max_examples=200, deadline=None)
@given(values, thetas, st.sampled_from(["reference", "paper"]))
def test_chunk_count_curve_equals_rechunking(v, theta, rule):
    cands = boundary_candidates(v, rule)
    expected = len(meta_chunk_ranges(len(v), find_minima(v, theta, rule)))
    assert int(chunk_count_curve(cands, [theta], rule, len(v))[0]) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.data())
def test_ranges_cover_every_sentence_once_and_overlap_by_the_minimum(n, data):
    minima = sorted(data.draw(st.sets(st.integers(1, max(1, n - 2)))) if n >= 3 else [])
    ranges = meta_chunk_ranges(n, minima)
    covered = [i for a, b in ranges for i in range(a, b + 1)]
    assert covered == list(range(n))
    assert [b for _, b in ranges[:-1]] == minima
    over = overlap_ranges(n, minima)
    assert len(over) == len(ranges)
    for (a1, b1), (a2, _b2) in zip(over, over[1:]):
        assert a2 == b1  # the minimum sentence belongs to both chunks
    if n:
        assert over[0][0] == 0 and over[-1][1] == n - 1


def test_suggested_slider_reaches_past_the_largest_drop():
    cands = boundary_candidates([9.0, 0.5, 8.0, 7.0, 7.2, 3.0, 4.0], "reference")
    low, high, step = suggest_thresholds(cands)
    assert low <= 0 < step
    assert high > max(c.drop for c in cands)  # 8.5 here: the reference demo's slider stopped at 1
    assert find_minima([9.0, 0.5, 8.0, 7.0, 7.2, 3.0, 4.0], high) == []


def test_combine_respects_the_target_except_single_oversized_units():
    text = " ".join(f"Sentence number {i} says something{' long' * (i % 7) * 9}." for i in range(60))
    doc = Document.from_text(text)
    tok = get_tokenizer("cl100k")
    counter = SpanCounter(tok, text)
    units = [(s.start, s.end) for s in doc.sentences]
    unit_counts = counter.count_many(units)
    for target in (5, 20, 37, 80, 400):
        merged = combine(text, units, counter, target)
        starts = {a for a, _ in units}
        ends = {b for _, b in units}
        for a, b, n in merged:
            assert a in starts and b in ends
            assert n == tok.count(text[a:b])
            if n > target:  # only a single meta-chunk may exceed the target
                assert (a, b) in units
        # greedy: no two neighbours could have been merged under the target
        for (a, _, n1), (_, b, n2) in zip(merged, merged[1:]):
            assert tok.count(text[a:b]) > target or n1 + n2 > target
        assert sum(unit_counts) >= 0
    with pytest.raises(ParameterError):
        combine(text, units, counter, 0)


def test_margin_loop_threshold_follows_the_last_five_margins():
    margins = {1: 0.5, 2: -0.2, 3: 0.1, 4: 0.3, 5: -0.4, 6: 0.0, 7: 0.2, 8: -0.1}
    seen = []

    def margin_of(ctx, i):
        seen.append((ctx, i))
        return margins[i]

    steps = margin_sampling_steps(9, margin_of, "sentence")
    assert [s.index for s in steps] == list(range(1, 9))
    assert seen == [(i - 1, i) for i in range(1, 9)]
    # threshold 0 until five margins are known, then their running mean (current included)
    assert [s.threshold for s in steps[:5]] == [0.0] * 5
    assert steps[5].threshold == pytest.approx(np.mean([0.5, -0.2, 0.1, 0.3, -0.4]))
    assert steps[6].threshold == pytest.approx(np.mean([-0.2, 0.1, 0.3, -0.4, 0.0]))
    assert all(s.split == (s.margin >= s.threshold) for s in steps)
    assert ranges_from_steps(9, steps)[0][0] == 0 and ranges_from_steps(9, steps)[-1][1] == 8


def test_margin_loop_in_chunk_unit_compares_with_the_chunk_so_far():
    margins = {1: -1.0, 2: -1.0, 3: 1.0, 4: -1.0}
    seen = []
    steps = margin_sampling_steps(5, lambda ctx, i: seen.append((ctx, i)) or margins[i], "chunk")
    assert seen == [(0, 1), (0, 2), (0, 3), (3, 4)]
    assert ranges_from_steps(5, steps) == [(0, 2), (3, 4)]
    with pytest.raises(ParameterError):
        margin_sampling_steps(3, lambda c, i: 0.0, "word")


def test_margin_prompt_english_and_chinese():
    en = margin_messages("A.", "B.", "A. B.", "en")
    assert en[0]["role"] == "system" and en[1]["role"] == "user"
    assert 'Split "A. B." into "A." and "B." two parts' in en[1]["content"]
    assert en[1]["content"].endswith("Please answer 1 or 2.")
    zh = margin_messages("甲。", "乙。", "甲。乙。", "zh")
    assert "将“甲。乙。”分割成“甲。”与“乙。”两部分" in zh[1]["content"]
    assert zh[1]["content"].endswith("请回答1或2。")


# --- what the PPL page shows of a θ (moved from components/ppl.py and pages/ppl.py) ---------------

PINNED = [3.0, 1.0, 1.25, 0.75, 2.5, 2.0, 2.25]  # reference drops: 1 → 2.0, 3 → 1.75, 5 → 0.5


def test_boundaries_at_pins_the_cuts_and_the_drawn_minima():
    reference = boundaries_at(boundary_candidates(PINNED, "reference"), 0.6, "reference")
    assert reference == Boundaries(
        0.6, "reference", (1, 3), (Candidate(1, 2.0), Candidate(3, 1.75), Candidate(5, 0.5)), 3
    )
    # A negative θ under the paper rule cuts at sentence 2, which is no minimum: drawn because it cuts.
    paper = boundaries_at(boundary_candidates(PINNED, "paper"), -0.6, "paper")
    assert paper == Boundaries(
        -0.6, "paper", (1, 2, 3, 5), (Candidate(1, 0.25), Candidate(2, -0.5), Candidate(3, 0.5), Candidate(5, 0.25)), 3
    )
    assert list(paper.kept) == find_minima(PINNED, -0.6, "paper")
    with pytest.raises(ParameterError, match="rule must be one of"):
        boundaries_at([], 0.0, "loose")


def test_theta_curve_pins_grid_counts_lengths_and_the_aim():
    candidates = boundary_candidates(PINNED, "reference")
    assert theta_grid(candidates, 0.0, 2.0, 5).tolist() == [0.0, 0.5, 1.0, 1.5, 1.75, 2.0]  # + the drop 1.75
    curve = theta_curve(candidates, "reference", len(PINNED), 30, 0.0, 2.0, 5)
    assert (curve.thresholds.tolist(), curve.counts.tolist(), curve.mean_tokens.tolist()) == (
        [0.0, 0.5, 1.0, 1.5, 1.75, 2.0], [4, 4, 3, 3, 3, 2], [7.5, 7.5, 10.0, 10.0, 10.0, 15.0]
    )
    assert curve.theta_for_length(12) == (1.0, 10.0)  # nearest length, the smallest θ on a tie
    assert curve.theta_for_length(1_000_000) == (2.0, 15.0)  # unreachable: the nearest reachable
    empty = theta_curve([], "reference", 0, 0, 0.0, 1.0, 0)
    with pytest.raises(ParameterError, match="no point"):
        empty.theta_for_length(10)
