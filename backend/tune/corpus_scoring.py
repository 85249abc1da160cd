"""Score configurations over a folder through the corpus engine, as :class:`~backend.tune.scoring.Scorer` does.

``tune DIR`` runs each trial's documents through the corpus engine (:func:`backend.tune.corpus.corpus_scores`,
on this machine or as Ray tasks). :class:`CorpusScorer` gives the tuner what :class:`~backend.tune.scoring.Scorer`
gives it for one document: :meth:`CorpusScorer.stats` (chunk statistics over the folder's documents, for the
constraints, chunked here once per configuration before anything is embedded) and :meth:`CorpusScorer.score`
(per-question objective values on some of the questions). Each distinct subset of questions (the pruner's
third, the rest of the tuning questions, the held-out ones) has its own corpus output folder
``out/corpus/<digest of its indices>``, so a configuration already scored there (an earlier trial, or a
resumed run) is read back, not recomputed.

Each document's questions retrieve from that document's chunks only (``cross_corpus=False``, as the corpus
engine scores): the numbers differ from a one-document run's cross-corpus retrieval over several corpora.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.models.embeddings import TextEmbedder, load_text_embedder
from backend.models.types import Scorer as LanguageModel
from backend.progress import Progress
from backend.retrieval.evaluate import METRICS
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document
from backend.tune.corpus import corpus_scores
from backend.tune.scoring import ChunkStats, Scores

__all__ = ["CORPUS_DIR", "PER_DOCUMENT_NOTE", "CorpusScorer", "subset_folder"]

CORPUS_DIR = "corpus"  # inside the run's output folder: one corpus output folder per question subset
PER_DOCUMENT_NOTE = "each document's questions retrieve from that document only (the corpus engine's scoring)"


def subset_folder(out: Path, indices: Sequence[int]) -> Path:
    """The corpus output folder of the questions at ``indices``: ``out/corpus/<12 hex digits of the indices>``."""
    digest = hashlib.sha256(",".join(str(int(i)) for i in indices).encode("ascii")).hexdigest()[:12]
    return Path(out) / CORPUS_DIR / digest


class CorpusScorer:
    """Scores configurations on parts of ``questions`` over the folder ``source``, through the corpus engine.

    Args:
        source: The folder of documents.
        documents: Its documents (what :meth:`stats` chunks).
        questions: The whole question set (its corpora are the folder's documents).
        objective: One of :data:`~backend.retrieval.evaluate.METRICS`.
        out: The tuning run's output folder (the corpus folders go under ``out/corpus``).
        engine: ``local`` or ``ray`` (inside :func:`backend.corpus.ray_engine.ray_session` for a whole study).
        workers: Ray's documents in flight at once (None: its default).
        address: The Ray cluster to join (``ray`` only).
        embedder: An embedder or its spec (None: the default); it must be the default
            (``CHUNKLAB_EMBEDDER`` or the bundled MiniLM), the one the corpus engine embeds with.
        lm: The language model of model-backed chunkers in :meth:`stats` (None: loaded on first use).

    Raises:
        ParameterError: an objective that is not a retrieval metric; an embedder other than the default.
    """

    def __init__(self, source: Path, documents: Sequence[Document], questions: QuestionSet, objective: str, *,
                 out: Path, engine: str = "local", workers: int | None = None, address: str | None = None,
                 embedder: str | TextEmbedder | None = None, lm: LanguageModel | None = None) -> None:
        if objective not in METRICS:
            raise ParameterError(f"objective {objective!r} is not a retrieval metric ({', '.join(METRICS)})")
        self.source = Path(source)
        self.documents = tuple(documents)
        self.questions = questions
        self.objective = objective
        self.out = Path(out)
        self.engine, self.workers, self.address = engine, workers, address
        self.embedder = load_text_embedder(embedder)
        if embedder is not None:
            default = load_text_embedder(None)
            if default.info.fingerprint != self.embedder.info.fingerprint:
                raise ParameterError(f"a folder tunes through the corpus engine, which embeds with the default "
                                     f"embedder ({default.info.name}), not {self.embedder.info.name}; set "
                                     "CHUNKLAB_EMBEDDER to choose it")
        self.context = ModelContext(scorer=lm, embedder=self.embedder)
        self.texts_embedded = 0  # the corpus engine does not report it; kept for Scorer's interface
        self.warnings: list[str] = []  # the corpus engine's lines (documents without a row, NaN questions), once each
        self._stats: dict[ChunkerConfig, ChunkStats] = {}

    def stats(self, config: ChunkerConfig) -> ChunkStats:
        """The chunk statistics of ``config`` over the folder's documents (chunked here once per run)."""
        got = self._stats.get(config)
        if got is None:
            counts: list[int] = []
            for doc in self.documents:
                counts += list(run_chunker(doc, config, self.context).token_counts)
            got = ChunkStats.of(counts)
            self._stats[config] = got
        return got

    def score(self, config: ChunkerConfig, indices: Sequence[int], progress: Progress | None = None) -> Scores:
        """``config``'s objective on the questions at ``indices`` (of the whole set), one value each.

        Raises:
            ParameterError: no index given; InputError, ModelError: as :func:`~backend.tune.corpus.corpus_scores`.
        """
        idx = [int(i) for i in indices]
        if not idx:
            raise ParameterError("no question to score on")
        qs = self.questions
        part = QuestionSet(tuple(qs.questions[i] for i in idx), qs.corpora, qs.suffixes)
        got = corpus_scores(config, self.source, part, engine=self.engine, out=subset_folder(self.out, idx),
                            workers=self.workers, address=self.address, progress=progress)
        for w in got.warnings:
            if w not in self.warnings:
                self.warnings.append(w)
        values = {i: float(v) for i, v in zip(idx, got.per_question[self.objective], strict=True)}
        return Scores(values, 0, got.seconds)
