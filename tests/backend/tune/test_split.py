"""The tuning/held-out split: seeded, stratified by corpus, disjoint, never empty on either side."""

from __future__ import annotations

import pytest

from backend.errors import ParameterError
from backend.tune.split import split_questions, subset


def test_a_split_is_disjoint_complete_and_seeded():
    corpora = ["a"] * 9 + ["b"] * 4 + ["c"] * 2 + ["d"]
    for seed in range(30):
        s = split_questions(corpora, seed=seed)
        assert set(s.tuning).isdisjoint(s.held_out)
        assert sorted(s.tuning + s.held_out) == list(range(len(corpora)))
        assert s == split_questions(corpora, seed=seed)
        held = [corpora[i] for i in s.held_out]
        # Per corpus: a third held out, at least one where there are two or more, never all of them.
        assert (held.count("a"), held.count("b"), held.count("c"), held.count("d")) == (3, 1, 1, 0)
    assert len({split_questions(corpora, seed=k).held_out for k in range(30)}) > 5


def test_a_set_too_small_to_hold_out_is_refused():
    with pytest.raises(ParameterError, match="at least 2 questions"):
        split_questions(["a"])
    with pytest.raises(ParameterError, match="at least 2 questions to hold some out"):
        split_questions(["a", "b", "c"])


def test_the_pruners_subset_is_a_seeded_third_of_the_tuning_questions():
    tuning = (0, 2, 3, 5, 7, 8, 10, 11, 13)
    first, rest = subset(tuning, seed=4)
    assert len(first) == 3 and set(first) | set(rest) == set(tuning) and not set(first) & set(rest)
    assert subset(tuning, seed=4) == (first, rest)
    assert subset((7,), seed=0) == ((7,), ())
