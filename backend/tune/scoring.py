"""Score one configuration on some of the questions: per-question objective values and the chunking's statistics.

A tuning run scores each configuration several times on parts of one question set (the pruner's
subset, the rest of the tuning questions, the held-out questions). :class:`Scorer` keeps what those
calls share for the whole run: one embedder, one Chroma store (embedded, in the run's output
folder, so a resumed run finds its indexes) and the output cache of embeddings. A configuration's
chunks are indexed once and every later call only embeds and answers its questions; the
restricted set keeps every corpus, so retrieval runs over the same chunks whichever questions ask
(:func:`backend.retrieval.evaluate.evaluate`, cross-corpus as the Chroma report).

Chunk statistics (chunks, mean and max tokens, ``index_cost``: the tokens embedded to index it,
overlap counted) come from chunking every corpus once; a constraint is checked on them before
any embedding (:meth:`Scorer.stats`).

The ``bc`` objective (MoC's Boundary Clarity) rests on no question: :meth:`Scorer.boundary_clarity`
scores a configuration's boundaries on every corpus with the language model, through the output
cache, on a seeded sample of at most ``boundaries`` of them (exact when the chunking has fewer):
:func:`backend.metrics.scores.quality_report` with ``metrics=("bc",)``. A run on several corpora
pools their boundaries: the estimate is the boundary-weighted mean of the corpora's, its interval's
half-width the weighted root-sum-square of theirs (each corpus is sampled independently).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.errors import ModelError, ParameterError
from backend.metrics.intervals import Interval
from backend.metrics.scores import quality_report
from backend.models.cache import default_cache
from backend.models.embeddings import TextEmbedder, load_text_embedder
from backend.models.types import Scorer as LanguageModel
from backend.progress import Progress
from backend.retrieval.evaluate import METRICS, evaluate
from backend.retrieval.questions import QuestionSet
from backend.retrieval.store import ChunkStore, open_store

__all__ = ["RETRIEVE", "BoundaryScore", "ChunkStats", "Scores", "Scorer"]

RETRIEVE = 5  # chunks retrieved per question (the eval command's default)


@dataclass(frozen=True)
class ChunkStats:
    """A configuration's chunking over every corpus of the set (what constraints and secondaries read)."""

    chunks: int
    mean_tokens: float
    max_tokens: int
    index_cost: int

    @classmethod
    def of(cls, counts: Sequence[int]) -> ChunkStats:
        """The statistics of chunks with these token counts (every document's chunks together)."""
        return cls(len(counts), sum(counts) / len(counts) if counts else 0.0, max(counts, default=0), sum(counts))

    def as_dict(self) -> dict[str, float]:
        """``{"chunks", "mean_tokens", "max_tokens", "index_cost"}`` (what a constraint holds on)."""
        return {"chunks": self.chunks, "mean_tokens": self.mean_tokens, "max_tokens": self.max_tokens,
                "index_cost": self.index_cost}


@dataclass(frozen=True)
class Scores:
    """Per-question objective values, keyed by the question's index in the whole set."""

    values: dict[int, float]
    texts_embedded: int
    seconds: float


@dataclass(frozen=True)
class BoundaryScore:
    """A configuration's Boundary Clarity over every corpus: the estimate with its 95% interval over boundaries.

    Attributes:
        interval: The estimate in ``[low, high]`` (width 0 when every boundary was scored); ``n``: boundaries scored.
        scored: Boundaries scored (the sample).
        total: Boundaries of the chunking, over every corpus.
    """

    interval: Interval
    scored: int
    total: int

    @property
    def exact(self) -> bool:
        """Whether every boundary was scored."""
        return self.scored >= self.total


