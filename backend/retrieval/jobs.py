"""The retrieval lab's long-running work as job bodies: closures a background job calls with a progress callback.

Each function here checks nothing and loads nothing: it captures its arguments and returns
``fn(progress)`` (or ``fn(scorer, progress)`` when a language model is needed), which does the
work in the job's thread — opening the Chroma store, loading the embedder, indexing,
scoring. So a page run never waits on a model or a slow Chroma server: it only starts the
job and reads its result. Nothing here touches a UI; a script can call the closures directly
with any :data:`~backend.models.types.Progress`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from backend.chunking import ChunkerConfig, Chunking
from backend.models.types import check_cancel
from backend.retrieval.evaluate import Benchmark
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document

if TYPE_CHECKING:
    from backend.models.types import Progress, Scorer
    from backend.retrieval.generation import GeneratedQuestions
    from backend.retrieval.store import Hit

__all__ = ["search_job", "cp_job", "BenchmarkRun", "benchmark_job", "generation_job"]


def search_job(
    doc: Document, chunkings: Mapping[str, Chunking], embedder_spec: str | None, query: str, k: int
) -> Callable[[Progress], dict[str, list[Hit]]]:
    """``fn(progress)``: index each chunking of ``doc``, then the top ``k`` chunks of each for ``query``.

    The store opens in the job too (a Chroma server that is down costs its timeout there,
    not in a page run). Configurations with equal chunker configs are indexed and searched once.

    Args:
        doc: The document.
        chunkings: Per configuration tag, its chunking of ``doc``.
        embedder_spec: The embedder (None: ``CHUNKLAB_EMBEDDER`` or the bundled one).
        query: The query text.
        k: Chunks per configuration.

    Returns:
        The job body; its result is, per tag, the hits, rank 1 first.
    """

    def run(progress: Progress) -> dict[str, list[Hit]]:
        from backend.models.cache import default_cache
        from backend.models.embeddings import load_text_embedder
        from backend.retrieval.store import open_store

        check_cancel(progress)  # before anything loads; reports nothing (no count yet)
        store = open_store()
        emb = load_text_embedder(embedder_spec)
        unique: dict[ChunkerConfig, Chunking] = {}
        for ch in chunkings.values():
            unique.setdefault(ch.config, ch)
        found = store.search(doc, list(unique.values()), emb, query, k, cache=default_cache(), progress=progress)
        return {tag: found[ch.config] for tag, ch in chunkings.items()}

    return run


def cp_job(retrieved: Mapping[str, Sequence[str]], answer: str) -> Callable[[Scorer, Progress], dict[str, float]]:
    """``fn(scorer, progress)``: CP (information support) of each tag's retrieved texts for ``answer``.

    Args:
        retrieved: Per configuration tag, the texts of its retrieved chunks, rank 1 first.
        answer: The answer whose support is measured.

    Returns:
        The job body; its result is, per tag, CP in nats (lower: better support).
    """

    def run(scorer: Scorer, progress: Progress) -> dict[str, float]:
        from backend.metrics.quality import information_support
        from backend.models.cache import default_cache

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
        The job body. Its ``scorer`` is the language model of model-backed configurations,
        or None when no configuration needs one.
    """

    def run(scorer: Scorer | None, progress: Progress) -> BenchmarkRun:
        from backend.chunkers import run_chunker
        from backend.chunkers.context import ModelContext
        from backend.retrieval.evaluate import evaluate
        from backend.retrieval.store import open_store

        check_cancel(progress)  # before anything loads; reports nothing (no count yet)
        context = ModelContext(scorer=scorer) if scorer is not None else None
        bm = evaluate(
            questions, list(configs), embedder=embedder_spec, retrieve=retrieve, store=open_store(),
            context=context, cross_corpus=cross_corpus, progress=progress,
        )
        # The same chunkings evaluate indexed (chunkers are deterministic; model outputs come from the cache).
        chunkings = {
            cid: tuple(run_chunker(questions.document(cid), c, context) for c in configs) for cid in bm.corpora
        }
        return BenchmarkRun(bm, chunkings)

    return run


def generation_job(
    doc: Document,
    n: int,
    *,
    local: bool,
    base_url: str,
    api_key: str,
    model: str,
    duplicate_threshold: float,
    excerpt_threshold: float,
) -> Callable[[Progress], GeneratedQuestions]:
    """``fn(progress)`` generating up to ``n`` questions from ``doc`` that pass the given thresholds.

    Empty fields fall back to the environment (``OPENAI_*``). The key lives only in this
    closure (and wherever the caller keeps it); the result never holds it. The thresholds only
    decide when enough questions are kept: the result can be refiltered with any others.

    Args:
        doc: The document the questions are about.
        n: Questions wanted.
        local: Use the local model even if an API is configured.
        base_url: The OpenAI-compatible API ("" : ``OPENAI_BASE_URL``).
        api_key: Its key ("" : ``OPENAI_API_KEY``).
        model: The chat model ("" : ``OPENAI_MODEL`` or the server's only one).
        duplicate_threshold: The report's question–question similarity cut.
        excerpt_threshold: The report's question–excerpt similarity cut.
    """

    def run(progress: Progress) -> GeneratedQuestions:
        from backend.retrieval.generation import generate_questions

        progress(0, n)
        return generate_questions(
            doc, n=n, local=True if local else None, base_url=base_url.strip() or None,
            api_key=api_key.strip() or None, model=model.strip() or None,
            duplicate_threshold=duplicate_threshold, excerpt_threshold=excerpt_threshold, progress=progress,
        )

    return run
