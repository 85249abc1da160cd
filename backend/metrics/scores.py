"""The model outputs the quality metrics stand on: scoring chunkings, reading them back, and their keys.

A chunking's pair table (:func:`~backend.metrics.quality.pair_table`) and its chunks'
embeddings go through the output cache; :func:`score_chunkings` is the Quality page's
background job, :func:`cached_pair_table` and :func:`cached_vectors` read the same entries back
without a model, and :func:`table_key` / :func:`vectors_key` are the keys a session keeps
them under. The keys name the chunks' spans on the document, not the configuration: a
model-backed chunking changes with the model, and equal chunkings share their scores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.chunking import Chunking
from backend.metrics.quality import PairTable, pair_requests, pair_table, table_from_values
from backend.progress import Progress

__all__ = ["ScoringRun", "cached_pair_table", "cached_vectors", "score_chunkings", "table_key", "vectors_key"]


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
    from backend.models.embeddings import embeddings_key

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


@dataclass(frozen=True, eq=False)
class ScoringRun:
    """What :func:`score_chunkings` computed, and how long it took.

    Attributes:
        results: Per chunking, ``(table, vectors)`` (None where not asked for).
        seconds: Wall time of the scoring (model loading before the call excluded).
    """

    results: tuple[tuple[PairTable | None, np.ndarray | None], ...]
    seconds: float


def score_chunkings(
    chunkings: Sequence[Chunking],
    *,
    scorer: Any,
    embedder: Callable[[], Any] | None,
    complete: bool,
    window: int | None,
    cache: Any,
    progress: Progress | None = None,
) -> ScoringRun:
    """Score every chunking's pairs and embed its chunks (the Quality page's background job).

    Everything goes through ``cache``, so chunkings scored before are read back at once. The
    pairs of all chunkings go to the scorer as one run, so ``progress`` counts what the cost
    estimate counts: pairs (``216 / 1,048 pairs``), each distinct pair still missing from the
    cache once — on a fresh cache exactly :func:`~backend.metrics.cost.cost_estimate`'s
    ``pairs`` for the same chunk texts. Without a scorer it counts the texts embedded.

    Args:
        chunkings: The chunkings, in order.
        scorer: The language model (None: no pair table, i.e. no BC or CS).
        embedder: A function returning the embedder (called once, in the job, so loading it
            happens there); None: no vectors (no DS).
        complete: Score every ordered pair (CS), not only adjacent ones (BC).
        window: Pair window ``w`` (only ``|i - j| <= w``), None for every pair.
        cache: The output cache.
        progress: ``progress(done, total)``; raises ``Cancelled`` after a cancel.
    """
    from backend.models.embeddings import embed_texts
    from backend.models.scoring import conditional_scores

    progress = progress or Progress()
    started = time.perf_counter()
    texts = [[c.text for c in ch.chunks] for ch in chunkings]
    tables: list[PairTable | None] = [None] * len(chunkings)
    if scorer is not None:
        requests = [pair_requests(t, complete=complete, window=window) for t in texts]
        values = conditional_scores([r for rs in requests for r in rs], scorer, cache=cache, progress=progress)
        at = 0
        for k, (t, rs) in enumerate(zip(texts, requests, strict=True)):
            tables[k] = table_from_values(len(t), values[at : at + len(rs)], complete=complete, window=window)
            at += len(rs)
    vectors: list[np.ndarray | None] = [None] * len(chunkings)
    if embedder is not None:
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
    return ScoringRun(results=tuple(zip(tables, vectors, strict=True)), seconds=time.perf_counter() - started)
