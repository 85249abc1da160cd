"""Anytime estimates of the quality metrics: a number, its 95% interval, and how much of the work it stands on.

Scoring every chunk pair of a long document takes hours on a CPU; a sample of pairs gives an
answer with an honest error bar in a minute. An :class:`Estimate` is one metric's value from
the pairs scored so far: ``estimate``, the interval ``[ci_low, ci_high]`` and ``pairs_scored``
of ``pairs_total``. Once every pair is scored the estimate *is* the exact value (computed by the
same function as an exact run) and the interval has width 0.

Which pairs come first is :func:`stratified_order`: seeded, nested strata over the document, so
any prefix of the order covers the document evenly instead of its beginning.

A mean over units (Boundary Clarity, dissimilarity: one value per boundary) gets a t interval
with the finite-population correction (:func:`mean_estimate`): the sample is drawn without
replacement from the ``pairs_total`` boundaries, so the interval closes to the exact value as
the sample grows to all of them. The variance is the simple random sample's; with one draw per
stratum it is conservative when the values drift along the document.

Chunk Stickiness is no mean: it is the entropy of the degree distribution of the kept edges
(MoC eq. 3), ``-Σ p_v log2 p_v`` with ``p_v = deg_v / 2m``. Sampling whole context rows (every
pair ``(i, j)`` of a sampled chunk ``i``), each edge is seen with the same probability ``f``, so
the observed degrees are, in expectation, ``f`` times the true ones and their shares estimate
``p_v`` without knowing ``f``. The plug-in entropy of those shares is biased low (a sample's
shares are more uneven than the population's); :func:`degree_entropy_estimate` adds the
Miller–Madow correction ``(k - 1) / 2M`` (nats; ``k`` nodes with a degree, ``M = 2m`` edge ends
seen) scaled by ``1 - f`` for sampling without replacement, and takes the interval from a
bootstrap over the sampled rows (the rows are the clusters the sample was drawn in), its
deviations scaled by ``√(1 - f)``. Every row scored, the caller gives the exact value instead.

A running scoring job publishes :class:`QualityEstimates` as it goes, one mapping of metric name
to estimate per configuration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BOOTSTRAP_ROUNDS",
    "CONFIDENCE",
    "Estimate",
    "QualityEstimates",
    "degree_entropy_estimate",
    "exact_estimate",
    "mean_estimate",
    "overlap",
    "stratified_order",
    "t_quantile",
]

CONFIDENCE = 0.95  # the level of every interval shown
BOOTSTRAP_ROUNDS = 400  # resamples of a bootstrap interval (its ends move by well under its width between seeds)

# Two-sided 95% quantiles of Student's t for 1–5 degrees of freedom (up to 5 the series below is too coarse).
_T975_SMALL = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706}
_Z975 = 1.959963984540054


def t_quantile(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (the half-width factor of a 95% interval).

    A table for ``df <= 5``, else the Cornish–Fisher series of Abramowitz & Stegun 26.7.5 (error
    under 1e-4 from 6 degrees of freedom on).

    >>> round(t_quantile(10), 3)
    2.228
    """
    if df < 1:
        raise ValueError(f"df ({df}) must be at least 1")
    if df in _T975_SMALL:
        return _T975_SMALL[df]
    z, v = _Z975, float(df)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


@dataclass(frozen=True)
class Estimate:
    """One metric's value from the pairs scored so far, with its 95% interval.

    Attributes:
        estimate: The point estimate (None: nothing to estimate from yet, or no finite value).
        ci_low: The interval's lower end (None with no estimate).
        ci_high: Its upper end.
        pairs_scored: The units the estimate stands on (boundaries for BC and DS, ordered pairs for CS).
        pairs_total: All of them; ``pairs_scored == pairs_total`` is the exact value (interval of width 0).
        method: How the interval was made: ``exact``, ``t`` (a mean's t interval with the
            finite-population correction) or ``bootstrap``.
        unit: What ``pairs_scored`` counts, for the label (``pairs``).
    """

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    pairs_scored: int
    pairs_total: int
    method: str = "exact"
    unit: str = "pairs"

    @property
    def exact(self) -> bool:
        """Whether every unit is scored (the value is the exact one)."""
        return self.pairs_scored >= self.pairs_total

    @property
    def half_width(self) -> float | None:
        """The interval's larger distance from the estimate (what ``±`` shows); None without an estimate."""
        if self.estimate is None or self.ci_low is None or self.ci_high is None:
            return None
        return max(self.estimate - self.ci_low, self.ci_high - self.estimate)

    def value_text(self, digits: int = 2) -> str:
        """``0.93 ± 0.02``, or ``0.93`` when exact, or ``–`` without an estimate.

        The digits grow (up to 4) until the half-width shows, so a narrow interval never reads ``± 0.00``.
        """
        if self.estimate is None:
            return "–"
        h = self.half_width
        if self.exact or h is None or not math.isfinite(h):
            return f"{self.estimate:.{digits}f}"
        d = digits
        while d < 4 and round(h, d) == 0:
            d += 1
        return f"{self.estimate:.{d}f} ± {h:.{d}f}"

    def label(self, digits: int = 2) -> str:
        """``0.93 ± 0.02 (120 of 1,747 pairs)``; exact: ``0.93 (all 1,747 pairs)``."""
        if self.exact:
            return f"{self.value_text(digits)} (all {self.pairs_total:,} {self.unit})"
        return f"{self.value_text(digits)} ({self.pairs_scored:,} of {self.pairs_total:,} {self.unit})"

    def to_json(self) -> dict[str, float | int | str | None]:
        """``{"estimate", "ci_low", "ci_high", "pairs_scored", "pairs_total", "method"}``."""
        return {
            "estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "pairs_scored": int(self.pairs_scored), "pairs_total": int(self.pairs_total), "method": self.method,
        }


