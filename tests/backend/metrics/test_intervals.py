"""The bootstrap intervals over questions: seeded, honest at the edges, paired."""

import math

import numpy as np
import pytest

from backend.metrics.intervals import Interval, mean_interval, paired_difference, paired_leaders


def test_the_same_scores_and_seed_give_the_same_interval_and_another_seed_moves_it_a_little():
    xs = list(np.random.default_rng(1).random(30))
    a, b = mean_interval(xs, seed=3), mean_interval(xs, seed=3)
    assert a == b
    c = mean_interval(xs, seed=4)
    assert c.mean == a.mean and (c.low, c.high) != (a.low, a.high)
    assert a.low < a.mean < a.high and a.n == 30


def test_one_question_gives_the_whole_range_not_a_point():
    assert mean_interval([0.4]) == Interval(0.4, 0.0, 1.0, 1)
    d = paired_difference([0.4], [0.1])
    assert d.low == -math.inf and d.high == math.inf and not d.excludes_zero()


def test_a_paired_difference_sees_a_small_consistent_gain_that_unpaired_intervals_overlap_on():
    rng = np.random.default_rng(0)
    base = rng.random(40)
    better = base + 0.02 + rng.normal(0, 0.005, 40)
    a, b = mean_interval(better), mean_interval(base)
    assert a.low < b.high  # the two means' intervals overlap…
    assert paired_difference(better, base).excludes_zero()  # …but every question gained
    assert paired_leaders({"base": base, "better": better}) == ("better",)
    assert set(paired_leaders({"x": base, "y": list(base)})) == {"x", "y"}


def test_unpaired_lengths_and_round_trip():
    with pytest.raises(ValueError, match="same questions"):
        paired_difference([0.1, 0.2], [0.1])
    iv = paired_difference([0.1], [0.0])
    assert Interval.from_json(iv.to_json()) == iv
