"""Chunk-quality metrics of MoC (Zhao et al., 2025): Boundary Clarity, Chunk Stickiness, dissimilarity, CP.

Everything stands on one table of conditional scores per chunking (:class:`PairTable`): the
mean NLL of each chunk ``q`` given each context chunk ``d`` that a metric needs, and given a
single space (the authors' code's context for the unconditional ``ppl(q)``). The table is
filled through :func:`backend.models.scoring.conditional_scores`, which caches every pair's value
and batches every ``q`` of one ``d`` on ``d``'s cached keys and values; the metrics are then
arithmetic on it, so changing ``K``, the rule or the graph never calls the model. One
chunking's row of them (what the CLI's ``metrics`` prints and the Quality page's table
shows) is :func:`backend.metrics.report.quality_row`.

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
    (``PairTable.sample``, a prefix of :func:`~backend.metrics.estimate.stratified_order`, see
    :func:`sample_nodes`), with ``nan`` where not scored: with CS each sampled chunk's star (its
    row and its column of pairs, :func:`node_pairs`), without it its boundary pair.
    :func:`bc_estimate` and :func:`ds_estimate` are means over the sampled boundaries (a t
    interval with the finite-population correction); :func:`cs_estimate` is the ratio estimator
    of CS from the sampled chunks' exact degrees (a delta-method t interval). Every chunk
    sampled: the exact value.
Information support (A.4)
    ``CP = -(1/M) Σ log P(a_i | C)``: the mean NLL of the answer's tokens given the retrieved
    chunks joined by blank lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.errors import ParameterError
from backend.metrics.estimate import Estimate, degree_entropy_estimate, exact_estimate, mean_estimate, stratified_order
from backend.models.scoring import conditional_scores
from backend.models.types import ModelInfo

__all__ = [
    "check_sample_size",
    "BC_MODES",
    "CS_RULES",
    "GRAPHS",
    "DEFAULT_K",
    "LazyScorer",
    "PairTable",
    "UNCONDITIONAL_CONTEXT",
    "bc_estimate",
    "boundary_clarity",
    "chunk_stickiness",
    "cs_estimate",
    "cs_units",
    "ds_estimate",
    "cs_curve",
    "dissimilarity",
    "edge_values",
    "information_support",
    "kept_edges",
    "pair_requests",
    "pair_table",
    "partial_table",
    "sample_requests",
    "sampled_pair_table",
    "required_pairs",
    "node_pairs",
    "sample_nodes",
    "stickiness_edges",
    "structural_entropy",
    "table_from_values",
]

BC_MODES = ("reference", "paper")
CS_RULES = ("paper", "reference")
GRAPHS = ("complete", "incomplete")
UNCONDITIONAL_CONTEXT = " "  # the authors' context for ppl(q)
DEFAULT_K = 0.8


def _check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ParameterError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def required_pairs(n: int, *, complete: bool = True, window: int | None = None) -> list[tuple[int, int]]:
    """The ordered chunk pairs ``(i, j)`` (d = chunk i, q = chunk j) to score.

    Adjacent pairs ``(i, i+1)`` always (Boundary Clarity); with ``complete`` every ordered
    pair ``i != j``, or only those with ``|i - j| <= window`` when a window is given.
    """
    if window is not None and window < 1:
        raise ParameterError(f"window ({window}) must be at least 1")
    pairs = {(i, i + 1) for i in range(n - 1)}
    if complete:
        for i in range(n):
            for j in range(n):
                if i != j and (window is None or abs(i - j) <= window):
                    pairs.add((i, j))
    return sorted(pairs)


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
            :func:`node_pairs` are scored); None for a full table.
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


def pair_table(
    chunk_texts: Sequence[str],
    scorer: Any,
    *,
    complete: bool = True,
    window: int | None = None,
    cache: Any = None,
    progress: Any = None,
) -> PairTable:
    """Score the pairs the metrics need (see :func:`required_pairs`) through the cache.

    Args:
        chunk_texts: The chunks' texts, in document order.
        scorer: A :class:`~backend.models.types.Scorer`.
        complete: Score every ordered pair (Chunk Stickiness); False: adjacent pairs only.
        window: Only pairs with ``|i - j| <= window`` (with ``complete``).
        cache: The output cache (None: compute everything).
        progress: ``progress(done, total)``; may raise ``Cancelled``.
    """
    texts = [str(t) for t in chunk_texts]
    requests = pair_requests(texts, complete=complete, window=window)
    values = conditional_scores(requests, scorer, cache=cache, progress=progress)
    return table_from_values(len(texts), values, complete=complete, window=window)


def check_sample_size(units: int) -> None:
    """Raise :class:`ParameterError` when a sample asks for fewer than one unit (``--pairs``)."""
    if units < 1:
        raise ParameterError(f"pairs ({units}) must be at least 1")


def sampled_pair_table(
    chunk_texts: Sequence[str],
    scorer: Any,
    *,
    units: int,
    seed: int,
    complete: bool = True,
    window: int | None = None,
    cache: Any = None,
    progress: Any = None,
    boundaries: bool = True,
) -> PairTable:
    """Score a seeded sample of at least ``units`` units per metric (through the cache): a partial table.

    The chunks are the first of :func:`sample_nodes`: as many as hold ``units`` boundaries (BC),
    and with ``complete`` at least as many as hold ``units`` pairs in their stars (CS); each
    scored pair's ``uncond`` is scored too. When the sample takes every chunk, the table is the
    full one (:func:`pair_table`, exact). ``boundaries=False`` (CS without BC, ``complete``
    only) samples only the chunks CS needs.

    Raises:
        ParameterError: ``units`` below 1.
    """
    check_sample_size(units)
    texts = [str(t) for t in chunk_texts]
    n = len(texts)
    nodes = sample_nodes(n, units, seed, complete=False) if boundaries or not complete else []
    if complete:
        stars = sample_nodes(n, units, seed, complete=True, window=window)
        nodes = nodes if len(nodes) >= len(stars) else stars  # both are prefixes of the same order
    if len(nodes) >= n:
        return pair_table(texts, scorer, complete=complete, window=window, cache=cache, progress=progress)
    requests, pairs, needed = sample_requests(texts, nodes, complete=complete, window=window)
    values = conditional_scores(requests, scorer, cache=cache, progress=progress)
    uncond = dict(zip(needed, values[: len(needed)], strict=True))
    cond = dict(zip(pairs, values[len(needed) :], strict=True))
    return partial_table(n, uncond, cond, complete=complete, window=window, sample=nodes)


def sample_requests(
    chunk_texts: Sequence[str], nodes: Sequence[int], *, complete: bool, window: int | None
) -> tuple[list[tuple[str, str]], list[tuple[int, int]], list[int]]:
    """The ``(context, continuation)`` texts sampled chunks need: each needed chunk given ``" "``, then their pairs.

    Returns:
        ``(requests, pairs, needed)``: the requests, the pairs ``(i, j)`` (distinct, in the
        nodes' order, each context's pairs together) and the chunks whose ``uncond`` they need,
        so that ``requests == [(" ", texts[j]) for j in needed] + [(texts[i], texts[j]) for i, j in pairs]``.
    """
    texts = [str(t) for t in chunk_texts]
    n = len(texts)
    pairs = list(dict.fromkeys(p for v in nodes for p in node_pairs(n, v, complete=complete, window=window)))
    needed = sorted({j for _, j in pairs})
    requests = [(UNCONDITIONAL_CONTEXT, texts[j]) for j in needed] + [(texts[i], texts[j]) for i, j in pairs]
    return requests, pairs, needed


def pair_requests(
    chunk_texts: Sequence[str], *, complete: bool = True, window: int | None = None
) -> list[tuple[str, str]]:
    """The ``(context, continuation)`` texts a chunking's table needs: each chunk given ``" "``, then
    :func:`required_pairs` in order (what :func:`table_from_values` reads back)."""
    texts = [str(t) for t in chunk_texts]
    pairs = required_pairs(len(texts), complete=complete, window=window)
    return [(UNCONDITIONAL_CONTEXT, t) for t in texts] + [(texts[i], texts[j]) for i, j in pairs]


def node_pairs(n: int, v: int, *, complete: bool = True, window: int | None = None) -> list[tuple[int, int]]:
    """The pairs a sampled chunk ``v`` brings among :func:`required_pairs`: its star, or its boundary pair.

    With ``complete`` (CS), its row ``(v, j)`` and its column ``(i, v)`` within the window, so its
    degree in the stickiness graph is exact; without, the adjacent pair ``(v, v+1)`` (none for
    the last chunk). The row's pairs share their context (the scorer reads it once for all).

    >>> node_pairs(5, 2, window=1), node_pairs(5, 3, complete=False), node_pairs(5, 4, complete=False)
    ([(2, 1), (2, 3), (1, 2), (3, 2)], [(3, 4)], [])
    """
    if not complete:
        return [(v, v + 1)] if v < n - 1 else []
    lo, hi = (0, n) if window is None else (max(0, v - window), min(n, v + window + 1))
    return [(v, j) for j in range(lo, hi) if j != v] + [(i, v) for i in range(lo, hi) if i != v]


def sample_nodes(
    n: int, units: int, seed: int, *, complete: bool = True, window: int | None = None
) -> list[int]:
    """A seeded sample of chunks whose pairs hold at least ``units`` units: a prefix of :func:`stratified_order`.

    Chunks are taken in the stratified order until their :func:`node_pairs` (distinct pairs)
    number ``units``, or every chunk is taken.

    >>> sample_nodes(6, 2, 0, complete=False)
    [5, 1, 3]
    """
    if units < 0:
        raise ParameterError(f"units ({units}) must be at least 0")
    nodes: list[int] = []
    held: set[tuple[int, int]] = set()
    for v in stratified_order(n, seed):
        if len(held) >= units:
            break
        nodes.append(v)
        held.update(node_pairs(n, v, complete=complete, window=window))
    return nodes


def partial_table(
    n: int,
    uncond: dict[int, float],
    cond: dict[tuple[int, int], float],
    *,
    complete: bool,
    window: int | None,
    sample: Sequence[int],
) -> PairTable:
    """A :class:`PairTable` of the values scored so far (``partial=True``; ``nan`` where not scored).

    Args:
        n: Number of chunks.
        uncond: ``uncond[j]`` scored so far.
        cond: ``cond[(i, j)]`` scored so far.
        complete: Whether the table is CS's (stars sampled) or BC's (boundaries).
        window: The pair window.
        sample: The sampled chunks whose :func:`node_pairs` are all in ``cond`` (and their ``uncond``).
    """
    u = np.full(n, np.nan, dtype=np.float64)
    for j, v in uncond.items():
        u[j] = v
    c = np.full((n, n), np.nan, dtype=np.float64)
    for (i, j), v in cond.items():
        c[i, j] = v
    return PairTable(
        uncond=u, cond=c, window=window if complete else 1, complete=complete, partial=True,
        sample=tuple(int(v) for v in sample),
    )


def table_from_values(n: int, values: Sequence[float], *, complete: bool, window: int | None) -> PairTable:
    """The :class:`PairTable` of ``n`` chunks from the values of their :func:`pair_requests`, in order."""
    pairs = required_pairs(n, complete=complete, window=window)
    uncond = np.array(values[:n], dtype=np.float64)
    cond = np.full((n, n), np.nan, dtype=np.float64)
    for (i, j), v in zip(pairs, values[n:], strict=True):
        cond[i, j] = v
    return PairTable(uncond=uncond, cond=cond, window=window if complete else 1, complete=complete)


class LazyScorer:
    """A scorer that loads its model only when a pair is missing from the cache.

    ``conditional_scores`` keys pairs by ``info.fingerprint`` and ``info.kind``; when the
    fingerprint is known without loading (a GGUF model, see
    :func:`~backend.models.identity.fingerprint_without_loading`), this stand-in carries it,
    so a fully cached rerun (another K, rule or mode) never loads the model.

    Args:
        context: The :class:`~backend.chunkers.context.ModelContext` that loads the model.
    """

    def __init__(self, context: Any) -> None:
        self._context = context
        fp = context.fingerprint
        if fp is None:  # identity unknown until loaded: load now
            self.info = context.get_scorer().info
        else:
            loaded = context.scorer
            self.info = loaded.info if loaded is not None else ModelInfo("", "", "lm", 0, "", "", fp)

    def conditional_nll(self, pairs: Any, *, progress: Any = None) -> list[float]:
        """Load the model (once) and score ``pairs``."""
        scorer = self._context.get_scorer()
        if scorer.info.fingerprint != self.info.fingerprint or scorer.info.kind != self.info.kind:
            raise RuntimeError("the loaded model is not the one the cache keys were made for")
        return scorer.conditional_nll(pairs, progress=progress)


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


def information_support(retrieved: Sequence[str], answer: str, scorer: Any, *, cache: Any = None) -> float:
    """CP: the mean NLL of ``answer``'s tokens given the retrieved chunks joined by blank lines (lower = better)."""
    if not answer:
        raise ParameterError("the answer is empty: CP needs at least one answer token")
    context = "\n\n".join(str(c) for c in retrieved) or UNCONDITIONAL_CONTEXT
    return float(conditional_scores([(context, answer)], scorer, cache=cache)[0])
