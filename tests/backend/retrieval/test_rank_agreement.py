"""Rank agreement of two question sets (pure numpy) and the warning a page shows for a method known to rank recall poorly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from backend.errors import ParameterError
from backend.retrieval.agreement import EVIDENCE, method_warning, rank_agreement, ranks, spearman


def test_ranks_share_ties_and_spearman_matches_scipy() -> None:
    assert ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = rng.integers(0, 4, size=7).astype(float), rng.normal(size=7)
        if len(set(a)) > 1:
            assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert math.isnan(spearman(np.ones(5), np.arange(5.0)))  # one side constant: no ρ
    rows = spearman(np.array([[1.0, 2, 3], [3, 2, 1]]), np.array([[1.0, 2, 3], [1, 2, 3]]))
    assert rows.tolist() == [1.0, -1.0]  # along the last axis, row by row


def _scores(means: list[float], questions: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array(means)[:, None] + rng.normal(0, noise, size=(len(means), questions))


def test_clear_orders_agree_or_disagree_with_a_tight_interval_and_noise_widens_it() -> None:
    means = [0.1, 0.2, 0.3, 0.4, 0.5]
    same = rank_agreement("iou", _scores(means, 40, 0.02, 1), _scores(means, 30, 0.02, 2), draws=500)
    assert same.rho == 1.0 and same.low > 0.8 and same.high == 1.0 and same.undefined == 0
    assert same.questions == (40, 30) and same.configurations == 5 and same.interval.startswith("[+")
    reverse = rank_agreement("iou", _scores(means, 40, 0.02, 1), _scores(means[::-1], 30, 0.02, 2), draws=500)
    assert reverse.rho == -1.0 and reverse.high < -0.8
    noisy = rank_agreement("recall", _scores(means, 8, 1.0, 1), _scores(means, 8, 1.0, 2), draws=500)
    assert noisy.high - noisy.low > 1.0  # eight noisy questions a side: the order is barely set
    again = rank_agreement("recall", _scores(means, 8, 1.0, 1), _scores(means, 8, 1.0, 2), draws=500)
    assert (again.low, again.high) == (noisy.low, noisy.high)  # seeded


def test_a_set_that_scores_every_configuration_alike_has_no_rho() -> None:
    flat = rank_agreement("recall", _scores([0.1, 0.2, 0.3], 10, 0.01, 1), np.ones((3, 10)), draws=100)
    assert math.isnan(flat.rho) and flat.undefined == 100 and flat.interval == "no interval"
    assert flat.to_json()["rho"] is None and flat.to_json()["undefined_draws"] == 100


def test_bad_shapes_and_numbers_are_parameter_errors() -> None:
    good = np.zeros((3, 4))
    with pytest.raises(ParameterError, match="at least 3 configurations"):
        rank_agreement("iou", np.zeros((2, 4)), np.zeros((2, 4)))
    with pytest.raises(ParameterError, match="same configurations"):
        rank_agreement("iou", good, np.zeros((4, 4)))
    with pytest.raises(ParameterError, match="at least one question"):
        rank_agreement("iou", good, np.zeros((3, 0)))
    with pytest.raises(ParameterError, match="confidence"):
        rank_agreement("iou", good, good, confidence=1.5)


def test_a_page_warns_only_for_a_method_measured_to_rank_recall_poorly() -> None:
    line = method_warning("model-free keywords")
    assert line is not None and "−0.36" not in line and "-0.36" in line and "recall" in line
    assert method_warning("hand-written + model-free keywords") == line  # a merged set with such questions
    assert method_warning("hand-written") is None and method_warning("") is None and method_warning("chat") is None
    for method, known in EVIDENCE.items():
        assert (method_warning(method) is not None) == known.ranks_recall_poorly, method
