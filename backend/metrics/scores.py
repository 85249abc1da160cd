"""Which chunk pairs the quality metrics need, scoring them through the output cache, and reading them back.

The formulas (:mod:`backend.metrics.formulas`) are arithmetic on one table of conditional
scores per chunking (:class:`~backend.metrics.formulas.PairTable`) and on its chunks'
embeddings; this module decides what those hold and computes them:

- Which pairs: :func:`required_pairs` (the adjacent pairs of BC; with CS every ordered pair, or
  those within a window), or for a sample the first chunks of :func:`sample_nodes` (a prefix of
  :func:`~backend.metrics.estimate.stratified_order`) with each one's :func:`node_pairs` (with CS
  its star: its row and its column of pairs, so its degree is exact; else its boundary pair).
  :func:`pair_requests` and :func:`sample_requests` are the ``(context, continuation)`` texts
  the scorer reads, each needed chunk given :data:`UNCONDITIONAL_CONTEXT` first.
- Tables from the values scored: :func:`table_from_values` (every pair) and
  :func:`partial_table` (a sample, ``nan`` elsewhere).
- Scoring: :func:`pair_table` and :func:`sampled_pair_table` go through
  :func:`backend.models.scoring.conditional_scores`, which caches every pair's value and batches
  every ``q`` of one ``d`` on ``d``'s cached keys and values; :func:`quality_report` scores one
  chunking and reports it (``python -m backend metrics``); :class:`LazyScorer` loads the model
  only when a pair is missing from the cache; :func:`information_support` is CP.
- Reading back without a model: :func:`cached_pair_table`, :func:`cached_sample_table` and
  :func:`cached_vectors`; :func:`table_key` / :func:`vectors_key` are the keys a session keeps
  them under. The keys name the chunks' spans on the document, not the configuration: a
  model-backed chunking changes with the model, and equal chunkings share their scores.
- The Quality page's background job, :func:`score_chunkings`. It is *anytime*: it scores a
  seeded sample of chunks first (with CS each chunk's star) in batches that grow, publishes
  :class:`~backend.metrics.estimate.QualityEstimates` after each, and goes on until every pair
  is scored, when its tables are exactly those of an exact run. A batch's pairs go to the scorer
  together, so the pairs of one context (a sampled chunk's row) share its keys and values.
  :func:`cached_sample_table` reads back what a cancelled job left (the leading sampled chunks
  whose pairs are all in the cache).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.chunking import Chunking
from backend.errors import ParameterError
from backend.metrics.estimate import Estimate, QualityEstimates, stratified_order
from backend.metrics.formulas import PairTable
from backend.metrics.report import METRICS, QualityReport, QualitySettings, model_needs, quality_row
from backend.models.embeddings import embed_texts, embeddings_key
from backend.models.scoring import cached_conditional_scores, conditional_scores, pair_work
from backend.models.types import ModelInfo
from backend.progress import Progress

__all__ = [
    "FIRST_REQUESTS",
    "SAMPLE_SEED",
    "UNCONDITIONAL_CONTEXT",
    "LazyScorer",
    "ScoringRun",
    "batch_sizes",
    "cached_pair_table",
    "cached_sample_table",
    "cached_vectors",
    "check_sample_size",
    "information_support",
    "node_pairs",
    "pair_requests",
    "pair_table",
    "partial_table",
    "quality_report",
    "required_pairs",
    "sample_nodes",
    "sample_requests",
    "sample_rounds",
    "sampled_pair_table",
    "sampled_vectors",
    "score_chunkings",
    "table_from_values",
    "table_key",
    "vectors_key",
]

UNCONDITIONAL_CONTEXT = " "  # the authors' context for ppl(q)
SAMPLE_SEED = 0  # the scoring job's sample order: fixed, so a page finds what a cancelled job left
FIRST_REQUESTS = 16  # about this many model passes in the first batch (never under 2 chunks), so the first estimate comes fast
GROWTH = 1.5  # each batch this much larger than the one before …
MOST_OF_TOTAL = 0.05  # … up to this fraction of the chunks, so the estimate is refreshed often to the end


# --- which pairs a table needs, and a sample's ----------------------------------------------------


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
    """A seeded sample of chunks whose pairs hold at least ``units`` units: a prefix of the stratified order.

    Chunks are taken in :func:`~backend.metrics.estimate.stratified_order` until their
    :func:`node_pairs` (distinct pairs) number ``units``, or every chunk is taken.

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


