"""ETAs that come true (``backend.progress``): work-weighted, steadied by the rate measured before, in human units.

A scripted clock makes every ETA exact.
"""

from __future__ import annotations

import pytest

from backend.progress import PRIOR_SECONDS, Progress


def _tracker(*times: float) -> tuple[Progress, list]:
    it = iter(times)
    seen: list[tuple[float | None, str]] = []
    return Progress(lambda _f, eta, label: seen.append((eta, label)), clock=lambda: next(it)), seen


def test_weighted_units_measure_the_eta_in_work_not_in_units():
    # 4 windows: the first scores 100 tokens for 100 of work, each later one 50 tokens for 100 (half is context).
    tracker, seen = _tracker(0.0, 10.0, 20.0)
    tracker.set_unit("tokens")
    tracker(0, 250, work=(0.0, 400.0))
    tracker(100, 250, work=(100.0, 400.0))  # 100 of work in 10 s: 300 left, 30 s
    tracker(150, 250, work=(200.0, 400.0))
    # Counted in tokens alone, 100 tokens in 10 s would have promised 15 s for the 150 left: half the time.
    assert seen == [(None, "0 / 250 tokens"), (30.0, "100 / 250 tokens · ETA 30 s"), (20.0, "150 / 250 tokens · ETA 20 s")]


def test_a_rate_measured_before_gives_the_first_eta_and_the_run_takes_over():
    tracker, seen = _tracker(0.0, 20.0, 200.0)
    tracker.set_unit("pairs")
    tracker.expect(2.0)  # 2 units/s measured on the last run
    tracker(0, 1000)  # no unit done yet: the measured rate answers, 1000 units at 2/s
    tracker(20, 1000)  # the run does 1/s: (20 s × 2 + 20) / (20 + 20 s) = 1.5/s
    tracker(200, 1000)  # (40 + 200) / (20 + 200) ≈ 1.09/s: the run's own rate dominates
    assert PRIOR_SECONDS == 20.0
    assert [eta for eta, _ in seen] == [500.0, pytest.approx(980 / 1.5), pytest.approx(800 / (240 / 220))]
    assert [label for _, label in seen] == [
        "0 / 1,000 pairs · ETA about 8 min", "20 / 1,000 pairs · ETA about 11 min", "200 / 1,000 pairs · ETA about 12 min",
    ]


def test_a_new_unit_forgets_the_rate_and_a_slice_moves_the_work():
    tracker, seen = _tracker(0.0, 4.0, 8.0)
    tracker.set_unit("pairs")
    tracker.expect(5.0)
    tracker.set_unit("texts")  # another kind of work: no ETA until the run measures one
    tracker(0, 10)
    group = tracker.slice(0, 10, 10, work=(0.0, 80.0, 100.0))  # the first 10 units weigh 80 of the 100
    group(5, 10)  # half the group: 40 of work in 4 s
    group(10, 10)
    assert seen == [
        (None, "0 / 10 texts"),
        (pytest.approx(6.0), "5 / 10 texts · ETA 6 s"),  # 60 of work left at 10/s
        (None, "10 / 10 texts"),
    ]


def test_hours_read_in_hours():
    tracker, seen = _tracker(0.0, 60.0)
    tracker(0, 1000)
    tracker(10, 1000)  # 10 in a minute: 990 left, 99 min
    assert seen[-1] == (5940.0, "10 / 1,000 · ETA 1 h 40 min")