class Scorer:
    """Scores configurations on parts of ``questions`` with one embedder, store and model context.

    Args:
        questions: The whole question set (every corpus).
        objective: One of :data:`~backend.retrieval.evaluate.METRICS`, or ``bc`` (then ``questions`` may be
            empty: its corpora are the documents chunked).
        store_path: The embedded Chroma store's folder (the run's ``out/chroma``); None: the default store.
        embedder: An embedder or its spec (None: the default).
        lm: The language model of model-backed chunkers (None: loaded on first use, if one needs it).
    """

    def __init__(self, questions: QuestionSet, objective: str, *, store_path: Path | None = None,
                 embedder: str | TextEmbedder | None = None, lm: LanguageModel | None = None) -> None:
        if objective not in METRICS and objective != "bc":
            raise ParameterError(f"objective {objective!r} is not a retrieval metric ({', '.join(METRICS)}) nor bc")
        self.questions = questions
        self.objective = objective
        self.embedder = load_text_embedder(embedder)
        self.context = ModelContext(scorer=lm, embedder=self.embedder)
        self.store: ChunkStore = open_store(store_path) if store_path is not None else open_store()
        self.texts_embedded = 0  # over the run: what the embedder embedded (not what came from the cache)
        self._stats: dict[ChunkerConfig, ChunkStats] = {}
        self._chunkings: dict[ChunkerConfig, list[Any]] = {}

    def _corpus_ids(self) -> list[str]:
        """The corpora chunked: those the questions use (every corpus of the set when it has no question)."""
        return self.questions.corpus_ids or list(self.questions.corpora)

    def _chunk(self, config: ChunkerConfig) -> list[Any]:
        got = self._chunkings.get(config)
        if got is None:
            got = [run_chunker(self.questions.document(cid), config, self.context) for cid in self._corpus_ids()]
            self._chunkings[config] = got
        return got

    def stats(self, config: ChunkerConfig) -> ChunkStats:
        """The chunk statistics of ``config`` over every corpus (chunked once per run)."""
        got = self._stats.get(config)
        if got is None:
            counts: list[int] = []
            for chunking in self._chunk(config):
                counts += list(chunking.token_counts)
            got = ChunkStats.of(counts)
            self._stats[config] = got
        return got

    def score(self, config: ChunkerConfig, indices: Sequence[int], progress: Progress | None = None) -> Scores:
        """``config``'s objective on the questions at ``indices`` (of the whole set), one value each.

        Raises:
            ParameterError: no index given; StoreError, ModelError: as :func:`evaluate`.
        """
        idx = list(indices)
        if not idx:
            raise ParameterError("no question to score on")
        qs = self.questions
        part = QuestionSet(tuple(qs.questions[i] for i in idx), qs.corpora, qs.suffixes)
        bench = evaluate(part, [config], embedder=self.embedder, retrieve=RETRIEVE, store=self.store,
                         context=self.context, progress=progress)
        row = bench.results[0]
        self.texts_embedded += row.texts_embedded
        values = {idx[r.index]: float(r.metric(self.objective)) for r in row.questions}
        return Scores(values, row.texts_embedded, row.seconds)

    def boundary_clarity(self, config: ChunkerConfig, boundaries: int | None, *, seed: int = 0,
                         cache: Any = None) -> BoundaryScore:
        """``config``'s Boundary Clarity on every corpus, on a seeded sample of ``boundaries`` per corpus.

        Args:
            config: The configuration.
            boundaries: Boundaries scored per corpus at most (None: every one, exact).
            seed: The sample's seed (the same seed takes the same boundaries: a larger sample extends a smaller).
            cache: The output cache (None: :func:`backend.models.cache.default_cache`).

        Raises:
            ModelError: no language model. ParameterError: the chunking has no boundary (one chunk per corpus).
        """
        lm = self.context.scorer
        if lm is None:
            raise ModelError("bc needs the language model, which this session has not loaded")
        cache = cache if cache is not None else default_cache()
        parts: list[tuple[float, float, int, int]] = []  # estimate, half-width, scored, total
        for chunking in self._chunk(config):
            texts = [c.text for c in chunking.chunks]
            if len(texts) < 2:
                continue
            report = quality_report(texts, chunking.token_counts, metrics=("bc",), scorer=lm, cache=cache,
                                    pairs=boundaries, seed=seed)
            est = report.estimates.get("bc")
            if est is None or est.estimate is None:
                continue
            half = est.half_width or 0.0
            parts.append((float(est.estimate), float(half), int(est.pairs_scored), int(est.pairs_total)))
        total = sum(p[3] for p in parts)
        if not total:
            raise ParameterError(f"{config.spec} leaves no boundary with a Boundary Clarity (one chunk per document)")
        mean = sum(p[0] * p[3] for p in parts) / total
        half = math.sqrt(sum((p[1] * p[3] / total) ** 2 for p in parts))
        scored = sum(p[2] for p in parts)
        return BoundaryScore(Interval(mean, mean - half, mean + half, scored), scored, total)
