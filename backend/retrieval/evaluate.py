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

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.errors import ChunkLabError, InputError, ParameterError, one_line
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

    def to_json(self, *, per_question: bool = False) -> dict[str, Any]:
        """Everything but per-question retrievals, JSON-ready; with ``per_question``, all that :meth:`from_json` reads.

        The per-question part is compact: the questions' corpus and text once (``question_list``), then per
        configuration one list per metric over the questions and each question's retrieved chunks as
        ``[corpus, start, end, index, distance, tokens, level, ranges]`` rows (``ranges`` null for one span).
        A routed retriever's routing is not part of it.
        """
        out = {
            "embedder": self.embedder,
            "retrieve": self.retrieve,
            "chunk_spans": self.chunk_spans,
            "questions": self.questions,
            "corpora": list(self.corpora),
            "seconds": round(self.seconds, 3),
            "results": [{"config": r.config.to_json(), **r.to_json()} for r in self.results],
        }
        if not per_question:
            return out
        first = self.results[0].questions if self.results else ()
        out["embedder_fingerprint"] = self.embedder_fingerprint
        out["seconds"] = self.seconds  # unrounded, so the round trip is exact
        out["question_list"] = [[q.corpus_id, q.question] for q in first]
        for row, r in zip(out["results"], self.results):
            row.update(
                chunk_tokens_mean=r.chunk_tokens_mean, reused=r.reused, seconds=r.seconds, index_seconds=r.index_seconds,
                query_seconds=r.query_seconds, retrieved_tokens_mean=r.retrieved_tokens_mean,
            )
            row["per_question"] = {
                **{m: [getattr(q, m) for q in r.questions] for m in METRICS},
                "retrieved": [[_chunk_row(c) for c in q.retrieved] for q in r.questions],
            }
        return out

    @classmethod
    def from_json(cls, data: Any, source: str = "benchmark") -> Benchmark:
        """The benchmark a :meth:`to_json` ``(per_question=True)`` object holds (untrusted input: every field checked).

        Without the per-question part the configurations' rows keep their means only (no question results).

        Raises:
            InputError: a missing or ill-typed field, a bad configuration or inconsistent lengths (one line,
                naming ``source``).
        """
        try:
            return _benchmark_from_json(data)
        except (KeyError, TypeError, ValueError, ChunkLabError) as e:
            detail = f"'{e.args[0]}' is missing" if isinstance(e, KeyError) else str(e)
            raise InputError(one_line(f"{source}: the saved benchmark is damaged ({detail})")) from e


def _chunk_row(c: RetrievedChunk) -> list[Any]:
    """A retrieved chunk as a compact JSON row (see :meth:`Benchmark.to_json`)."""
    ranges = [list(r) for r in c.ranges] if c.ranges else None
    return [c.corpus_id, c.start, c.end, c.index, c.distance, c.tokens, c.level, ranges]


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} is not a number")
    return float(value)


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} is not an integer")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is not text")
    return value


def _items(value: Any, what: str, n: int | None = None) -> list[Any]:
    if not isinstance(value, list) or (n is not None and len(value) != n):
        raise ValueError(f"{what} is not a list" + (f" of {n}" if n is not None else ""))
    return value


def _summary_from_json(raw: Any, what: str) -> MetricSummary:
    if not isinstance(raw, dict):
        raise TypeError(f"{what} is not an object")
    values = {f"{m}_{s}": _number(raw[f"{m}_{s}"], f"{what}: {m}_{s}") for m in METRICS for s in ("mean", "std")}
    return MetricSummary(**values, questions=_integer(raw.get("questions", 0), f"{what}: questions"))


def _retrieved_from_json(row: Any, what: str) -> RetrievedChunk:
    corpus, start, end, index, distance, tokens, level, ranges = _items(row, what, 8)
    spans: tuple[tuple[int, int], ...] = ()
    if ranges is not None:
        spans = tuple(
            (_integer(a, what), _integer(b, what)) for a, b in (_items(r, f"{what}: a range", 2) for r in _items(ranges, what))
        )
    return RetrievedChunk(
        _text(corpus, what), _integer(start, what), _integer(end, what), _integer(index, what),
        _number(distance, what), _integer(tokens, what), _integer(level, what), spans,
    )


