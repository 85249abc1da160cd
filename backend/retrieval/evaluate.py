"""The benchmark: chunker configurations × a question set × an embedder → the Chroma report's table.

Every configuration goes through its retriever (:func:`~backend.retrieval.retriever.registry.make_retriever`:
a chunking as a one-level retriever, or a multi-granularity retriever of its own) and is scored
the same way. For each configuration, each corpus of the question set is indexed in the store
(:class:`~backend.retrieval.store.ChunkStore`; reused when already indexed, embeddings from the
output cache), every question is embedded (once for all configurations, cached too) and the
retriever answers it (:meth:`~backend.retrieval.retriever.base.Retriever.run`). As in the reference, retrieval runs over the
chunks of *every* corpus of the set (the reference indexes them in one collection): a chunk
of another corpus counts in the question's precision and IoU denominators but never in the
numerator. ``cross_corpus=False`` retrieves from the question's own corpus only.

Chunks are scored where the reference's chunk search places them
(:func:`~backend.retrieval.metrics.reference_chunk_spans`: a trailing period dropped, the first
occurrence of repeated text), for every metric and for ``retrieve=-1``'s counts;
``chunk_spans="exact"`` scores the chunker's own spans instead. Retrieval, the retrieved chunks
reported and their tokens always use the exact spans. Retrievers (multi-granularity entries) are
always scored on exact spans: the reference has no such thing.

Retrieval layout. Each corpus has its own collection (cosine space, Chroma's default
``ef_search`` of 100) and the nearest chunks of all of them are merged by distance; the
reference holds every chunk in one collection (L2 space, ``hnsw:search_ef`` 50). On the
L2-normalized vectors both spaces order neighbours alike, so the two differ only where the
reference's approximate search misses a true neighbour (on 862 chunks and 129 questions its
top 5 differed from exact search for 16 questions, with no change in recall).

``retrieve=n`` takes the ``n`` nearest chunks for every question. ``retrieve=-1`` is the
reference's "as many chunks as contain excerpts": each question gets as many chunks as its
corpus has chunks meeting its excerpts, capped at ``min(20, the largest such count over the
set)``. Per-question recall, precision, precision-Ω and IoU follow
:mod:`backend.retrieval.metrics`; means and population standard deviations (numpy's default,
as the reference) are over all questions, and per corpus. :func:`coverage_rows` profiles where
along one corpus each configuration retrieved, beside where the excerpts are.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.models.cache import OutputCache, default_cache
from backend.models.embeddings import TextEmbedder, embed_texts, load_text_embedder
from backend.progress import Progress
from backend.retrieval.metrics import coverage_profile, precision_omega, retrieval_coverage, span_scores
from backend.retrieval.multi.retrievers import Routing
from backend.retrieval.questions import QuestionSet
from backend.retrieval.retriever.base import TERMS, Asking, QuestionsRun, RetrievedChunk, UnitTerms
from backend.retrieval.retriever.chunks import MAX_AUTO_RETRIEVE
from backend.retrieval.retriever.registry import make_retriever
from backend.retrieval.store import ChunkStore, open_store

__all__ = [
    "METRICS",
    "METRIC_LABELS",
    "MAX_AUTO_RETRIEVE",
    "CHUNK_SPANS",
    "RetrievedChunk",
    "QuestionResult",
    "MetricSummary",
    "ConfigResult",
    "Benchmark",
    "evaluate",
    "coverage_rows",
]

METRICS = ("recall", "precision", "precision_omega", "iou")
# Display names of METRICS (tables, charts and their legends).
METRIC_LABELS = {"recall": "Recall", "precision": "Precision", "precision_omega": "Precision-Ω", "iou": "IoU"}
# Where chunks are scored: "reference" (located as chunking_evaluation does), "exact" (the chunker's spans).
CHUNK_SPANS = ("reference", "exact")


@dataclass(frozen=True)
class QuestionResult:
    """One question's scores under one configuration (fractions in 0..1)."""

    index: int
    corpus_id: str
    question: str
    recall: float
    precision: float
    precision_omega: float
    iou: float
    retrieved: tuple[RetrievedChunk, ...]

    def metric(self, name: str) -> float:
        """The score named ``name`` (one of :data:`METRICS`)."""
        if name not in METRICS:
            raise ParameterError(f"unknown metric {name!r}; choose one of {', '.join(METRICS)}")
        return float(getattr(self, name))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (retrieved chunks included)."""
        return {
            "index": self.index,
            "corpus_id": self.corpus_id,
            "question": self.question,
            **{m: getattr(self, m) for m in METRICS},
            "retrieved": [r.to_json() for r in self.retrieved],
        }


@dataclass(frozen=True)
class MetricSummary:
    """Mean and population standard deviation of each metric over some questions."""

    recall_mean: float
    recall_std: float
    precision_mean: float
    precision_std: float
    precision_omega_mean: float
    precision_omega_std: float
    iou_mean: float
    iou_std: float
    questions: int

    @classmethod
    def of(cls, results: Sequence[QuestionResult]) -> MetricSummary:
        """The summary of ``results`` (NaN means for no results)."""
        values: dict[str, float] = {}
        for m in METRICS:
            xs = np.array([getattr(r, m) for r in results], dtype=np.float64)
            values[f"{m}_mean"] = float(xs.mean()) if xs.size else math.nan
            values[f"{m}_std"] = float(xs.std()) if xs.size else math.nan
        return cls(**values, questions=len(results))

    def to_json(self) -> dict[str, Any]:
        """The ``{"recall_mean", "recall_std", …, "iou_std"}`` object, plus ``questions``."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ConfigResult:
    """One configuration's benchmark row.

    Attributes:
        config: The chunker configuration.
        summary: Means and standard deviations over all questions.
        per_corpus: The same per corpus id.
        questions: Per-question scores, in question-set order.
        chunks: Chunks over all corpora.
        chunk_tokens_mean: Mean tokens per chunk (the report's "size in brackets").
        seconds: Wall time of this configuration (chunking, embedding, indexing, retrieval, scoring).
        reused: True when every corpus was already indexed.
        retrieved_tokens_mean: Mean tokens retrieved per question (a coarse level returns far
            more text at the same k).
        index_seconds: Chunking (or building a retriever's levels), embedding and indexing.
        texts_embedded: Texts the embedder embedded for this configuration (0 when all came
            from the cache or the store).
        query_seconds: Mean seconds per question from the query vector to the scored answer.
        omega_units: What precision-Ω is computed on: ``chunks``, or a retriever's finest
            ``units`` (its level 1, nodes or units).
        routing: A routed retriever's weights, chosen and oracle levels (None otherwise).
    """

    config: ChunkerConfig
    summary: MetricSummary
    per_corpus: Mapping[str, MetricSummary]
    questions: tuple[QuestionResult, ...]
    chunks: int
    chunk_tokens_mean: float
    seconds: float
    reused: bool
    retrieved_tokens_mean: float = 0.0
    index_seconds: float = 0.0
    texts_embedded: int = 0
    query_seconds: float = 0.0
    omega_units: str = "chunks"
    routing: Routing | None = None

    @property
    def terms(self) -> UnitTerms:
        """How outputs name what its precision-Ω and chunk count are computed on."""
        return TERMS[self.omega_units]

    def to_json(self) -> dict[str, Any]:
        """The CLI's object: ``{"recall_mean", …, "iou_std", "per_corpus": {…}, "chunks", "seconds", …}``.

        Beside the metrics: ``retrieved_tokens_mean``, ``index_seconds``, ``texts_embedded``,
        ``query_seconds``, ``omega_units`` and, for a routed retriever, ``routing``.
        """
        summary = self.summary.to_json()
        summary.pop("questions")
        out = {
            **summary,
            "per_corpus": {cid: s.to_json() for cid, s in self.per_corpus.items()},
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "retrieved_tokens_mean": round(self.retrieved_tokens_mean, 2),
            "index_seconds": round(self.index_seconds, 3),
            "texts_embedded": self.texts_embedded,
            "query_seconds": round(self.query_seconds, 5),
            "omega_units": self.omega_units,
        }
        if self.routing is not None:
            out["routing"] = self.routing.to_json()
        return out

    def to_row(self) -> dict[str, Any]:
        """A flat table row: configuration, chunker, parameters, metrics, chunks, mean tokens, seconds."""
        return {
            "config": self.config.label,
            "chunker": self.config.name,
            **{f"param_{k}": v for k, v in self.config.params},
            "tokenizer": self.config.tokenizer,
            **self.summary.to_json(),
            "chunks": self.chunks,
            "chunk_tokens_mean": self.chunk_tokens_mean,
            "retrieved_tokens_mean": self.retrieved_tokens_mean,
            "index_seconds": self.index_seconds,
            "texts_embedded": self.texts_embedded,
            "query_seconds": self.query_seconds,
            "seconds": self.seconds,
        }

    def retrieved_ranges(self, corpus_id: str) -> list[list[tuple[int, int]]]:
        """For each question (of any corpus), the ranges retrieved in ``corpus_id`` (for coverage strips)."""
        return [[span for r in q.retrieved if r.corpus_id == corpus_id for span in r.spans] for q in self.questions]


