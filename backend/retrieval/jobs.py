"""The retrieval lab's long-running work as job bodies: closures a background job calls with a progress callback.

Each function here checks nothing and loads nothing: it captures its arguments and returns
``fn(progress)`` (or ``fn(scorer, progress)`` when a language model is needed), which does the
work in the job's thread — opening the Chroma store, loading the embedder, indexing,
scoring. So a page run never waits on a model or a slow Chroma server: it only starts the
job and reads its result. Nothing here touches a UI; a script can call the closures directly
with any :class:`~backend.progress.Progress`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import Cancelled, ChunkLabError, ParameterError
from backend.metrics.scores import information_support
from backend.models.cache import default_cache
from backend.models.embeddings import lazy_text_embedder
from backend.models.types import Scorer
from backend.progress import Progress
from backend.retrieval.evaluate import Benchmark, evaluate
from backend.retrieval.generation import (
    DEFAULT_DUPLICATE_THRESHOLD,
    DEFAULT_EXCERPT_THRESHOLD,
    METHODS,
    GeneratedQuestions,
    generate_questions,
)
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.questions import QuestionSet
from backend.retrieval.retriever.base import Answer
from backend.retrieval.retriever.registry import make_retriever
from backend.retrieval.store import open_store
from backend.text.document import Document

__all__ = ["SearchResult", "search_job", "information_support_job", "BenchmarkRun", "benchmark_job", "generation_job"]


@dataclass(frozen=True)
class SearchResult:
    """The live search's answer: each configuration tag's answer, chunkings and retrievers alike.

    Attributes:
        doc_id: The document searched.
        query: The query.
        k: Entries asked of each configuration.
        tags: Every tag, in the order the search was given them.
        answers: Per tag, its retriever's :class:`~backend.retrieval.retriever.base.Answer`.
    """

    doc_id: str
    query: str
    k: int
    tags: tuple[str, ...]
    answers: Mapping[str, Answer]


def search_job(
    doc: Document,
    chunkings: Mapping[str, Chunking],
    embedder_spec: str | None,
    query: str,
    k: int,
    *,
    marks: Sequence[tuple[int, int]] = (),
    train_on: QuestionSet | None = None,
) -> Callable[[Progress], SearchResult]:
    """``fn(progress)``: the top ``k`` of each configuration of ``doc`` for ``query``, through its retriever.

    Every configuration is answered by its retriever (:func:`~backend.retrieval.retriever.registry.make_retriever`):
    a chunking's is indexed and searched; a multi-granularity retriever builds its levels
    (``router=cv`` trains on ``train_on``, ``oracle`` uses ``marks``). The store opens in the
    job too (a Chroma server that is down costs its timeout there, not in a page run).
    Configurations with equal configs are answered once.

    Args:
        doc: The document.
        chunkings: Per configuration tag, its chunking of ``doc`` (a retriever's: its finest units).
        embedder_spec: The embedder (None: ``CHUNKLAB_EMBEDDER`` or the bundled one).
        query: The query text.
        k: Chunks (entries, runs) per configuration.
        marks: The marked answer's ranges at search time.
        train_on: The session's question set (a ``cv`` router's training data).

    Returns:
        The job body; its result is a :class:`SearchResult`. A configuration's bad input (a router
        file that is missing or does not match) fails the job with one line naming its tag.
    """

    def run(progress: Progress) -> SearchResult:
        progress.check()  # before anything loads; reports nothing (no count yet)
        store = open_store()
        emb = lazy_text_embedder(embedder_spec)  # loaded only if a text is not in the output cache
        cache = default_cache()
        first: dict[ChunkerConfig, str] = {}
        for tag, ch in chunkings.items():
            first.setdefault(ch.config, tag)
        answered: dict[ChunkerConfig, Answer] = {}
        for i, (config, tag) in enumerate(first.items()):
            step = progress.part(i, len(first), "configuration")
            retriever = make_retriever(config, chunkings=[chunkings[tag]])
            try:
                answered[config] = retriever.answer(
                    doc, store, emb, query, k, marks=marks, train_on=train_on, cache=cache, progress=step
                )
            except Cancelled:
                raise
            except ChunkLabError as e:
                raise type(e)(f"{tag}: {e}") from e
            step(1, 1)  # done, even when everything came from the cache
        return SearchResult(doc.id, query, k, tuple(chunkings), {t: answered[ch.config] for t, ch in chunkings.items()})

    return run


def information_support_job(retrieved: Mapping[str, Sequence[str]], answer: str) -> Callable[[Scorer, Progress], dict[str, float]]:
    """``fn(scorer, progress)``: CP (information support) of each tag's retrieved texts for ``answer``.

    Args:
        retrieved: Per configuration tag, the texts of its retrieved chunks, rank 1 first.
        answer: The answer whose support is measured.

    Returns:
        The job body; its result is, per tag, CP in nats (lower: better support).
    """

    def run(scorer: Scorer, progress: Progress) -> dict[str, float]:
        out = {}
        for i, (tag, texts) in enumerate(retrieved.items()):
            progress(i, len(retrieved))
            out[tag] = information_support(list(texts), answer, scorer, cache=default_cache())
        progress(len(retrieved), len(retrieved))
        return out

    return run


@dataclass(frozen=True)
class BenchmarkRun:
    """A finished benchmark and the chunkings it scored: ``chunkings[corpus_id]`` has one per configuration, in order.

    The chunkings feed the agreement heat maps, so a page run never re-chunks a large corpus.
    """

    benchmark: Benchmark
    chunkings: Mapping[str, tuple[Chunking, ...]]


def benchmark_job(
    questions: QuestionSet,
    configs: Sequence[ChunkerConfig],
    embedder_spec: str | None,
    retrieve: int,
    cross_corpus: bool,
) -> Callable[[Scorer | None, Progress], BenchmarkRun]:
    """``fn(scorer, progress)`` running :func:`~backend.retrieval.evaluate.evaluate` on the store.

    Args:
        questions: The question set.
        configs: The configurations, in the order of the results.
        embedder_spec: The embedder (None: ``CHUNKLAB_EMBEDDER`` or the bundled one).
        retrieve: Chunks per question; -1: as many as hold excerpts.
        cross_corpus: Retrieve from every corpus of the set (False: the question's own).

    Returns:
        The job body. Its ``scorer`` is the language model of model-backed configurations;
        None: the default one, loaded by the chunkers only for outputs the cache does not hold.
    """

    def run(scorer: Scorer | None, progress: Progress) -> BenchmarkRun:
        progress.check()  # before anything loads; reports nothing (no count yet)
        context = ModelContext(scorer=scorer) if scorer is not None else None
        embedder = lazy_text_embedder(embedder_spec)  # loaded only if a text is not in the output cache
        benchmark = evaluate(
            questions, list(configs), embedder=embedder, retrieve=retrieve, store=open_store(),
            context=context, cross_corpus=cross_corpus, progress=progress,
        )
        # The same chunkings evaluate indexed (chunkers are deterministic; model outputs come from the cache).
        chunkings = {
            cid: tuple(run_chunker(questions.document(cid), c, context) for c in configs) for cid in benchmark.corpora
        }
        return BenchmarkRun(benchmark, chunkings)

    return run


def generation_job(
    doc: Document,
    n: int,
    *,
    method: str,
    base_url: str = "",
    api_key: str = "",
    model: str = "",
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    excerpt_threshold: float = DEFAULT_EXCERPT_THRESHOLD,
) -> Callable[[Progress], GeneratedQuestions]:
    """``fn(progress)`` generating up to ``n`` questions from ``doc`` by ``method``.

    ``chat`` asks the API (empty fields fall back to ``OPENAI_*``), ``bundled`` the bundled
    small model, ``model-free`` no model (:func:`backend.retrieval.modelfree.model_free_questions`).
    The key lives only in this closure (and wherever the caller keeps it); the result never
    holds it. The thresholds only decide when enough questions are kept: the result can be
    refiltered with any others.

    Args:
        doc: The document the questions are about.
        n: Questions wanted.
        method: ``chat``, ``bundled`` or ``model-free``.
        base_url: The OpenAI-compatible API ("" : ``OPENAI_BASE_URL``).
        api_key: Its key ("" : ``OPENAI_API_KEY``).
        model: The chat model ("" : ``OPENAI_MODEL`` or the server's only one).
        duplicate_threshold: The report's question–question similarity cut.
        excerpt_threshold: The report's question–excerpt similarity cut.

    Raises:
        ParameterError: an unknown method (at once, not in the job).
    """
    if method not in METHODS:
        raise ParameterError(f"method {method!r} is not one of {', '.join(METHODS)}")

    def run(progress: Progress) -> GeneratedQuestions:
        progress.check()  # before anything loads
        if method == "model-free":
            return model_free_questions(doc, n=n, progress=progress)
        return generate_questions(
            doc, n=n, method=method, base_url=base_url.strip() or None,
            api_key=api_key.strip() or None, model=model.strip() or None,
            duplicate_threshold=duplicate_threshold, excerpt_threshold=excerpt_threshold, progress=progress,
        )

    return run
