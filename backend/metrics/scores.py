"""The model outputs the quality metrics stand on: scoring chunkings, reading them back, and their keys.

A chunking's pair table (:func:`~backend.metrics.quality.pair_table`) and its chunks'
embeddings go through the output cache; :func:`score_chunkings` is the Quality page's
background job, :func:`cached_pair_table` and :func:`cached_vectors` read the same entries back
without a model, and :func:`table_key` / :func:`vectors_key` are the keys a session keeps
them under. The keys name the chunks' spans on the document, not the configuration: a
model-backed chunking changes with the model, and equal chunkings share their scores.

The job is *anytime*: it scores a seeded sample of chunks first (a prefix of
:func:`~backend.metrics.estimate.stratified_order`, with CS each chunk's star of pairs, see
:func:`~backend.metrics.quality.node_pairs`) in batches that grow, publishes
:class:`~backend.metrics.estimate.QualityEstimates` after each, and goes on until every pair is
scored, when its tables are exactly those of an exact run. A batch's pairs go to the scorer
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
from backend.metrics.estimate import Estimate, QualityEstimates, stratified_order
from backend.metrics.quality import (
    UNCONDITIONAL_CONTEXT,
    PairTable,
    pair_requests,
    pair_table,
    partial_table,
    sample_requests,
    table_from_values,
)
from backend.metrics.report import METRICS, QualitySettings, quality_row
from backend.models.embeddings import embed_texts, embeddings_key
from backend.models.scoring import cached_conditional_scores, conditional_scores, pair_work
from backend.progress import Progress

__all__ = [
    "FIRST_REQUESTS",
    "SAMPLE_SEED",
    "ScoringRun",
    "batch_sizes",
    "cached_pair_table",
    "cached_sample_table",
    "cached_vectors",
    "sample_rounds",
    "score_chunkings",
    "table_key",
    "vectors_key",
]

SAMPLE_SEED = 0  # the scoring job's sample order: fixed, so a page finds what a cancelled job left
FIRST_REQUESTS = 16  # about this many model passes in the first batch (never under 2 chunks), so the first estimate comes fast
GROWTH = 1.5  # each batch this much larger than the one before …
MOST_OF_TOTAL = 0.05  # … up to this fraction of the chunks, so the estimate is refreshed often to the end


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
    """:func:`~backend.metrics.quality.pair_table` through a scorer that refuses to compute: a cache-only lookup.

    The first and the last adjacent pair (needed by every table) are looked up first, so a
    chunking never scored costs a few cache reads, not n² of them, on every page run.
    ``scorer``'s refusal (e.g. the app's ``NotCached``) propagates on the first miss.
    """
    texts = list(texts)
    if len(texts) > 3:
        for probe in (texts[:2], texts[-2:]):
            pair_table(probe, scorer, complete=False, cache=cache)
    return pair_table(texts, scorer, complete=complete, window=window, cache=cache)


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
    pairs its chunks bring (:func:`~backend.metrics.quality.node_pairs`: with ``complete`` a
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