def check_sample_size(units: int) -> None:
    """Raise :class:`~backend.errors.ParameterError` when a sample asks for fewer than one unit (``--pairs``)."""
    if units < 1:
        raise ParameterError(f"pairs ({units}) must be at least 1")


def pair_requests(
    chunk_texts: Sequence[str], *, complete: bool = True, window: int | None = None
) -> list[tuple[str, str]]:
    """The ``(context, continuation)`` texts a chunking's table needs: each chunk given ``" "``, then
    :func:`required_pairs` in order (what :func:`table_from_values` reads back)."""
    texts = [str(t) for t in chunk_texts]
    pairs = required_pairs(len(texts), complete=complete, window=window)
    return [(UNCONDITIONAL_CONTEXT, t) for t in texts] + [(texts[i], texts[j]) for i, j in pairs]


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


# --- tables from the values scored ----------------------------------------------------------------


def table_from_values(n: int, values: Sequence[float], *, complete: bool, window: int | None) -> PairTable:
    """The pair table of ``n`` chunks from the values of their :func:`pair_requests`, in order."""
    pairs = required_pairs(n, complete=complete, window=window)
    uncond = np.array(values[:n], dtype=np.float64)
    cond = np.full((n, n), np.nan, dtype=np.float64)
    for (i, j), v in zip(pairs, values[n:], strict=True):
        cond[i, j] = v
    return PairTable(uncond=uncond, cond=cond, window=window if complete else 1, complete=complete)


