"""The formulas of MoC's chunk-quality metrics (Zhao et al., 2025): tables in, numbers out.

Everything here is arithmetic on scores already computed: a chunking's :class:`PairTable` (the
mean NLL of each chunk ``q`` given each context chunk ``d`` that a metric needs, and given a
single space, the authors' code's context for the unconditional ``ppl(q)``) or its chunks'
embeddings. Nothing here calls a model, reads the cache or decides which pairs to score: that
is :mod:`backend.metrics.scores`, which fills the table. So changing ``K``, the rule, the mode
or the graph is a recomputation here, never a model call. One chunking's row of these numbers
(what the CLI's ``metrics`` prints and the Quality page's table shows) is
:func:`backend.metrics.report.quality_row`.

Definitions (``ppl = exp(mean NLL)``):

Boundary Clarity, adjacent chunks ``d = c_i``, ``q = c_{i+1}``
    ``bc_mode="paper"``: ``BC = ppl(q|d) / ppl(q)`` (eq. 1).
    ``bc_mode="reference"`` (default): ``nll(q|d) / nll(q)``, the ratio of mean NLLs the
    authors' code computes (and their published table reports). Higher = clearer boundary.
Chunk Stickiness, ordered pairs ``d = c_i``, ``q = c_j``, ``i != j``
    ``Edge(q, d) = (ppl(q) - ppl(q|d)) / ppl(q)`` (eq. 2). ``cs_rule="paper"`` (default)
    keeps an edge when ``Edge > K``; ``cs_rule="reference"`` when ``ppl(q|d) / ppl(q) > K``
    (the authors' code). Each kept edge adds one to the degree of both its chunks;
    ``CS = -Σ (deg_i / 2m) log2(deg_i / 2m)`` over chunks with a degree, ``m`` = kept edges
    (eq. 3). The complete graph takes every ordered pair; the incomplete, sequence-aware
    graph only pairs with ``j - i > δ`` (δ = 0 by default). Lower = better. With no kept
    edge CS is 0.
    ``window=w`` (a documented approximation for the CPU) scores only pairs with
    ``|i - j| <= w``; the other pairs count as not kept.
Dissimilarity, adjacent chunks
    ``DS = 1 - cos(emb(d), emb(q))`` with the embedder's normalized vectors (section 4.5).
Estimates from a sample (:mod:`backend.metrics.estimate`)
    A *partial* table (``PairTable.partial``) holds the pairs of a seeded sample of chunks
    (``PairTable.sample``, drawn by :func:`backend.metrics.scores.sample_nodes`), with ``nan``
    where not scored: with CS each sampled chunk's star (its row and its column of pairs), without
    it its boundary pair. :func:`bc_estimate` and :func:`ds_estimate` are means over the sampled
    boundaries (a t interval with the finite-population correction); :func:`cs_estimate` is the
    ratio estimator of CS from the sampled chunks' exact degrees (a delta-method t interval).
    Every chunk sampled: the exact value.

Information support (CP, A.4) is not a function of the table: it scores one pair of its own
(:func:`backend.metrics.scores.information_support`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backend.errors import ParameterError
from backend.metrics.estimate import Estimate, degree_entropy_estimate, exact_estimate, mean_estimate

__all__ = [
    "BC_MODES",
    "CS_RULES",
    "DEFAULT_K",
    "GRAPHS",
    "PairTable",
    "bc_estimate",
    "boundary_clarity",
    "chunk_stickiness",
    "cs_curve",
    "cs_estimate",
    "cs_units",
    "dissimilarity",
    "ds_estimate",
    "edge_values",
    "kept_edges",
    "stickiness_edges",
    "structural_entropy",
]

BC_MODES = ("reference", "paper")
CS_RULES = ("paper", "reference")
GRAPHS = ("complete", "incomplete")
DEFAULT_K = 0.8


def _check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ParameterError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


@dataclass(frozen=True)
class PairTable:
    """Mean NLLs of chunks given other chunks, and given a single space.

    Attributes:
        uncond: ``uncond[j]`` = mean NLL of chunk j given ``" "``.
        cond: ``cond[i, j]`` = mean NLL of chunk j given chunk i; ``nan`` where not scored
            (the diagonal, and pairs outside the window).
        window: The pair window used (None: every pair that was asked for).
        complete: Whether every ordered pair (within the window) was scored, as Chunk
            Stickiness needs; False: only the adjacent pairs of Boundary Clarity.
        partial: Only the pairs of a sample of chunks are scored (``nan`` elsewhere, in
            ``uncond`` too): the metrics are estimates (:func:`bc_estimate`, :func:`cs_estimate`).
        sample: The sampled chunks of a partial table, in the order drawn (their
            :func:`~backend.metrics.scores.node_pairs` are scored); None for a full table.
    """

    uncond: np.ndarray
    cond: np.ndarray
    window: int | None = None
    complete: bool = True
    partial: bool = False
    sample: tuple[int, ...] | None = None

    @property
    def n(self) -> int:
        """Number of chunks."""
        return int(self.uncond.shape[0])


def boundary_clarity(table: PairTable, mode: str = "reference") -> np.ndarray:
    """BC of each boundary ``i`` (between chunk i and chunk i+1); see the module docstring."""
    _check("bc_mode", mode, BC_MODES)
    n = table.n
    if n < 2:
        return np.zeros(0, dtype=np.float64)
    cond = np.array([table.cond[i, i + 1] for i in range(n - 1)], dtype=np.float64)
    uncond = table.uncond[1:]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if mode == "reference":
            return cond / uncond
        return np.exp(cond - uncond)  # ppl(q|d) / ppl(q)


def edge_values(table: PairTable, rule: str = "paper") -> np.ndarray:
    """The value compared with K for every ordered pair (``nan`` where not scored).

    ``paper``: ``(ppl(q) - ppl(q|d)) / ppl(q) = 1 - exp(nll(q|d) - nll(q))``;
    ``reference``: ``ppl(q|d) / ppl(q) = exp(nll(q|d) - nll(q))``. Row = d, column = q.
    """
    _check("cs_rule", rule, CS_RULES)
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = np.exp(table.cond - table.uncond[None, :])
    return 1.0 - ratio if rule == "paper" else ratio


def kept_edges(
    edges: np.ndarray, K: float, *, graph: str = "complete", delta: int = 0
) -> list[tuple[int, int]]:
    """Ordered pairs ``(i, j)`` whose edge value is greater than ``K``.

    ``graph="incomplete"`` keeps only pairs with ``j - i > delta`` (sequence-aware).
    """
    _check("graph", graph, GRAPHS)
    n = edges.shape[0]
    with np.errstate(invalid="ignore"):
        mask = edges > K  # nan compares false: unscored pairs are never kept
    np.fill_diagonal(mask, False)
    if graph == "incomplete":
        i, j = np.indices((n, n))
        mask &= (j - i) > delta
    rows, cols = np.nonzero(mask)
    return list(zip(rows.tolist(), cols.tolist()))


def structural_entropy(edges: Sequence[tuple[int, int]], n: int) -> float:
    """``-Σ (deg/2m) log2(deg/2m)`` over nodes with a degree; 0 with no edge."""
    if not edges:
        return 0.0
    degree = np.zeros(n, dtype=np.int64)
    for i, j in edges:
        degree[i] += 1
        degree[j] += 1
    p = degree[degree > 0] / (2 * len(edges))
    return float(-(p * np.log2(p)).sum())


def stickiness_edges(
    table: PairTable, K: float = DEFAULT_K, *, rule: str = "paper", graph: str = "complete", delta: int = 0
) -> list[tuple[int, int]]:
    """The kept ordered edges ``(i, j)`` of a chunking's stickiness graph at ``K`` (what CS is the entropy of)."""
    return kept_edges(edge_values(table, rule), K, graph=graph, delta=delta)


