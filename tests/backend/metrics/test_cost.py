"""The cost of scoring for the quality metrics (backend/metrics/cost.py): passes, tokens, time, measured speed."""

from __future__ import annotations

import pytest

from backend.metrics.cost import DEFAULT_TOKENS_PER_S, Throughput, cost_estimate, format_seconds
from backend.metrics.quality import estimate_cost


def test_cost_is_the_sum_of_the_backend_estimates() -> None:
    counts = [[10, 20, 30], [5, 5, 5, 5]]
    got = cost_estimate(counts, complete=True, window=1, tokens_per_s=100.0)
    want = [estimate_cost(c, complete=True, window=1) for c in counts]
    assert got["pairs"] == sum(w["pairs"] for w in want)
    assert got["tokens"] == sum(w["tokens"] for w in want)
    assert got["seconds"] == pytest.approx(got["tokens"] / 100.0)
    assert cost_estimate([[10, 20, 30]], complete=False, window=None, tokens_per_s=50.0) == {
        "pairs": 5, "tokens": 143, "seconds": 2.86,
    }


def test_format_seconds_is_pinned() -> None:
    assert [format_seconds(s) for s in (0.2, 42, 89.4, 390, 5399, 8000)] == [
        "1 s", "42 s", "89 s", "6.5 min", "90.0 min", "2.2 h",
    ]


def test_throughput_is_measured_only_on_a_long_enough_run() -> None:
    start = Throughput()
    assert start == Throughput(DEFAULT_TOKENS_PER_S, measured=False)
    # Too few tokens, too short, then a real run; a later short run keeps the measured speed.
    assert [start.after_run(1_000, 20.0), start.after_run(5_000, 2.0), start.after_run(6_000, 20.0),
            Throughput(300.0, True).after_run(10, 0.1)] == [
        start, start, Throughput(300.0, measured=True), Throughput(300.0, measured=True),
    ]


def test_runs_longer_than_ten_minutes_need_confirmation() -> None:
    from backend.metrics.cost import CONFIRM_SECONDS, needs_confirmation

    assert CONFIRM_SECONDS == 600.0
    assert [needs_confirmation(s) for s in (0.0, 599.9, 600.0, 600.1, 78_480.0)] == [False, False, False, True, True]
    assert needs_confirmation(61.0, threshold=60.0) and not needs_confirmation(59.0, threshold=60.0)


def test_cost_label_is_pinned() -> None:
    from backend.metrics.cost import cost_label

    assert cost_label({"pairs": 87_638, "tokens": 11_772_000, "seconds": 78_480.0}) == "87,638 pairs, ≈ 21.8 h"
    assert cost_label({"pairs": 1, "tokens": 40, "seconds": 0.3}) == "1 pair, ≈ 1 s"


def test_the_defaults_fit_a_cpu() -> None:
    from backend.metrics.cost import DEFAULT_METRICS, DEFAULT_PAIR_WINDOW
    from backend.metrics.report import METRICS, model_needs

    assert DEFAULT_METRICS == ("bc", "ds") and set(DEFAULT_METRICS) <= set(METRICS)
    assert not model_needs(list(DEFAULT_METRICS)).complete  # adjacent pairs only: n passes, not n²
    # 100 chunks of 200 tokens: CS within the default window is a small fraction of all pairs.
    counts = [[200] * 100]
    windowed = cost_estimate(counts, complete=True, window=DEFAULT_PAIR_WINDOW, tokens_per_s=100.0)
    full = cost_estimate(counts, complete=True, window=None, tokens_per_s=100.0)
    assert 0 < DEFAULT_PAIR_WINDOW <= 5 and windowed["pairs"] * 10 < full["pairs"]
