"""The multi-granularity retrievers (``mog``, ``mogg``, ``freechunker``) as retrievers of their own.

:class:`LevelRetriever` is the registry's entry for each: it builds a document's levels
(:func:`~backend.retrieval.multi.index.build_index`, one collection each, through the store's one
indexing path), answers a live query (:func:`~backend.retrieval.multi.retrievers.live_retrieve`;
``router=cv`` trains on the session's question set, labelled here) and a question set
(:func:`~backend.retrieval.multi.retrievers.run_retriever`). Its finest units are what its
registry entry (:mod:`backend.chunkers.multi`) splits: MoG's level 1, MoGG's nodes, FreeChunker's
units. Its entries are always scored on their exact ranges.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunkers.multi import RetrieverChunker
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder
from backend.progress import Progress
from backend.retrieval.multi.index import MultiIndex, build_index
from backend.retrieval.multi.retrievers import LiveRetrieval, TrainingData, live_retrieve, run_retriever, training_data
from backend.retrieval.multi.select import Pick
from backend.retrieval.questions import QuestionSet
from backend.retrieval.retriever.base import (
    UNIT_TERMS,
    AnswerRow,
    AnswerTable,
    Asking,
    QuestionsRun,
    Range,
    RetrievedChunk,
    RetrieverInfo,
    UnitTerms,
    check_query,
    index_corpora,
)
from backend.retrieval.store import ChunkStore
from backend.text.document import Document

__all__ = ["LEVEL_RETRIEVERS", "LevelAnswer", "LevelRetriever", "pick_level_name"]

LEVEL_RETRIEVERS = ("mog", "mogg", "freechunker")  # their registry entries: backend.chunkers.multi


def pick_level_name(live: LiveRetrieval, pick: Pick) -> str:
    """Where a pick comes from: MoG(G)'s level name, or a FreeChunker run's length in units."""
    if live.selection.level is None:
        n = len(pick.units)
        return f"run of {n} unit{'s' if n != 1 else ''}"
    return live.index.levels[pick.level - 1].name


@dataclass(frozen=True)
class LevelAnswer:
    """A multi-granularity retriever's answer to a live query (its levels, candidates and routing in :attr:`live`)."""

    live: LiveRetrieval

    @property
    def config(self) -> ChunkerConfig:
        """The retriever's configuration."""
        return self.live.config

    @property
    def units(self) -> Chunking:
        """Its finest units."""
        return self.live.index.units

    @property
    def terms(self) -> UnitTerms:
        """Precision-Ω and counts are on its finest units."""
        return UNIT_TERMS

    @property
    def panel(self) -> LiveRetrieval:
        """The levels, candidates and routing its panel explains."""
        return self.live

    def retrieved(self) -> tuple[tuple[int, tuple[Range, ...]], ...]:
        """``(rank, ranges)`` per pick (a pick may cover several stretches)."""
        return tuple((rank, p.ranges) for rank, p in enumerate(self.live.selection.picks, 1))

    def table(self) -> AnswerTable:
        """Rank, its text (stretches joined), then its score, level, tokens and span."""
        live = self.live
        rows = tuple(
            AnswerRow(rank, p.ranges, (
                f"{p.score:.3f}", pick_level_name(live, p), f"{p.tokens:,} tok", f"{p.start:,}–{p.end:,}",
                *([f"{len(p.ranges)} stretches"] if len(p.ranges) > 1 else []),
            ))
            for rank, p in enumerate(live.selection.picks, 1)
        )
        head = "weighted score w · t_rs" if live.selection.level is not None else "best similarity in the run"
        return AnswerTable("rt-hits rt-picks", "Retrieved", "Score", f"{head} · level · tokens · characters",
                           "Nothing scored above 0.", rows)

    def json_lines(self, text: str) -> list[dict[str, Any]]:
        """``{"rank", "score", "level", "index", "start", "end", "ranges", "tokens", "text"}`` per pick."""
        return [
            {"rank": rank, "score": round(p.score, 6), "level": p.level, "index": p.index, "start": p.start,
             "end": p.end, "ranges": [list(r) for r in p.ranges], "tokens": p.tokens,
             "text": "\n".join(text[s:e] for s, e in p.ranges)}
            for rank, p in enumerate(self.live.selection.picks, 1)
        ]

    def notes(self) -> list[str]:
        """The chosen level and the router's weights (a routed retriever), and a router's fallback."""
        live, sel, out = self.live, self.live.selection, []
        name = live.config.name
        if sel.level is not None:
            levels = live.index.levels
            weights = ", ".join(f"{lv.name} {w:.2f}" for lv, w in zip(levels, sel.weights or ()))
            out.append(f"{name}: chosen level {levels[sel.level - 1].name} (weights: {weights})")
        if live.note:
            out.append(f"{name}: {live.note}")
        return out