def partial_table(
    n: int,
    uncond: dict[int, float],
    cond: dict[tuple[int, int], float],
    *,
    complete: bool,
    window: int | None,
    sample: Sequence[int],
) -> PairTable:
    """A :class:`~backend.metrics.formulas.PairTable` of the values scored so far (``partial``, ``nan`` elsewhere).

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


# --- scoring through the cache --------------------------------------------------------------------


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


def _no_pairs(n: int) -> tuple[PairTable, np.ndarray]:
    """The scores of a chunking of fewer than two chunks: no pair and no boundary, so no model call."""
    return PairTable(uncond=np.zeros(n), cond=np.full((n, n), np.nan), complete=True), np.zeros((n, 0))


def sampled_vectors(
    chunk_texts: Sequence[str], embedder: Any, *, units: int, seed: int, cache: Any = None
) -> np.ndarray:
    """The embeddings of the chunks around a seeded sample of at least ``units`` boundaries; ``nan`` rows elsewhere.

    The boundaries are those of :func:`sample_nodes` (the order BC's
    sample follows); every chunk sampled: the full embeddings (DS exact).

    Raises:
        ParameterError: ``units`` below 1.
    """
    check_sample_size(units)
    texts = [str(t) for t in chunk_texts]
    n = len(texts)
    chunks = sorted({k for i in sample_nodes(n, units, seed, complete=False) for k in (i, i + 1) if k < n})
    vectors, _hit = embed_texts(embedder, [texts[k] for k in chunks], cache=cache)
    vectors = np.asarray(vectors, dtype=np.float64)
    if len(chunks) == n:
        return vectors
    out = np.full((n, vectors.shape[1]), np.nan, dtype=np.float64)
    out[chunks] = vectors
    return out


def quality_report(
    chunk_texts: Sequence[str],
    token_counts: Sequence[int],
    *,
    metrics: Sequence[str] = METRICS,
    scorer: Any = None,
    embedder: Any = None,
    settings: QualitySettings = QualitySettings(),
    cache: Any = None,
    progress: Any = None,
    pairs: int | None = None,
    seed: int = 0,
) -> QualityReport:
    """Score one chunking (through the cache) and report its BC, CS (complete and incomplete) and DS.

    What ``python -m backend metrics`` prints; a chunking of fewer than two chunks needs no model.
    With ``pairs`` only a seeded sample is scored (:func:`sampled_pair_table`,
    :func:`sampled_vectors`: at least ``pairs`` units per metric) and the metrics are estimates
    with 95% intervals (:attr:`~backend.metrics.report.QualityReport.estimates`); without, every pair (exact).

    Args:
        chunk_texts: The chunks' texts in document order.
        token_counts: Their token counts (for ``mean_tokens``).
        metrics: Any of :data:`~backend.metrics.report.METRICS`.
        scorer: The language model (needed for ``bc`` and ``cs``).
        embedder: The embedder (needed for ``ds``); its vectors are cached.
        settings: K, rule, mode, δ and the pair window for CS (``settings.window``).
        cache: The output cache.
        progress: ``progress(done, total)`` for the model work; may raise ``Cancelled``.
        pairs: Score a sample of at least this many units per metric (None: every pair).
        seed: The sample's seed.

    Raises:
        ParameterError: an unknown metric, a model missing for the metrics asked for, or ``pairs`` below 1.
    """
    needs = model_needs(metrics)
    if pairs is not None and pairs < 1:
        raise ParameterError(f"pairs ({pairs}) must be at least 1")
    texts = [str(t) for t in chunk_texts]
    table = vectors = None
    if len(texts) < 2:
        table, vectors = _no_pairs(len(texts))
    else:
        if needs.scorer:
            if scorer is None:
                raise ParameterError("bc and cs need a language model")
            if pairs is None:
                table = pair_table(
                    texts, scorer, complete=needs.complete, window=settings.window, cache=cache, progress=progress
                )
            else:
                table = sampled_pair_table(
                    texts, scorer, units=pairs, seed=seed, complete=needs.complete, window=settings.window,
                    cache=cache, progress=progress, boundaries="bc" in metrics,
                )
        if needs.embedder:
            if embedder is None:
                raise ParameterError("ds needs an embedder")
            if pairs is None:
                vectors, _hit = embed_texts(embedder, texts, cache=cache)
            else:
                vectors = sampled_vectors(texts, embedder, units=pairs, seed=seed, cache=cache)
    return quality_row(token_counts, table=table, vectors=vectors, metrics=metrics, settings=settings)


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


def information_support(retrieved: Sequence[str], answer: str, scorer: Any, *, cache: Any = None) -> float:
    """CP: the mean NLL of ``answer``'s tokens given the retrieved chunks joined by blank lines (lower = better).

    MoC's information support (A.4), ``CP = -(1/M) Σ log P(a_i | C)``: one pair ``(C, answer)``
    scored through the cache, not a function of a chunking's pair table.
    """
    if not answer:
        raise ParameterError("the answer is empty: CP needs at least one answer token")
    context = "\n\n".join(str(c) for c in retrieved) or UNCONDITIONAL_CONTEXT
    return float(conditional_scores([(context, answer)], scorer, cache=cache)[0])


# --- keys, and reading scores back without a model ------------------------------------------------


def _spans(chunking: Chunking) -> tuple[tuple[int, int], ...]:
    """The chunks' ``(start, end)`` offsets, in order."""
    return tuple((c.start, c.end) for c in chunking.chunks)


def table_key(chunking: Chunking, model: Hashable, *, complete: bool, window: int | None) -> tuple:
    """The key of a chunking's pair table: ``("table", doc id, spans, model, complete, window)``.

    Args:
        chunking: The chunking (its document and its chunks' spans).
        model: The language model's identity (None without one).
        complete: Whether the table holds every pair (CS) or only the adjacent ones (BC).
        window: The pair window (None: every pair).
    """
    return ("table", chunking.doc_id, _spans(chunking), model, complete, window)


def vectors_key(chunking: Chunking, embedder: str | None) -> tuple:
    """The key of a chunking's chunk embeddings: ``("vectors", doc id, spans, embedder fingerprint)``."""
    return ("vectors", chunking.doc_id, _spans(chunking), embedder)


def cached_vectors(cache: Any, fingerprint: str, texts: Sequence[str]) -> np.ndarray | None:
    """The embeddings of ``texts`` by the embedder ``fingerprint`` from the output cache alone, or None.

    A plain lookup (no compute lock), so a page never waits for a job embedding the same texts.
    """
    texts = list(texts)
    value = cache.get(embeddings_key(fingerprint, texts)) if cache is not None and texts else None
    if value is None:
        return None
    vectors = np.asarray(value["vectors"], dtype=np.float32)
    return vectors if vectors.shape[0] == len(texts) else None