def chunk_stickiness(
    table: PairTable, K: float = DEFAULT_K, *, rule: str = "paper", graph: str = "complete", delta: int = 0
) -> float:
    """CS of a chunking at ``K`` (see the module docstring)."""
    return structural_entropy(stickiness_edges(table, K, rule=rule, graph=graph, delta=delta), table.n)


def cs_curve(
    table: PairTable, ks: Sequence[float], *, rule: str = "paper", delta: int = 0
) -> tuple[list[float], list[float]]:
    """CS of the complete and of the incomplete graph at each K in ``ks`` (edge values computed once).

    Returns:
        ``(complete, incomplete)``, one value per K; each equals :func:`chunk_stickiness` at that K.
    """
    edges = edge_values(table, rule)
    complete = [structural_entropy(kept_edges(edges, k, graph="complete"), table.n) for k in ks]
    incomplete = [structural_entropy(kept_edges(edges, k, graph="incomplete", delta=delta), table.n) for k in ks]
    return complete, incomplete


def bc_estimate(table: PairTable, mode: str = "reference") -> Estimate:
    """Mean Boundary Clarity with its 95% interval: exact for a full table, else from the sampled boundaries.

    The sample is boundary ``v`` of each sampled chunk ``v`` (``table.sample``; without one,
    every boundary scored); the interval is :func:`~backend.metrics.estimate.mean_estimate`'s
    (t, finite-population corrected).
    """
    values = boundary_clarity(table, mode)
    n = table.n
    if not table.partial:
        finite = values[np.isfinite(values)]
        return exact_estimate(float(finite.mean()) if finite.size else None, max(0, n - 1))
    idx = np.arange(max(0, n - 1))
    scored = ~np.isnan(table.cond[idx, idx + 1]) & ~np.isnan(table.uncond[idx + 1])
    if table.sample is not None:
        drawn = np.zeros(idx.size, dtype=bool)
        drawn[[v for v in table.sample if v < n - 1]] = True
        scored &= drawn
    return mean_estimate(values, scored)