class LevelRetriever:
    """A multi-granularity retriever (see the module docstring).

    Args:
        config: A configuration of ``mog``, ``mogg`` or ``freechunker`` (validated here).
        context: Unused (its levels need no language model); accepted as every retriever's.
        chunkings: Its finest units already cut (the app's): used for their documents.

    Raises:
        ParameterError: not a multi-granularity retriever, or a bad parameter.
    """

    def __init__(
        self, config: ChunkerConfig, *, context: ModelContext | None = None, chunkings: Sequence[Chunking] = ()
    ) -> None:
        chunker = make_chunker(config.name, config.params_dict, config.tokenizer)
        if not isinstance(chunker, RetrieverChunker):
            raise ParameterError(f"{config.name} is a chunker, not a retriever (mog, mogg, freechunker)")
        self.config = config
        self.chunker = chunker
        self._known = {c.doc_id: c for c in chunkings}

    def __repr__(self) -> str:
        return f"LevelRetriever({self.config.label})"

    def describe(self) -> RetrieverInfo:
        """Its levels' names, its router (routed ones) and its finest units."""
        routing = self.chunker.level_routing.label() if self.chunker.routed else ""
        return RetrieverInfo(self.config, tuple(self.chunker.level_names()), routing, UNIT_TERMS)

    def finest_units(self, doc: Document) -> Chunking:
        """Its finest units of ``doc`` (known ones, else cut now)."""
        known = self._known.get(doc.id)
        return known if known is not None else self.chunker.chunk(doc)

    def index(
        self,
        doc: Document,
        store: ChunkStore,
        embedder: TextEmbedder,
        *,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> MultiIndex:
        """Build its levels of ``doc`` and make sure each is in ``store`` (one part of the bar per level)."""
        return build_index(doc, self.chunker, self.finest_units(doc), store, embedder, cache=cache, progress=progress)

    def training_data(
        self,
        questions: QuestionSet,
        store: ChunkStore,
        embedder: TextEmbedder,
        *,
        retrieve: int = 5,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> TrainingData:
        """The soft-labelled questions its router trains on (every corpus indexed first).

        Raises:
            ParameterError: a retriever without a router (FreeChunker).
        """
        if not self.chunker.routed:
            raise ParameterError(f"{self.config.name} has no router; train one for mog or mogg")
        indexes = index_corpora(self, questions, store, embedder, cache=cache, progress=progress)
        return training_data(questions, self.chunker, indexes, store, embedder, retrieve=retrieve, cache=cache)

    def answer(
        self,
        doc: Document,
        store: ChunkStore,
        embedder: TextEmbedder,
        query: str,
        k: int,
        *,
        marks: Sequence[Range] = (),
        train_on: QuestionSet | None = None,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> LevelAnswer:
        """Its answer to ``query``: ``router=cv`` trains on ``train_on``, ``oracle`` uses ``marks`` (else uniform)."""
        check_query(query, k)
        index = self.index(doc, store, embedder, cache=cache, progress=progress)
        training = None
        if self.chunker.routed and self.chunker.level_routing.kind == "cv" and train_on is not None and len(train_on):
            training = self.training_data(train_on, store, embedder, retrieve=k, cache=cache)
        live = live_retrieve(index, self.chunker, store, embedder, query, k, marks=marks, training=training, cache=cache)
        return LevelAnswer(live)

    def run(
        self,
        questions: QuestionSet,
        store: ChunkStore,
        embedder: TextEmbedder,
        q_vectors: np.ndarray,
        asking: Asking,
        *,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> QuestionsRun:
        """Index every corpus, answer every question (routed or assembled), its entries scored on their ranges."""
        t0 = time.perf_counter()
        indexes = index_corpora(self, questions, store, embedder, cache=cache, progress=progress)
        index_seconds = time.perf_counter() - t0
        run = run_retriever(questions, self.chunker, indexes, store, embedder, q_vectors, retrieve=asking.retrieve,
                            cross_corpus=asking.cross_corpus, cache=cache)
        routed = run.routing is not None
        retrieved = tuple(
            tuple(RetrievedChunk(p.corpus_id, p.start, p.end, p.index, 0.0 if routed else 1.0 - p.score, p.tokens,
                                 p.level, p.ranges) for p in sel.picks)
            for sel in run.selections
        )
        units = [c for ix in indexes.values() for c in ix.units.chunks]
        return QuestionsRun(
            retrieved=retrieved,
            scored=tuple(tuple(r.spans for r in top) for top in retrieved),
            omega_spans={cid: ix.unit_ranges() for cid, ix in indexes.items()},
            entries=sum(ix.entries for ix in indexes.values()),
            unit_tokens_mean=float(np.mean([c.tokens for c in units])) if units else 0.0,
            index_seconds=index_seconds,
            texts_embedded=sum(ix.texts_embedded for ix in indexes.values()),
            query_seconds=run.query_seconds,
            reused=all(ix.reused for ix in indexes.values()),
            routing=run.routing,
        )