def cached_pair_table(
    texts: Sequence[str], scorer: Any, *, complete: bool, window: int | None, cache: Any
) -> PairTable:
    """:func:`pair_table` through a scorer that refuses to compute: a cache-only lookup.

    The first and the last adjacent pair (needed by every table) are looked up first, so a
    chunking never scored costs a few cache reads, not n² of them, on every page run.
    ``scorer``'s refusal (e.g. the app's ``NotCached``) propagates on the first miss.
    """
    texts = list(texts)
    if len(texts) > 3:
        for probe in (texts[:2], texts[-2:]):
            pair_table(probe, scorer, complete=False, cache=cache)
    return pair_table(texts, scorer, complete=complete, window=window, cache=cache)


def cached_sample_table(
    texts: Sequence[str], info: Any, *, complete: bool, window: int | None, cache: Any, seed: int = SAMPLE_SEED
) -> PairTable | None:
    """What a cancelled scoring job left in the cache: a partial table of its leading sampled chunks, or None.

    Reads the chunks in the job's sample order (:data:`SAMPLE_SEED`) until the first whose pairs
    are not all cached; no model. None when not even the first two are (no interval yet).

    Args:
        texts: The chunks' texts.
        info: The language model's :class:`~backend.models.types.ModelInfo` (the cache keys' identity).
        complete: The table CS needs (stars) or BC's (boundary pairs).
        window: The pair window.
        cache: The output cache.
        seed: The sample's seed.
    """
    texts = [str(t) for t in texts]
    n = len(texts)
    if cache is None or n < 2:
        return None
    uncond: dict[int, float] = {}
    cond: dict[tuple[int, int], float] = {}
    nodes: list[int] = []
    for v in stratified_order(n, seed):
        requests, pairs, needed = sample_requests(texts, [v], complete=complete, window=window)
        todo = [(j, r) for j, r in zip(needed, requests, strict=False) if j not in uncond]
        values = cached_conditional_scores([r for _, r in todo] + requests[len(needed):], info, cache)
        if any(x is None for x in values):
            break
        uncond.update((j, float(x)) for (j, _), x in zip(todo, values, strict=False))  # type: ignore[arg-type]
        cond.update((p, float(x)) for p, x in zip(pairs, values[len(todo):], strict=True))  # type: ignore[arg-type]
        nodes.append(v)
    if len(nodes) < 2:
        return None
    if len(nodes) >= n:  # everything is cached: the full table
        requests = pair_requests(texts, complete=complete, window=window)
        values = cached_conditional_scores(requests, info, cache)
        if all(x is not None for x in values):
            return table_from_values(n, values, complete=complete, window=window)  # type: ignore[arg-type]
    return partial_table(n, uncond, cond, complete=complete, window=window, sample=nodes)


# --- the Quality page's anytime job ---------------------------------------------------------------


def batch_sizes(n: int, first: int) -> list[int]:
    """How many chunks (of ``n``, in the sample order) each batch of the anytime job takes.

    ``first`` chunks, then each batch ``GROWTH`` times the one before, at most ``MOST_OF_TOTAL``
    of ``n`` (never fewer than ``first``), until all ``n`` are taken.

    >>> batch_sizes(100, 3)
    [3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 2]
    """
    sizes: list[int] = []
    size, cap, left = max(1, first), max(first, math.ceil(MOST_OF_TOTAL * n)), n
    while left > 0:
        take = min(size, cap, left)
        sizes.append(take)
        left -= take
        size = math.ceil(size * GROWTH)
    return sizes