def exact_estimate(value: float | None, total: int) -> Estimate:
    """The estimate of an exact value: every one of ``total`` units scored, an interval of width 0."""
    return Estimate(value, value, value, total, total, "exact")


def overlap(a: Estimate, b: Estimate) -> bool:
    """Whether two estimates' intervals overlap (they cannot be told apart); True when either has no estimate."""
    if a.ci_low is None or a.ci_high is None or b.ci_low is None or b.ci_high is None:
        return True
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high


def mean_estimate(values: Sequence[float] | np.ndarray, scored: Sequence[bool] | np.ndarray) -> Estimate:
    """The mean of per-unit values (one per boundary) from the units scored so far, with its 95% interval.

    Non-finite values are left out, as the exact mean leaves them out. With every unit scored the
    estimate is the exact mean (the same arithmetic, in document order) and the interval has width
    0. Otherwise the interval is the t interval of a sample drawn without replacement:
    ``mean ± t(m-1) · s/√m · √(1 - m/N)``, ``m`` scored finite values of ``N`` units.

    Args:
        values: One value per unit, in document order (anything where not scored).
        scored: Which units are scored.
    """
    x = np.asarray(values, dtype=np.float64)
    mask = np.asarray(scored, dtype=bool)
    if x.shape != mask.shape:
        raise ValueError(f"values ({x.shape}) and scored ({mask.shape}) differ in shape")
    total, done = int(x.size), int(mask.sum())
    finite = x[mask & np.isfinite(x)]
    if done >= total:
        value = float(finite.mean()) if finite.size else None
        return exact_estimate(value, total)
    if finite.size == 0:
        return Estimate(None, None, None, done, total, "t")
    mean = float(finite.mean())
    if finite.size < 2:  # one value: no spread to measure, the interval is unbounded
        return Estimate(mean, -math.inf, math.inf, done, total, "t")
    population = int(np.isfinite(x[~mask]).size + finite.size)  # units a finite value could come from
    fpc = math.sqrt(max(0.0, 1.0 - finite.size / population))
    half = t_quantile(finite.size - 1) * float(finite.std(ddof=1)) / math.sqrt(finite.size) * fpc
    return Estimate(mean, mean - half, mean + half, done, total, "t")


def stratified_order(n: int, seed: int) -> list[int]:
    """A seeded order of ``n`` units (0 … n-1) whose every prefix is spread over the document.

    Nested strata: round ``r`` cuts the document into ``2**r`` equal strata and draws, in a random
    order of the strata, one unit uniformly among the unscored units of each stratum that holds no
    drawn unit yet; once every stratum is one unit the rest follow in random order. The first ``k``
    units thus fall about one per ``n/k`` stretch of the document, with a random place in each.

    >>> sorted(stratified_order(10, 0)) == list(range(10))
    True
    """
    if n < 0:
        raise ValueError(f"n ({n}) must be at least 0")
    rng = np.random.default_rng(seed)
    taken = np.zeros(n, dtype=bool)
    order: list[int] = []
    strata = 1
    while len(order) < n and strata < n:
        edges = np.linspace(0, n, strata + 1).round().astype(int)
        for s in rng.permutation(strata):
            lo, hi = int(edges[s]), int(edges[s + 1])
            if hi <= lo or taken[lo:hi].any():
                continue
            pick = lo + int(rng.integers(hi - lo))
            taken[pick] = True
            order.append(pick)
        strata *= 2
    rest = np.flatnonzero(~taken)
    order.extend(int(i) for i in rng.permutation(rest))
    return order


