"""Any chunking configuration as a one-level retriever: its chunks are its one level and its finest units.

The adapter keeps exactly the chunk scoring the benchmark has always had: chunks are scored where
the reference's chunk search places them (:func:`~backend.retrieval.metrics.reference_chunk_spans`)
unless :attr:`~backend.retrieval.retriever.base.Asking.chunk_spans` is ``exact``; ``retrieve=-1``
takes as many chunks as meet a question's excerpts, capped at ``min(20, the largest such count
over the set)``; each corpus has its own collection and the nearest chunks of all of them are
merged by distance (ties: corpus order, then rank). The collection of a chunking is the one it
always had (:func:`~backend.retrieval.store.chunking_level`), so stores written before are reused.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from backend.chunkers import run_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder, embed_texts
from backend.progress import Progress
from backend.retrieval.metrics import containing_chunks, reference_chunk_spans
from backend.retrieval.multi.index import CountingEmbedder
from backend.retrieval.questions import QuestionSet
from backend.retrieval.retriever.base import (
    CHUNK_TERMS,
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
from backend.retrieval.store import ChunkStore, Hit, IndexInfo, chunking_level
from backend.text.document import Document

__all__ = ["MAX_AUTO_RETRIEVE", "ChunkIndex", "ChunkAnswer", "ChunkRetriever"]

MAX_AUTO_RETRIEVE = 20  # the reference's cap for retrieve=-1


@dataclass(frozen=True)
class ChunkIndex:
    """A chunking of one document in the store: its one level.

    Attributes:
        units: The chunking.
        info: The store's answer (collection name, rows, reused).
        texts_embedded: Texts the embedder embedded (0 when all came from the cache or the store).
        seconds: Wall time of indexing.
    """

    units: Chunking
    info: IndexInfo
    texts_embedded: int
    seconds: float

    @property
    def reused(self) -> bool:
        """Whether the collection was already complete."""
        return self.info.reused

    @property
    def entries(self) -> int:
        """Its chunks."""
        return len(self.units)

    def to_json(self) -> dict[str, Any]:
        """What ``python -m backend index`` prints: the collection's name, rows, reuse and time."""
        return self.info.to_json()


@dataclass(frozen=True)
class ChunkAnswer:
    """A chunking's answer to a live query: its nearest chunks.

    Attributes:
        config: The chunking's configuration.
        units: The chunking.
        hits: The nearest chunks, rank 1 first.
    """

    config: ChunkerConfig
    units: Chunking
    hits: tuple[Hit, ...]

    @property
    def terms(self) -> UnitTerms:
        """A chunking's units are its chunks."""
        return CHUNK_TERMS

    @property
    def panel(self) -> None:
        """Nothing to explain beyond its table."""
        return None

    def retrieved(self) -> tuple[tuple[int, tuple[Range, ...]], ...]:
        """``(rank, ((start, end),))`` per hit."""
        return tuple((h.rank, ((h.start, h.end),)) for h in self.hits)

    def table(self) -> AnswerTable:
        """Rank, the chunk's text, then its distance, tokens and span."""
        rows = tuple(
            AnswerRow(h.rank, ((h.start, h.end),), (f"{h.distance:.3f}", f"{h.tokens:,} tok", f"{h.start:,}–{h.end:,}"))
            for h in self.hits
        )
        return AnswerTable("rt-hits", "Chunk", "Distance", "cosine distance · tokens · characters", "", rows)

    def json_lines(self, text: str) -> list[dict[str, Any]]:
        """``{"rank", "distance", "start", "end", "index", "tokens", "text"}`` per hit."""
        return [{**h.to_json(), "text": text[h.start : h.end]} for h in self.hits]

    def notes(self) -> list[str]:
        """Nothing to say beside the hits."""
        return []