def _benchmark_from_json(data: Any) -> Benchmark:
    """:meth:`Benchmark.from_json` without the one-line wrapping (raises KeyError, TypeError, ValueError, ChunkLabError)."""
    if not isinstance(data, dict):
        raise TypeError("not an object")
    n = _integer(data["questions"], "questions")
    listed = data.get("question_list")
    asked = [
        (_text(cid, "a question's corpus"), _text(text, "a question"))
        for cid, text in (_items(q, "a question", 2) for q in _items(listed, "question_list", n))
    ] if listed is not None else None
    results = []
    for i, row in enumerate(_items(data["results"], "results"), 1):
        what = f"configuration {i}"
        if not isinstance(row, dict) or not isinstance(row.get("config"), dict):
            raise TypeError(f"{what} is not valid")
        raw_config = row["config"]
        params = raw_config.get("params", {})
        if not isinstance(params, dict):
            raise TypeError(f"{what}: parameters are not valid")
        config = make_chunker(
            _text(raw_config["name"], f"{what}: name"), params, _text(raw_config.get("tokenizer", "cl100k"), what)
        ).config
        summary = _summary_from_json({**row, "questions": n}, what)
        per_corpus = {
            _text(cid, what): _summary_from_json(s, f"{what}: corpus {cid}")
            for cid, s in (row.get("per_corpus") or {}).items()
        }
        questions: tuple[QuestionResult, ...] = ()
        detail = row.get("per_question")
        if detail is not None and asked is not None:
            if not isinstance(detail, dict):
                raise TypeError(f"{what}: per_question is not an object")
            columns = {m: [_number(v, f"{what}: {m}") for v in _items(detail[m], f"{what}: {m}", n)] for m in METRICS}
            retrieved = _items(detail["retrieved"], f"{what}: retrieved", n)
            questions = tuple(
                QuestionResult(
                    j, asked[j][0], asked[j][1], **{m: columns[m][j] for m in METRICS},
                    retrieved=tuple(_retrieved_from_json(c, f"{what}: question {j + 1}") for c in
                                    _items(retrieved[j], f"{what}: question {j + 1}")),
                )
                for j in range(n)
            )
        omega_units = _text(row.get("omega_units", "chunks"), f"{what}: omega_units")
        if omega_units not in TERMS:
            raise ValueError(f"{what}: unknown omega_units {omega_units[:20]!r}")
        results.append(ConfigResult(
            config, summary, per_corpus, questions,
            chunks=_integer(row["chunks"], f"{what}: chunks"),
            chunk_tokens_mean=_number(row.get("chunk_tokens_mean", 0.0), f"{what}: chunk_tokens_mean"),
            seconds=_number(row["seconds"], f"{what}: seconds"),
            reused=bool(row.get("reused", False)),
            retrieved_tokens_mean=_number(row.get("retrieved_tokens_mean", 0.0), f"{what}: retrieved_tokens_mean"),
            index_seconds=_number(row.get("index_seconds", 0.0), f"{what}: index_seconds"),
            texts_embedded=_integer(row.get("texts_embedded", 0), f"{what}: texts_embedded"),
            query_seconds=_number(row.get("query_seconds", 0.0), f"{what}: query_seconds"),
            omega_units=omega_units,
        ))
    chunk_spans = _text(data.get("chunk_spans", "reference"), "chunk_spans")
    if chunk_spans not in CHUNK_SPANS:
        raise ValueError(f"unknown chunk_spans {chunk_spans[:20]!r}")
    retrieve = _integer(data["retrieve"], "retrieve")
    return Benchmark(
        tuple(results), _text(data["embedder"], "embedder"), _text(data.get("embedder_fingerprint", ""), "embedder"),
        retrieve, n, tuple(_text(c, "a corpus") for c in _items(data["corpora"], "corpora")),
        _number(data["seconds"], "seconds"), chunk_spans,
    )


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