def cs_units(n: int, *, graph: str = "complete", delta: int = 0, window: int | None = None) -> np.ndarray:
    """The ``(n, n)`` mask of the ordered pairs CS's graph is made of: ``i != j``, within the window, ``j - i > δ``."""
    _check("graph", graph, GRAPHS)
    i, j = np.indices((n, n))
    mask = i != j
    if window is not None:
        mask &= np.abs(i - j) <= window
    if graph == "incomplete":
        mask &= (j - i) > delta
    return mask


def cs_estimate(
    table: PairTable,
    K: float = DEFAULT_K,
    *,
    rule: str = "paper",
    graph: str = "complete",
    delta: int = 0,
) -> Estimate:
    """Chunk Stickiness with its 95% interval: exact for a full table (:func:`chunk_stickiness`), else estimated.

    The units are the ordered pairs of the graph (within the table's window). The sample is
    ``table.sample``'s chunks, whose stars are scored, so their degrees are exact:
    :func:`~backend.metrics.estimate.degree_entropy_estimate` (a ratio estimator, delta-method
    t interval). Every pair of the graph scored (every chunk, or all but some whose pairs the
    others' stars hold): the exact value.
    """
    n = table.n
    window = table.window if table.complete else 1
    units = cs_units(n, graph=graph, delta=delta, window=window)
    total = int(units.sum())
    drawn = sorted(set(table.sample or ())) if table.partial else list(range(n))
    if len(drawn) >= n:
        return exact_estimate(chunk_stickiness(table, K, rule=rule, graph=graph, delta=delta), total)
    with np.errstate(invalid="ignore"):
        kept = units & (edge_values(table, rule) > K)  # nan (not scored) is never kept
    degrees = kept.sum(axis=0) + kept.sum(axis=1)
    in_star = np.zeros(n, dtype=bool)
    in_star[drawn] = True
    scored = int((units & (in_star[:, None] | in_star[None, :])).sum())
    if scored >= total:  # the drawn stars hold every pair of the graph (all chunks but a few): the exact value
        return exact_estimate(chunk_stickiness(table, K, rule=rule, graph=graph, delta=delta), total)
    return degree_entropy_estimate(degrees[drawn], n, scored, total)


def ds_estimate(vectors: np.ndarray) -> Estimate:
    """Mean dissimilarity with its 95% interval: rows of ``nan`` are chunks not embedded yet (a sample).

    A boundary is scored when both its chunks are embedded; with every chunk embedded, the exact mean.
    """
    v = np.asarray(vectors, dtype=np.float64)
    values = dissimilarity(v)
    if v.shape[0] < 2:
        return exact_estimate(None, 0)
    embedded = ~np.isnan(v).any(axis=1)
    return mean_estimate(values, embedded[:-1] & embedded[1:])


def dissimilarity(vectors: np.ndarray) -> np.ndarray:
    """``1 - cos`` between each pair of adjacent rows (rows need not be normalized)."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.shape[0] < 2:
        return np.zeros(0, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1)
    norms[norms == 0] = 1.0
    u = v / norms[:, None]
    return 1.0 - np.einsum("ij,ij->i", u[:-1], u[1:])