def sample_rounds(texts: Sequence[Sequence[str]], *, complete: bool, window: int | None) -> list[tuple[int, ...]]:
    """How many chunks of each chunking (in its sample order) the anytime job has taken after each of its rounds.

    The chunking with the most chunks takes :func:`batch_sizes` of them (about
    :data:`FIRST_REQUESTS` model passes first); every other one takes the same share of its own.
    The job publishes estimates after every round but the last, which takes every chunk: the
    first round is what the first estimates with intervals cost (:func:`~backend.metrics.cost.first_estimate_cost`).

    >>> sample_rounds([["a"] * 20, ["b"] * 10], complete=False, window=None)
    [(8, 4), (16, 8), (20, 10)]
    """
    if not texts or not max(len(t) for t in texts):
        return []
    biggest = max(range(len(texts)), key=lambda k: len(texts[k]))
    n_max = len(texts[biggest])
    per_chunk = len(pair_requests(list(texts[biggest]), complete=complete, window=window)) / n_max
    rounds, sampled = [], 0
    for size in batch_sizes(n_max, max(2, round(FIRST_REQUESTS / max(per_chunk, 1.0)))):
        sampled += size
        rounds.append(tuple(
            len(t) if sampled >= n_max else min(len(t), math.ceil(sampled / n_max * len(t))) for t in texts
        ))
    return rounds


@dataclass(frozen=True, eq=False)
class ScoringRun:
    """What :func:`score_chunkings` computed, and how long it took.

    Attributes:
        results: Per chunking, ``(table, vectors)`` (None where not asked for).
        seconds: Wall time of the scoring (model loading before the call excluded).
    """

    results: tuple[tuple[PairTable | None, np.ndarray | None], ...]
    seconds: float


def _estimates(
    chunkings: Sequence[Chunking], tables: Sequence[PairTable | None], vectors: Sequence[np.ndarray | None],
    settings: QualitySettings, done: int, total: int,
) -> QualityEstimates:
    """What the job knows so far, as the page shows it: per chunking each computed metric's estimate."""
    per: list[dict[str, Estimate]] = []
    for ch, table, vec in zip(chunkings, tables, vectors, strict=True):
        report = quality_row(ch.token_counts, table=table, vectors=vec, metrics=METRICS, settings=settings)
        per.append({k: e for k, e in report.estimates.items() if e is not None})
    return QualityEstimates(tuple(per), done, total, tuple(tables), tuple(vectors))


