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
