"""The cost of scoring for the quality metrics (backend/metrics/cost.py): passes, tokens, time, measured speed.

Also the one formatter of durations (:func:`format_seconds`, defined with the progress bar's ETA).
"""

from __future__ import annotations

import pytest

from backend.metrics.cost import (
    GUESS_CHARS_PER_S,
    Throughput,
    cost_estimate,
    embed_cost,
    estimate_cost,
    format_seconds,
    pair_cost,
)
from backend.models.cache import OutputCache
from backend.models.embeddings import embed_texts
from backend.models.rates import Rate, RateKey, rate_store
from backend.progress import format_seconds as progress_format_seconds
from tests.support.quality import SeededEmbedder


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> None:
    """A fresh data directory: no speed is measured until a test records one."""
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))


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
    assert format_seconds is progress_format_seconds  # one formatter for costs and ETAs
    seconds = (0, 0.2, 42, 89.4, 90, 390, 3569, 3570, 5399, 6600, 7180, 8000, 35_999, 36_000, 78_480, float("inf"))
    assert [format_seconds(s) for s in seconds] == [
        "1 s", "1 s", "42 s", "90 s", "about 2 min", "about 7 min", "about 59 min", "1 h", "1 h 30 min",
        "1 h 50 min", "2 h", "2 h 15 min", "10 h", "10 h", "22 h", "forever",
    ]


def test_the_speed_is_the_one_measured_else_a_labelled_guess() -> None:
    assert Throughput() == Throughput(GUESS_CHARS_PER_S, None, measured=False) == Throughput.measured_for("fp-x")
    assert Throughput().words == "a guess (600 characters/s) until the first run measures this machine"
    rate_store().record(RateKey("fp-x", "lm", "cpu", "float32", "pairs"), units=30, work=1_200.0, seconds=10.0)
    assert Throughput.measured_for("fp-x") == Throughput(120.0, 3.0, measured=True)
    assert Throughput.measured_for("fp-x").words == "3.0 pairs/s, measured on this machine"
    assert Throughput.measured_for("fp-x", kind="remote-lm") == Throughput()  # another kind of model: not measured


def test_before_pairs_are_measured_a_ppl_pass_of_the_model_stands_in() -> None:
    rate_store().record(RateKey("fp-p", "lm", "cpu", "float32", "token_nll"), units=1_000, work=2_500.0, seconds=20.0,
                        chars=4_000.0)
    speed = Throughput.measured_for("fp-p")
    assert speed == Throughput(200.0, None, measured=True, from_pass=True)
    assert speed.words == "200 characters/s, measured on this machine's PPL pass of the same model"
    rate_store().record(RateKey("fp-p", "lm", "cpu", "float32", "pairs"), units=10, work=3_000.0, seconds=10.0)
    assert Throughput.measured_for("fp-p") == Throughput(300.0, 1.0, measured=True)  # pairs measured: theirs


def test_pair_cost_counts_only_the_pairs_missing_from_the_cache(tmp_path) -> None:
    cache = OutputCache(tmp_path / "cache")
    texts = [["aa", "bbbb", "c"], ["aa", "bbbb", "dd"]]  # the pairs shared by both chunkings count once
    speed = Throughput(10.0, 1.0, measured=True)
    cost = pair_cost(texts, complete=False, window=None, fingerprint="fp-x", kind="lm", cache=cache, throughput=speed)
    # Unconditional: ' '→aa, ' '→bbbb, ' '→c, ' '→dd (the context ' ' shared by four); adjacent: aa→bbbb, bbbb→c, bbbb→dd.
    assert (cost.pairs, cost.total_pairs, cost.cached) == (7, 7, 0)
    assert cost.chars == pytest.approx(2 + 4 + 1 + 2 + 4 * 0.25 + (4 + 2) + (1 + 2) + (2 + 2))
    assert cost.seconds == pytest.approx(cost.chars / 10.0)
    from backend.models.scoring import pair_key

    cache.put(pair_key("fp-x", "lm", "bbbb", "c"), {"nll": 1.0})
    cache.put(pair_key("fp-x", "lm", " ", "aa"), {"nll": 1.0})
    cache.put(pair_key("fp-y", "lm", "aa", "bbbb"), {"nll": 1.0})  # another model's entry does not count
    left = pair_cost(texts, complete=False, window=None, fingerprint="fp-x", kind="lm", cache=cache, throughput=speed)
    assert (left.pairs, left.total_pairs, left.cached) == (5, 7, 2)
    unknown = pair_cost(texts, complete=False, window=None, fingerprint=None, kind="lm", cache=cache, throughput=speed)
    assert unknown.pairs == 7  # the model's identity unknown until it loads: nothing can be looked up


def test_embed_cost_counts_the_texts_not_cached_at_the_measured_speed(tmp_path) -> None:
    cache = OutputCache(tmp_path / "cache")
    texts = [["one chunk", "two"], ["three chunks"]]
    fp = SeededEmbedder.info.fingerprint
    assert embed_cost(texts, fp, cache).words == "time measured on the first run"
    embed_texts(SeededEmbedder(), texts[0], cache=cache)  # measured, and cached
    rate = rate_store().of_model(SeededEmbedder.info, "embed")
    assert isinstance(rate, Rate) and rate.units == 2 and rate.work == 12
    left = embed_cost(texts, fp, cache)
    assert (left.texts, left.chars) == (1, 12) and left.seconds == pytest.approx(12 / rate.work_per_s)
    assert embed_cost(texts[:1], fp, cache).words == "nothing to embed"


def test_runs_longer_than_ten_minutes_need_confirmation() -> None:
    from backend.metrics.cost import CONFIRM_SECONDS, needs_confirmation

    assert CONFIRM_SECONDS == 600.0
    assert [needs_confirmation(s) for s in (0.0, 599.9, 600.0, 600.1, 78_480.0)] == [False, False, False, True, True]
    assert needs_confirmation(61.0, threshold=60.0) and not needs_confirmation(59.0, threshold=60.0)


def test_cost_label_is_pinned() -> None:
    from backend.metrics.cost import cost_label

    assert cost_label({"pairs": 87_638, "tokens": 11_772_000, "seconds": 78_480.0}) == "87,638 pairs, 22 h"
    assert cost_label({"pairs": 1, "tokens": 40, "seconds": 0.3}) == "1 pair, 1 s"
    assert cost_label({"pairs": 57, "seconds": 250.0, "measured": False}) == "57 pairs, about 4 min (a guess)"


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