def score_chunkings(
    chunkings: Sequence[Chunking],
    *,
    scorer: Any,
    embedder: Callable[[], Any] | None,
    complete: bool,
    window: int | None,
    cache: Any,
    progress: Progress | None = None,
    settings: QualitySettings | None = None,
    seed: int = SAMPLE_SEED,
) -> ScoringRun:
    """Score every chunking's pairs and embed its chunks (the Quality page's background job), anytime.

    The chunks are taken in a seeded stratified order (``seed``), in batches of
    :func:`batch_sizes` (about :data:`FIRST_REQUESTS` model passes first): each batch scores the
    pairs its chunks bring (:func:`node_pairs`: with ``complete`` a
    chunk's row and column, else its boundary pair) for every chunking at once, then
    ``progress.publish`` gets a :class:`~backend.metrics.estimate.QualityEstimates` (per
    chunking, each metric's estimate with its 95% interval under ``settings``, and the partial
    tables). The embeddings (DS) are computed after the first batch. Once every chunk is taken,
    the tables are exactly an exact run's (the same values, read through the same function).

    Everything goes through ``cache``, so chunkings scored before are read back at once and a
    cancelled job's pairs are kept. ``progress`` counts pairs (``216 / 1,048 pairs``), each
    distinct pair still missing from the cache once — on a fresh cache exactly
    :func:`~backend.metrics.cost.cost_estimate`'s ``pairs`` for the same chunk texts. Without a
    scorer it counts the texts embedded.

    Args:
        chunkings: The chunkings, in order.
        scorer: The language model (None: no pair table, i.e. no BC or CS).
        embedder: A function returning the embedder (called once, in the job, so loading it
            happens there); None: no vectors (no DS).
        complete: Score every ordered pair (CS), not only adjacent ones (BC).
        window: Pair window ``w`` (only ``|i - j| <= w``), None for every pair.
        cache: The output cache.
        progress: ``progress(done, total)``; raises ``Cancelled`` after a cancel.
        settings: K, the rule, the mode and δ the published estimates are computed under (None:
            the defaults with ``window``); the final tables do not depend on them.
        seed: The sample order's seed.
    """
    progress = progress or Progress()
    settings = settings or QualitySettings(window=window)
    started = time.perf_counter()
    texts = [[c.text for c in ch.chunks] for ch in chunkings]
    tables: list[PairTable | None] = [None] * len(chunkings)
    vectors: list[np.ndarray | None] = [None] * len(chunkings)

    def embed() -> None:
        if embedder is None or all(v is not None for v in vectors):
            return
        loaded = None
        total, done = sum(len(t) for t in texts), 0
        counted = scorer is None  # with a scorer the count is the pairs (embedding takes seconds)
        if counted:
            progress.set_unit("texts")
        for k, t in enumerate(texts):
            progress.check()
            if loaded is None:
                loaded = embedder()
            part = progress.slice(done, len(t), total) if counted else None
            vectors[k], _hit = embed_texts(loaded, t, cache=cache, progress=part)
            done += len(t)

    if scorer is None:
        embed()
        return ScoringRun(results=tuple(zip(tables, vectors, strict=True)), seconds=time.perf_counter() - started)

    requests = [pair_requests(t, complete=complete, window=window) for t in texts]
    distinct = list(dict.fromkeys(r for rs in requests for r in rs))
    known: dict[tuple[str, str], float] = {}
    if cache is not None:
        found = cached_conditional_scores(distinct, scorer.info, cache)
        known = {r: v for r, v in zip(distinct, found, strict=True) if v is not None}
    missing = [r for r in distinct if r not in known]
    # The count is the whole job's, weighed as the cost estimate weighs it (pair_cost), so its ETA is
    # every configuration's and every batch's remaining work at the measured rate.
    weight = dict(zip(missing, pair_work(missing), strict=True))
    total, total_work = len(missing), float(sum(weight.values()))
    done, done_work = 0, 0.0
    progress.set_unit("pairs")
    progress(0, total, work=(0.0, total_work))

    def score(todo: list[tuple[str, str]]) -> None:
        nonlocal done, done_work
        todo = [r for r in dict.fromkeys(todo) if r not in known]
        if not todo:
            return
        work = float(sum(weight[r] for r in todo))
        part = progress.slice(done, len(todo), total, work=(done_work, work, total_work))
        values = conditional_scores(todo, scorer, cache=cache, progress=part)
        known.update(zip(todo, values, strict=True))
        done, done_work = done + len(todo), done_work + work
        progress(done, total, work=(done_work, total_work))

    orders = [stratified_order(len(t), seed) for t in texts]
    taken = [0] * len(texts)
    rounds = sample_rounds(texts, complete=complete, window=window)
    for r, upto in enumerate(rounds):
        batch: list[tuple[str, str]] = []
        for k, t in enumerate(texts):
            batch += sample_requests(t, orders[k][taken[k]:upto[k]], complete=complete, window=window)[0]
            taken[k] = upto[k]
        score(batch)
        if r == len(rounds) - 1:
            break
        partial = [_sample_table(t, orders[k][: taken[k]], known, complete, window) for k, t in enumerate(texts)]
        progress.publish(_estimates(chunkings, partial, vectors, settings, done, total))
        if embedder is not None and any(v is None for v in vectors):
            embed()
            progress.publish(_estimates(chunkings, partial, vectors, settings, done, total))
    score(distinct)  # what no sampled chunk brings (BC's table holds the first chunk's ``uncond`` too)
    for k, (t, rs) in enumerate(zip(texts, requests, strict=True)):
        tables[k] = table_from_values(len(t), [known[r] for r in rs], complete=complete, window=window)
    embed()
    progress.publish(_estimates(chunkings, tables, vectors, settings, done, total))
    return ScoringRun(results=tuple(zip(tables, vectors, strict=True)), seconds=time.perf_counter() - started)


def _sample_table(
    texts: Sequence[str], nodes: Sequence[int], known: dict[tuple[str, str], float], complete: bool,
    window: int | None,
) -> PairTable:
    """The partial table of the sampled chunks ``nodes`` from the values scored so far."""
    _requests, pairs, needed = sample_requests(texts, nodes, complete=complete, window=window)
    uncond = {j: known[(UNCONDITIONAL_CONTEXT, texts[j])] for j in needed}
    cond = {(i, j): known[(texts[i], texts[j])] for i, j in pairs}
    return partial_table(len(texts), uncond, cond, complete=complete, window=window, sample=nodes)
