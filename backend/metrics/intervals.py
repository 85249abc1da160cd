"""Intervals over questions: a mean's 95% interval and a paired difference's, by a seeded percentile bootstrap.

A retrieval metric (recall, precision, IoU, precision-Ω) is a mean over questions; its interval says how
much it would move with other questions of the same kind. Two configurations answer the *same*
questions, so they are compared on the per-question differences (paired): the difference is called
only when its interval excludes zero. The bootstrap resamples questions with replacement ``B`` times
from a seeded generator, so the same scores give the same interval on every run and machine.

With one question there is nothing to resample: the interval is ``[-inf, inf]`` around the value for a
difference, and the value itself has an interval of the metric's whole range — never a false certainty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP", "LEVEL", "Interval", "independent_difference", "mean_interval", "paired_difference", "paired_leaders"]

BOOTSTRAP = 2000  # resamples: percentile ends stable to about a tenth of a point at 40 questions
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: ``mean`` in ``[low, high]`` at ``level`` over ``n`` questions."""

    mean: float
    low: float
    high: float
    n: int
    level: float = LEVEL

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly above or below zero (a difference that can be called)."""
        return self.low > 0.0 or self.high < 0.0

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high

    def text(self, scale: float = 100.0, unit: str = "%", digits: int = 1) -> str:
        """``78.1% [70.2, 85.0]`` (scaled by ``scale``)."""
        f = f"{{:.{digits}f}}"
        if math.isnan(self.mean):
            return "n/a"
        ends = "" if not (math.isfinite(self.low) and math.isfinite(self.high)) else \
            f" [{f.format(self.low * scale)}, {f.format(self.high * scale)}]"
        return f"{f.format(self.mean * scale)}{unit}{ends}"

    def to_json(self) -> dict[str, Any]:
        """``{"mean", "low", "high", "n", "level"}`` (a NaN or infinite end as null)."""
        num = lambda x: float(x) if math.isfinite(x) else None  # noqa: E731
        return {"mean": num(self.mean), "low": num(self.low), "high": num(self.high), "n": self.n, "level": self.level}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Interval:
        """The interval a :meth:`to_json` object holds (a null end: unbounded; a null mean: NaN)."""
        mean = math.nan if raw.get("mean") is None else float(raw["mean"])
        low = -math.inf if raw.get("low") is None else float(raw["low"])
        high = math.inf if raw.get("high") is None else float(raw["high"])
        return cls(mean, low, high, int(raw["n"]), float(raw.get("level", LEVEL)))


def _bootstrap_means(values: np.ndarray, seed: int, b: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(b, values.size))
    return values[idx].mean(axis=1)


def _percentiles(means: np.ndarray, level: float) -> tuple[float, float]:
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(lo), float(hi)


def mean_interval(values: Sequence[float], *, seed: int = 0, b: int = BOOTSTRAP, level: float = LEVEL,
                  bounds: tuple[float, float] = (0.0, 1.0)) -> Interval:
    """The mean of per-question ``values`` with its percentile-bootstrap interval.

    Args:
        values: One score per question (NaNs are dropped).
        seed: The bootstrap's seed (same values and seed, same interval).
        b: Bootstrap resamples.
        level: The interval's level.
        bounds: The metric's range, the interval of a single question's score.
    """
    xs = np.asarray([v for v in values if not math.isnan(v)], dtype=np.float64)
    if xs.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0, level)
    mean = float(xs.mean())
    if xs.size == 1:
        return Interval(mean, bounds[0], bounds[1], 1, level)
    lo, hi = _percentiles(_bootstrap_means(xs, seed, b), level)
    return Interval(mean, min(lo, mean), max(hi, mean), int(xs.size), level)


def paired_difference(a: Sequence[float], b_values: Sequence[float], *, seed: int = 0, b: int = BOOTSTRAP,
                      level: float = LEVEL) -> Interval:
    """Mean of ``a - b_values`` over the same questions, with its paired bootstrap interval.

    Raises:
        ValueError: the two lists differ in length (they must score the same questions, in the same order).
    """
    if len(a) != len(b_values):
        raise ValueError(f"paired scores need the same questions ({len(a)} against {len(b_values)})")
    d = np.asarray(a, dtype=np.float64) - np.asarray(b_values, dtype=np.float64)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0, level)
    mean = float(d.mean())
    if d.size == 1 or np.all(d == d[0]):
        # One question, or every question moved by exactly the same amount: no spread to resample.
        if d.size == 1:
            return Interval(mean, -math.inf, math.inf, 1, level)
        return Interval(mean, mean, mean, int(d.size), level)
    lo, hi = _percentiles(_bootstrap_means(d, seed, b), level)
    return Interval(mean, min(lo, mean), max(hi, mean), int(d.size), level)


def paired_leaders(scores: Mapping[str, Sequence[float]], *, seed: int = 0, b: int = BOOTSTRAP,
                   level: float = LEVEL) -> tuple[str, ...]:
    """The configurations that cannot be told apart from the highest mean (itself first).

    ``scores`` maps a name to its per-question scores (all over the same questions). The best by mean
    leads; another joins it unless the paired difference (best minus it) excludes zero. One name back
    means the best is called; several mean a tie among them.
    """
    named = {k: list(v) for k, v in scores.items() if len(v)}
    if not named:
        return ()
    means = {k: float(np.nanmean(v)) if not all(math.isnan(x) for x in v) else -math.inf for k, v in named.items()}
    best = max(means, key=lambda k: means[k])
    tied = [k for k in named if k != best and not paired_difference(named[best], named[k], seed=seed, b=b,
                                                                      level=level).excludes_zero()]
    return (best, *tied)


def independent_difference(a: Interval, b: Interval) -> Interval:
    """``a - b`` for two *independent* estimates (not paired), by the normal approximation.

    Each interval is read as ``mean ± 1.96·se`` (its larger half-width, so a skewed interval is never
    narrowed); the difference's half-width is ``sqrt(ha² + hb²)``. Two exact values (width 0) give an
    exact difference. What the tuner's ``bc`` objective compares: two configurations' Boundary
    Clarity, each estimated on its own sample of boundaries.

    Args:
        a: The first estimate (the pick).
        b: The second (the other configuration).

    Returns:
        The difference with its interval at ``a.level``; ``n`` is the smaller of the two sample sizes.
    """
    half = lambda x: max(x.mean - x.low, x.high - x.mean)  # noqa: E731
    ha, hb = half(a), half(b)
    h = math.sqrt(ha * ha + hb * hb) if math.isfinite(ha) and math.isfinite(hb) else math.inf
    mean = a.mean - b.mean
    return Interval(mean, mean - h, mean + h, min(a.n, b.n), a.level)