@dataclass(frozen=True)
class Benchmark:
    """The outcome of :func:`evaluate`: one :class:`ConfigResult` per configuration, in order."""

    results: tuple[ConfigResult, ...]
    embedder: str
    embedder_fingerprint: str
    retrieve: int
    questions: int
    corpora: tuple[str, ...]
    seconds: float
    chunk_spans: str = "reference"

    def table(self) -> list[dict[str, Any]]:
        """One flat row per configuration (for a results table, bar charts and CSV export)."""
        return [r.to_row() for r in self.results]

    def matrix(self, metric: str = "iou") -> np.ndarray:
        """Scores as a (questions × configurations) array, for the heat map.

        Raises:
            ParameterError: an unknown metric.
        """
        if metric not in METRICS:
            raise ParameterError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
        out = np.zeros((self.questions, len(self.results)), dtype=np.float64)
        for j, r in enumerate(self.results):
            out[:, j] = [q.metric(metric) for q in r.questions]
        return out

    def to_json(self) -> dict[str, Any]:
        """Everything but per-question retrievals, JSON-ready."""
        return {
            "embedder": self.embedder,
            "retrieve": self.retrieve,
            "chunk_spans": self.chunk_spans,
            "questions": self.questions,
            "corpora": list(self.corpora),
            "seconds": round(self.seconds, 3),
            "results": [{"config": r.config.to_json(), **r.to_json()} for r in self.results],
        }