class ChunkRetriever:
    """A chunking configuration as a one-level retriever (see the module docstring).

    Args:
        config: Any registered chunker's configuration.
        context: The models of a model-backed chunker (see :class:`ModelContext`).
        chunkings: Chunkings already made (the app's, from the Compare page): used for their
            documents instead of chunking again.
    """

    def __init__(
        self, config: ChunkerConfig, *, context: ModelContext | None = None, chunkings: Sequence[Chunking] = ()
    ) -> None:
        self.config = config
        self.context = context
        self._known = {c.doc_id: c for c in chunkings}

    def __repr__(self) -> str:
        return f"ChunkRetriever({self.config.label})"

    def describe(self) -> RetrieverInfo:
        """One level, its chunks; no routing."""
        return RetrieverInfo(self.config, ("chunks",), "", CHUNK_TERMS)

    def finest_units(self, doc: Document) -> Chunking:
        """Its chunking of ``doc`` (a known one, else chunked now)."""
        known = self._known.get(doc.id)
        return known if known is not None else run_chunker(doc, self.config, self.context)

    def index(
        self,
        doc: Document,
        store: ChunkStore,
        embedder: TextEmbedder,
        *,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> ChunkIndex:
        """Chunk ``doc`` and make sure the chunking's collection is complete in ``store``."""
        t0 = time.perf_counter()
        chunking = self.finest_units(doc)
        counting = CountingEmbedder(embedder)
        info = store.write_level(chunking_level(doc, chunking, embedder.info), counting, cache=cache, progress=progress)
        return ChunkIndex(chunking, info, counting.texts, time.perf_counter() - t0)

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
    ) -> ChunkAnswer:
        """The ``k`` chunks nearest to ``query`` (the chunking indexed first when it is not)."""
        check_query(query, k)
        index = self.index(doc, store, embedder, cache=cache, progress=progress)
        vector, _ = embed_texts(embedder, [query], cache=cache)
        rows = store.query_level(index.info.name, vector, k, label=f"{doc.source} for {self.config.label}")[0]
        return ChunkAnswer(self.config, index.units, tuple(_hit(h) for h in rows))

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
        """Index every corpus, retrieve each question's nearest chunks over all corpora (or its own), merged by distance."""
        t0 = time.perf_counter()
        indexes = index_corpora(self, questions, store, embedder, cache=cache, progress=progress)
        index_seconds = time.perf_counter() - t0
        t_query = time.perf_counter()
        spans = {cid: [(c.start, c.end) for c in ix.units.chunks] for cid, ix in indexes.items()}
        if asking.chunk_spans == "reference":
            spans = {cid: reference_chunk_spans(questions.corpora[cid], sp) for cid, sp in spans.items()}
        qs = questions.questions
        if asking.retrieve == -1:
            meeting = [len(containing_chunks(spans[q.corpus_id], q.spans)) for q in qs]
            depth = min(MAX_AUTO_RETRIEVE, max(meeting))
            wanted = [min(m, depth) for m in meeting]
        else:
            depth = asking.retrieve
            wanted = [asking.retrieve] * len(qs)

        # hits[i]: candidates (distance, corpus order, rank, RetrievedChunk) for question i.
        hits: list[list[tuple[float, int, int, RetrievedChunk]]] = [[] for _ in qs]
        if depth > 0:
            for order, (cid, index) in enumerate(indexes.items()):
                rows = list(range(len(qs))) if asking.cross_corpus else [i for i, q in enumerate(qs) if q.corpus_id == cid]
                if not rows:
                    continue
                answers = store.query_level(index.info.name, q_vectors[rows], depth)
                for i, found in zip(rows, answers):
                    for h in found:
                        (s, e), = h.ranges
                        hits[i].append((h.distance, order, h.rank, RetrievedChunk(cid, s, e, h.index, h.distance, h.tokens)))
        retrieved = []
        scored = []
        for i in range(len(qs)):
            top = tuple(item[3] for item in heapq.nsmallest(wanted[i], hits[i], key=lambda t: (t[0], t[1], t[2])))
            retrieved.append(top)
            scored.append(tuple((spans[r.corpus_id][r.index],) for r in top))  # where each retrieved chunk is scored
        query_seconds = (time.perf_counter() - t_query) / max(1, len(qs))
        tokens = [c.tokens for ix in indexes.values() for c in ix.units.chunks]
        return QuestionsRun(
            retrieved=tuple(retrieved),
            scored=tuple(scored),
            omega_spans=spans,
            entries=sum(ix.entries for ix in indexes.values()),
            unit_tokens_mean=float(np.mean(tokens)) if tokens else 0.0,
            index_seconds=index_seconds,
            texts_embedded=sum(ix.texts_embedded for ix in indexes.values()),
            query_seconds=query_seconds,
            reused=all(ix.reused for ix in indexes.values()),
        )


def _hit(row: Any) -> Hit:
    """A store row of a chunking's level as the chunk it is."""
    (start, end), = row.ranges
    return Hit(rank=row.rank, distance=row.distance, start=start, end=end, index=row.index, tokens=row.tokens)
