"""ETAs that come true (``backend.progress``): work-weighted, steadied by the rate measured before, in human units.

A scripted clock makes every ETA exact.
"""

from __future__ import annotations

import pytest

from backend.metrics.scores import score_chunkings
from backend.models.cache import OutputCache
from backend.models.rates import RateKey, rate_store
from backend.progress import PRIOR_SECONDS, Progress
from tests.support.fake_scores import ClockedPairScorer
from tests.support.quality import chunking_of


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


def test_a_slice_tells_its_parent_the_rate_in_the_parents_measure():
    # A job counts 100 pairs (no weights); a group of 10 of them weighs 1,000 characters, and the rate measured
    # before is 100 characters/s: 1 pair/s for the job, not 100.
    tracker, seen = _tracker(0.0, 0.0, 0.0)
    tracker.set_unit("pairs")
    tracker(40, 100)
    group = tracker.slice(40, 10, 100)
    group.expect(100.0)  # in the group's measure: its count says how it compares with the job's at its first report
    group(0, 10, work=(0.0, 1_000.0))
    assert seen[-1] == (60.0, "40 / 100 pairs · ETA 60 s")
    # A slice that moves its parent's work as well tells it the rate in that work (here 500 of 2,000).
    tracker, seen = _tracker(0.0, 0.0)
    tracker.set_unit("pairs")
    tracker(0, 20, work=(0.0, 2_000.0))
    group = tracker.slice(0, 10, 20, work=(0.0, 500.0, 2_000.0))
    group.expect(100.0)
    group(0, 10, work=(0.0, 1_000.0))  # the group's 1,000 characters are 500 of the job's work: 50/s
    assert seen[-1] == (40.0, "0 / 20 pairs · ETA 40 s")


def _texts(tag: str, n: int) -> tuple[str, ...]:
    """``n`` distinct chunk texts of unequal lengths."""
    return tuple(f"{tag} {i}: " + "word " * (3 + 7 * i % 11) for i in range(n))


def test_the_scoring_jobs_eta_is_the_whole_jobs_remaining_work_at_the_measured_rate(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    scorer = ClockedPairScorer(chars_per_s=20.0)
    rate_store().record(RateKey.of(scorer.info, "pairs"), 1, 20.0, 1.0)  # an earlier run measured 20 characters/s
    seen: list[tuple[float, float | None, str]] = []
    rounds: list[int] = []
    progress = Progress(lambda _f, eta, label: seen.append((scorer.now, eta, label)), clock=scorer.clock,
                        partial=lambda est: rounds.append(est.done))
    chunkings = [chunking_of(_texts("A", 24)), chunking_of(_texts("B", 16), name="b")]
    score_chunkings(chunkings, scorer=scorer, embedder=None, complete=False, window=None,
                    cache=OutputCache(tmp_path / "cache"), progress=progress)
    end = scorer.now
    timed = [(t, eta) for t, eta, _ in seen if eta is not None]
    assert len(rounds) == 3 and len(timed) > 50  # two rounds of estimates, then the exact end
    # From the first report to the last, the ETA is the job's time left (both configurations, every round),
    # not the running batch's: the remaining work at the measured rate.
    assert timed[0] == (0.0, pytest.approx(end, rel=0.01))
    assert [eta for _t, eta in timed] == [pytest.approx(end - t, rel=0.02, abs=0.5) for t, _eta in timed]
    assert seen[-1][2] == "78 / 78 pairs"


def test_hours_read_in_hours():
    tracker, seen = _tracker(0.0, 60.0)
    tracker(0, 1000)
    tracker(10, 1000)  # 10 in a minute: 990 left, 99 min
    assert seen[-1] == (5940.0, "10 / 1,000 · ETA 1 h 40 min")