def _entropy_bits(degrees: np.ndarray) -> np.ndarray:
    """``-Σ p log2 p`` of each row's degree shares (0 for a row without a degree)."""
    total = degrees.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total > 0, degrees / np.where(total > 0, total, 1), 0.0)
        terms = np.where(p > 0, -p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1)


def _miller_madow_bits(degrees: np.ndarray, unseen: float) -> np.ndarray:
    """The Miller–Madow bias correction ``(k - 1) / 2M`` in bits, scaled by the unseen fraction ``1 - f``."""
    k = (degrees > 0).sum(axis=-1)
    ends = degrees.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = np.where(ends > 0, (k - 1) / (2.0 * np.where(ends > 0, ends, 1)), 0.0)
    return corr * unseen / math.log(2)


def degree_entropy_estimate(
    ends: np.ndarray,
    pairs_scored: int,
    pairs_total: int,
    *,
    seed: int = 0,
    rounds: int = BOOTSTRAP_ROUNDS,
) -> Estimate:
    """Chunk Stickiness (the entropy of the kept edges' degree distribution) from a sample of context rows.

    Each sampled row ``r`` gives ``ends[r, v]``: how many ends of its kept edges fall on node ``v``
    (an edge ``(i, j)`` adds one to ``i`` and one to ``j``). The estimate is the plug-in entropy of
    the summed degrees plus the Miller–Madow correction scaled by ``1 - f`` (``f`` the fraction
    of the ``pairs_total`` pairs scored); the 95% interval is the basic bootstrap over rows, its
    deviations scaled by ``√(1 - f)``, clipped to ``[0, log2 n]``. With no kept edge seen the
    estimate is 0 and the upper end is the largest entropy of as many edges as the rule of three
    allows (``3 / pairs_scored`` of the pairs). The caller gives the exact value once every pair
    is scored (this function never sees the whole graph).

    Args:
        ends: ``(rows sampled, n nodes)`` counts of kept-edge ends per sampled row.
        pairs_scored: The pairs the rows hold (the units scored).
        pairs_total: The pairs of the whole graph.
        seed: The bootstrap's seed.
        rounds: Bootstrap resamples.
    """
    ends = np.asarray(ends, dtype=np.float64)
    if ends.ndim != 2:
        raise ValueError(f"ends must be a (rows, nodes) array, got shape {ends.shape}")
    rows, nodes = ends.shape
    if pairs_scored <= 0 or rows == 0:
        return Estimate(None, None, None, max(0, pairs_scored), pairs_total, "bootstrap")
    top = math.log2(nodes) if nodes > 1 else 0.0
    f = min(1.0, pairs_scored / max(pairs_total, 1))
    degrees = ends.sum(axis=0)
    if degrees.sum() == 0:
        # No kept edge among the sampled pairs: the rule of three bounds the kept ones.
        most = math.ceil(3.0 / pairs_scored * pairs_total * (1.0 - f))
        high = math.log2(min(nodes, 2 * most)) if most > 0 else 0.0
        return Estimate(0.0, 0.0, min(high, top), pairs_scored, pairs_total, "bootstrap")
    unseen = 1.0 - f
    value = float(_entropy_bits(degrees) + _miller_madow_bits(degrees, unseen))
    if rows < 2:  # one cluster: no spread to measure
        return Estimate(min(max(value, 0.0), top), 0.0, top, pairs_scored, pairs_total, "bootstrap")
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(rows, np.full(rows, 1.0 / rows), size=rounds).astype(np.float64)
    boot = weights @ ends
    replicas = _entropy_bits(boot) + _miller_madow_bits(boot, unseen)
    deviation = (replicas - value) * math.sqrt(unseen)
    low_q, high_q = np.quantile(deviation, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    estimate = min(max(value, 0.0), top)
    low = min(max(value - float(high_q), 0.0), estimate)
    high = max(min(value - float(low_q), top), estimate)
    return Estimate(estimate, low, high, pairs_scored, pairs_total, "bootstrap")


@dataclass(frozen=True)
class QualityEstimates:
    """What a running scoring job knows so far (published through its progress as it goes).

    Attributes:
        estimates: Per configuration, in the job's order, metric name (``bc``, ``cs_complete``,
            ``cs_incomplete``, ``ds``) to its estimate; a metric not asked for is absent.
        done: The job's units of work done so far (pairs scored, in the job's count).
        total: All of them.
        tables: Per configuration, the pair table scored so far (a partial
            :class:`~backend.metrics.quality.PairTable`, ``partial=True``, nan where not scored;
            None: no table), so a page recomputes the estimates under its own K, rule or mode.
        vectors: Per configuration, its chunks' embeddings once computed (None before).
    """

    estimates: tuple[Mapping[str, Estimate], ...]
    done: int
    total: int
    tables: tuple[Any, ...] = ()
    vectors: tuple[Any, ...] = ()