def coverage_rows(
    benchmark: Benchmark, questions: QuestionSet, corpus_id: str, bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """How often each stretch of one corpus is retrieved, per configuration, and how often it is an excerpt.

    Args:
        benchmark: The benchmark.
        questions: The question set it ran (the excerpts and the corpus length).
        corpus_id: The corpus to profile.
        bins: Stretches the corpus is cut into.

    Returns:
        ``(rows, excerpts)``: ``rows`` has one row per configuration and ``bins`` columns, each
        the mean over the stretch's characters of the number of questions that retrieved the
        character; ``excerpts`` is the same for the questions' excerpts (the answers' density).

    Raises:
        ParameterError: an unknown corpus or ``bins`` below 1.
    """
    if corpus_id not in questions.corpora:
        raise ParameterError(f"no corpus {corpus_id!r} in this question set")
    length = len(questions.corpora[corpus_id])
    rows = [coverage_profile(retrieval_coverage(length, r.retrieved_ranges(corpus_id)), bins) for r in benchmark.results]
    spans = [q.spans for q in questions.questions if q.corpus_id == corpus_id]
    excerpts = coverage_profile(retrieval_coverage(length, spans), bins)
    return np.vstack(rows) if rows else np.zeros((0, len(excerpts))), excerpts


def _check_retrieve(retrieve: int) -> None:
    if retrieve != -1 and retrieve < 1:
        raise ParameterError(f"retrieve ({retrieve}) must be a positive number of chunks, or -1")


def _check_chunk_spans(chunk_spans: str) -> None:
    if chunk_spans not in CHUNK_SPANS:
        raise ParameterError(f"unknown chunk_spans {chunk_spans!r}; choose one of {', '.join(CHUNK_SPANS)}")


def evaluate(
    questions: QuestionSet,
    configs: Sequence[ChunkerConfig],
    *,
    embedder: str | TextEmbedder | None = None,
    retrieve: int = 5,
    store: ChunkStore | None = None,
    cache: OutputCache | None = None,
    use_cache: bool = True,
    context: ModelContext | None = None,
    cross_corpus: bool = True,
    chunk_spans: str = "reference",
    progress: Progress | None = None,
) -> Benchmark:
    """Benchmark configurations (chunkings and retrievers alike) on a question set (see the module docstring).

    Args:
        questions: The questions and their corpora.
        configs: The configurations to compare (at least one).
        embedder: An embedder, a spec for :func:`~backend.models.embedder.load_embedder`,
            or None/``"default"`` (``CHUNKLAB_EMBEDDER`` or the bundled MiniLM).
        retrieve: Chunks retrieved per question, or -1 (see the module docstring).
        store: The Chroma store (default :func:`~backend.retrieval.store.open_store`).
        cache: The output cache of embeddings (default: the process's default cache).
        use_cache: False neither reads nor writes cached embeddings.
        context: The model context of model-backed chunkers (see :class:`ModelContext`).
        cross_corpus: Retrieve from every corpus of the set (the reference) or only the question's.
        chunk_spans: Score chunks where the reference's chunk search places them
            (``"reference"``, the default) or on the chunker's own spans (``"exact"``); see
            the module docstring.
        progress: The whole run's progress (one weighted part per step); may raise ``Cancelled``.

    Raises:
        ParameterError: no configuration, no question, a bad ``retrieve`` or ``chunk_spans``, a bad
            configuration.
        StoreError: the store fails or cannot be reached.
        ModelError: the embedder (or a chunker's model) fails.
    """
    if not configs:
        raise ParameterError("evaluate needs at least one chunker configuration")
    if len(questions) == 0:
        raise ParameterError("the question set has no questions")
    _check_retrieve(retrieve)
    _check_chunk_spans(chunk_spans)
    progress = progress or Progress()
    t_all = time.perf_counter()
    if use_cache and cache is None:
        cache = default_cache()
    elif not use_cache:
        cache = None
    store = store if store is not None else open_store()
    emb = load_text_embedder(embedder)
    fp = emb.info.fingerprint
    asking = Asking(retrieve, cross_corpus, chunk_spans)
    sizes = [len(questions.corpora[c]) for c in questions.corpus_ids]
    # Progress weights: the questions' embedding, then per configuration its indexing (every corpus, by size) and
    # its answers and scoring. A step done reports 1 of 1: its share is full even when it came from the cache.
    weights = [0.02 * sum(sizes) + 1]
    for _ in configs:
        weights += [sum(s + 1 for s in sizes), 0.02 * sum(sizes) + 1]
    steps = [progress.part(i, len(weights), None, weights=weights) for i in range(len(weights))]
    q_vectors, _ = embed_texts(emb, [q.question for q in questions.questions], cache=cache, progress=steps[0])
    steps[0](1, 1)

    results = []
    for i, config in enumerate(configs):
        t0 = time.perf_counter()
        retriever = make_retriever(config, context=context)
        run = retriever.run(questions, store, emb, q_vectors, asking, cache=cache, progress=steps[1 + 2 * i])
        results.append(_score(questions, config, retriever.describe().terms, run, t0))
        steps[2 + 2 * i](1, 1)
    return Benchmark(
        results=tuple(results),
        embedder=emb.info.name,
        embedder_fingerprint=fp,
        retrieve=retrieve,
        questions=len(questions),
        corpora=tuple(questions.corpus_ids),
        seconds=time.perf_counter() - t_all,
        chunk_spans=chunk_spans,
    )


def _score(questions: QuestionSet, config: ChunkerConfig, terms: UnitTerms, run: QuestionsRun, t0: float) -> ConfigResult:
    """Score every question's answer: where the run says each entry counts; precision-Ω on its spans."""
    qs = questions.questions
    per_question = []
    for i, q in enumerate(qs):
        top, scored = run.retrieved[i], run.scored[i]
        own = [span for r, spans in zip(top, scored) if r.corpus_id == q.corpus_id for span in spans]
        other = sum(e - s for r, spans in zip(top, scored) if r.corpus_id != q.corpus_id for s, e in spans)
        s = span_scores(own, q.spans, other_chars=other)
        omega = precision_omega(run.omega_spans[q.corpus_id], q.spans)
        per_question.append(QuestionResult(i, q.corpus_id, q.question, s.recall, s.precision, omega, s.iou, top))
    per_corpus = {
        cid: MetricSummary.of([r for r in per_question if r.corpus_id == cid]) for cid in questions.corpus_ids
    }
    return ConfigResult(
        config=config,
        summary=MetricSummary.of(per_question),
        per_corpus=per_corpus,
        questions=tuple(per_question),
        chunks=run.entries,
        chunk_tokens_mean=run.unit_tokens_mean,
        seconds=time.perf_counter() - t0,
        reused=run.reused,
        retrieved_tokens_mean=_mean([sum(r.tokens for r in q.retrieved) for q in per_question]),
        index_seconds=run.index_seconds,
        texts_embedded=run.texts_embedded,
        query_seconds=run.query_seconds,
        omega_units=terms.name,
        routing=run.routing,
    )


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0
