"""Judging a chunking: retrieval on a question set (the Chroma report's metrics) and MoC's quality metrics.

Both need the ``models`` extra (an embedder, a language model, Chroma); both go through the
same backend functions as ``python -m backend eval`` and ``python -m backend metrics``, and
their model outputs through the same on-disk cache.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backend.chunkers import ModelContext
from backend.errors import ParameterError
from backend.metrics.report import METRICS, QualityReport, QualitySettings, model_needs
from backend.metrics.scores import LazyScorer, quality_report
from backend.models.embeddings import load_text_embedder
from backend.retrieval.evaluate import ConfigResult, evaluate as run_benchmark
from backend.retrieval.questions import QuestionSet, load_question_set, load_sample_question_set
from backend.retrieval.store import store_for_command

from chunklab.chunking import Chunker, Chunking, model_context

__all__ = ["QuestionSet", "ConfigResult", "QualityReport", "questions", "evaluate", "metrics"]


def questions(source: str | os.PathLike[str] | QuestionSet, corpora: str | os.PathLike[str] | None = None) -> QuestionSet:
    """A question set: a Chroma-format CSV (corpora in ``corpora/`` beside it, or ``corpora``), or ``"sample:NAME"``.

    Raises:
        chunklab.InputError: unreadable files, a missing corpus, malformed rows.
        chunklab.ParameterError: no bundled sample of that name.
    """
    if isinstance(source, QuestionSet):
        return source
    if isinstance(source, str) and source.startswith("sample:"):
        return load_sample_question_set(source.removeprefix("sample:"))
    return load_question_set(Path(source).expanduser(), corpora)


def evaluate(
    chunker: str | Chunker,
    question_set: str | os.PathLike[str] | QuestionSet,
    *,
    retrieve: int = 5,
    embedder: str | None = None,
    store: str | os.PathLike[str] | None = None,
    chunk_spans: str = "reference",
) -> ConfigResult:
    """Retrieval on a question set: recall, precision, precision-Ω and IoU (means and standard deviations).

    The corpora are chunked with ``chunker``, embedded and indexed in Chroma, and each question
    retrieves ``retrieve`` chunks, as ``python -m backend eval`` does.

    Args:
        chunker: A spec string or a :class:`Chunker` (its models are reused).
        question_set: See :func:`questions`.
        retrieve: Chunks retrieved per question (-1: as many as contain excerpts, as ``--retrieve -1``).
        embedder: The retrieval embedder. None: the chunker's (a :class:`Chunker`'s ``embedder``, else
            ``CHUNKLAB_EMBEDDER`` or the bundled MiniLM). With a spec string it is also the semantic
            chunkers' embedder, as the CLI's ``--embedder``.
        store: An embedded Chroma folder (None: the one under the data directory, or the server
            named by ``CHROMA_HOST``/``CHROMA_PORT``).
        chunk_spans: ``"reference"`` (chunks scored where the report's code places them) or ``"exact"``.

    Returns:
        The configuration's result: ``summary`` (``recall_mean``, ``iou_mean``…), per-corpus and
        per-question scores, timings.
    """
    own = not isinstance(chunker, Chunker)
    c = Chunker(chunker, embedder=embedder) if own else chunker
    qs = questions(question_set)
    context: ModelContext = c.context
    # One embedder for the index and the chunker's own embedding, as the CLI's --embedder, loaded once per Chunker.
    shared = own or embedder is None or embedder == context.embedder_spec
    with store_for_command(store) as chroma:
        benchmark = run_benchmark(
            qs,
            [c.config],
            embedder=context.get_embedder() if shared else load_text_embedder(embedder),
            retrieve=retrieve,
            store=chroma,
            cache=context.cache,
            use_cache=context.use_cache,
            context=context,
            chunk_spans=chunk_spans,
        )
    return benchmark.results[0]


def metrics(
    chunking: Chunking,
    which: Sequence[str] = ("bc", "cs"),
    *,
    chunker: Chunker | None = None,
    lm: str | None = None,
    embedder: str | None = None,
    device: str | None = None,
    pairs: int | None = None,
    seed: int = 0,
    **settings: Any,
) -> QualityReport:
    """MoC's Boundary Clarity (``bc``), Chunk Stickiness (``cs``) and the dissimilarity (``ds``) of a chunking.

    As ``python -m backend metrics``: scores come from the output cache when present.

    Args:
        chunking: What :meth:`Chunker.chunk` returned.
        which: Any of ``"bc"``, ``"cs"``, ``"ds"``.
        chunker: A chunker whose loaded models to reuse (a PPL chunker's language model);
            otherwise ``lm``/``embedder``/``device`` choose them as :class:`Chunker` does.
        pairs: Score only a seeded sample of at least this many units per metric: the values are
            then estimates, with 95% intervals in ``report.estimates`` (None: every pair, exact).
        seed: The sample's seed.
        **settings: ``K``, ``bc_mode``, ``cs_rule``, ``delta``, ``window`` (see ``docs/quality.md``).

    Returns:
        The report: ``values`` (``{"bc": …, "cs_complete": …}``), per-boundary values, estimates.
    """
    which = tuple(which)
    bad = [m for m in which if m not in METRICS]
    if not which or bad:
        raise ParameterError(f"metrics: choose from {', '.join(METRICS)}, got {', '.join(which) or 'none'}")
    context = chunker.context if chunker is not None else model_context(lm=lm, embedder=embedder, device=device)
    texts = chunking.texts
    needs = model_needs(which)
    enough = len(texts) > 1
    return quality_report(
        texts,
        [c.tokens for c in chunking],
        metrics=which,
        scorer=LazyScorer(context) if needs.scorer and enough else None,
        embedder=context.get_embedder() if needs.embedder and enough else None,
        settings=QualitySettings(**settings),
        cache=context.cache,
        progress=context.progress,
        pairs=pairs,
        seed=seed,
    )
