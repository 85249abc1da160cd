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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.models.embeddings import TextEmbedder, load_text_embedder
from backend.models.types import Scorer as LanguageModel
from backend.progress import Progress
from backend.retrieval.evaluate import METRICS, evaluate
from backend.retrieval.questions import QuestionSet
from backend.retrieval.store import ChunkStore, open_store

__all__ = ["RETRIEVE", "ChunkStats", "Scores", "Scorer"]

RETRIEVE = 5  # chunks retrieved per question (the eval command's default)


@dataclass(frozen=True)
class ChunkStats:
    """A configuration's chunking over every corpus of the set (what constraints and secondaries read)."""

    chunks: int
    mean_tokens: float
    max_tokens: int
    index_cost: int

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


class Scorer:
    """Scores configurations on parts of ``questions`` with one embedder, store and model context.

    Args:
        questions: The whole question set (every corpus).
        objective: One of :data:`~backend.retrieval.evaluate.METRICS`.
        store_path: The embedded Chroma store's folder (the run's ``out/chroma``); None: the default store.
        embedder: An embedder or its spec (None: the default).
        lm: The language model of model-backed chunkers (None: loaded on first use, if one needs it).
    """

    def __init__(self, questions: QuestionSet, objective: str, *, store_path: Path | None = None,
                 embedder: str | TextEmbedder | None = None, lm: LanguageModel | None = None) -> None:
        if objective not in METRICS:
            raise ParameterError(f"objective {objective!r} is not a retrieval metric ({', '.join(METRICS)})")
        self.questions = questions
        self.objective = objective
        self.embedder = load_text_embedder(embedder)
        self.context = ModelContext(scorer=lm, embedder=self.embedder)
        self.store: ChunkStore = open_store(store_path) if store_path is not None else open_store()
        self.texts_embedded = 0  # over the run: what the embedder embedded (not what came from the cache)
        self._stats: dict[ChunkerConfig, ChunkStats] = {}

    def stats(self, config: ChunkerConfig) -> ChunkStats:
        """The chunk statistics of ``config`` over every corpus (chunked once per run)."""
        got = self._stats.get(config)
        if got is None:
            counts: list[int] = []
            for cid in self.questions.corpus_ids:
                counts += list(run_chunker(self.questions.document(cid), config, self.context).token_counts)
            got = ChunkStats(len(counts), sum(counts) / len(counts) if counts else 0.0, max(counts, default=0),
                             sum(counts))
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
