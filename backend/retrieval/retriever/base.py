"""What every retriever does, and the plain data it answers with.

A :class:`Retriever` turns one configuration into retrieval: it builds its index of a document
in the store (one level or more, :meth:`Retriever.index`), answers one live query
(:meth:`Retriever.answer`) and a question set's batch for the benchmark (:meth:`Retriever.run`),
gives its finest units (:meth:`Retriever.finest_units`: what precision-Ω and the Compare page's
chunks are computed on) and describes itself (:meth:`Retriever.describe`: its levels, its routing,
how the lab's outputs name its units). Any chunking configuration is one through the adapter
:class:`~backend.retrieval.retriever.chunks.ChunkRetriever` (one level: its chunks); the
multi-granularity retrievers (``mog``, ``mogg``, ``freechunker``) are
:class:`~backend.retrieval.retriever.levels.LevelRetriever`. So evaluation, the live query, the
store, the Summary and the report each have one path, and what differs between a chunking and a
retriever is said by the objects here (:class:`UnitTerms`, :class:`AnswerTable`), never asked of a
configuration's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from backend.chunking import ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder
from backend.progress import Progress
from backend.retrieval.multi.retrievers import Routing
from backend.retrieval.questions import QuestionSet
from backend.retrieval.store import ChunkStore
from backend.text.document import Document

if TYPE_CHECKING:
    import numpy as np


__all__ = [
    "Range",
    "UnitTerms",
    "CHUNK_TERMS",
    "UNIT_TERMS",
    "TERMS",
    "RetrieverInfo",
    "RetrievedChunk",
    "Asking",
    "QuestionsRun",
    "AnswerRow",
    "AnswerTable",
    "Answer",
    "Indexed",
    "Retriever",
    "check_query",
    "index_corpora",
]

Range = tuple[int, int]


@dataclass(frozen=True)
class UnitTerms:
    """How the lab's outputs name what a configuration's precision-Ω and entry counts are computed on.

    A chunking's units are its chunks; a multi-granularity retriever's are its finest units
    (MoG's level 1, MoGG's nodes, FreeChunker's units), not what it returns. Every output reads
    its words here, so none asks which kind of configuration it shows.

    Attributes:
        name: ``chunks`` or ``units`` (a benchmark row's ``omega_units``).
        counted: What a benchmark row's chunk count counts (``chunks``, or ``entries`` of all levels).
        mark: The CLI's mark on its precision-Ω (``precision-Ω*``).
        table_mark: The Benchmark tables' mark on its precision-Ω cells.
        footnotes: The CLI's lines explaining :attr:`mark`.
        config_notes: The Summary's qualifier per metric for the configuration itself.
        result_notes: The Summary's qualifier per metric beside its benchmark numbers.
        caption: What the Compare page says under its card ("" : nothing).
        scores_note: What the Retrieval page says under its scores ("" : nothing).
        benchmark_note: What the Benchmark page says under its table, ``{tags}`` its tags ("" : nothing).
        agreement_note: What the Benchmark page says above its agreement maps, ``{tags}`` its tags.
    """

    name: str
    counted: str
    mark: str = ""
    table_mark: str = ""
    footnotes: tuple[str, ...] = ()
    config_notes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    result_notes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    caption: str = ""
    scores_note: str = ""
    benchmark_note: str = ""
    agreement_note: str = ""


CHUNK_TERMS = UnitTerms("chunks", "chunks")
UNIT_TERMS = UnitTerms(
    "units",
    "entries",
    mark="*",
    table_mark="†",
    footnotes=("* precision-Ω on the retriever's finest units",),
    config_notes=MappingProxyType({"chunks": "finest units"}),
    result_notes=MappingProxyType({"precision_omega": "on units"}),
    caption="A retriever, not a chunker: the chunks shown are its finest units; "
    "its levels and routing are on the Retrieval and Benchmark pages.",
    scores_note="Precision-Ω of a retriever is computed on its finest units (its levels have no single chunking).",
    benchmark_note="{tags}: query-time retriever(s). † Their precision-Ω is computed on their finest units (MoG's "
    "level 1, MoGG's nodes, FreeChunker's units), not on what they return; their chunks count the entries of all "
    "their levels, their tokens the finest units'.",
    agreement_note="{tags}: a retriever's spans here are its finest units (what it is built from).",
)
TERMS: Mapping[str, UnitTerms] = MappingProxyType({t.name: t for t in (CHUNK_TERMS, UNIT_TERMS)})


@dataclass(frozen=True)
class RetrieverInfo:
    """What a retriever says about itself.

    Attributes:
        config: Its configuration.
        levels: Its levels' names, finest first (a chunking: one, ``chunks``).
        router: How it weighs its levels per query (``cv``, ``level:2``…); "" without a router.
        terms: How the lab's outputs name its units.
    """

    config: ChunkerConfig
    levels: tuple[str, ...]
    router: str
    terms: UnitTerms


@dataclass(frozen=True)
class RetrievedChunk:
    """A chunk retrieved for a question: its corpus, span, index in its chunking and cosine distance."""

    corpus_id: str
    start: int
    end: int
    index: int
    distance: float
    tokens: int = 0
    level: int = 0  # a retriever's level (FreeChunker: the largest window in the run); 0 for a chunk
    ranges: tuple[tuple[int, int], ...] = ()  # a retriever's entry may cover several ranges; () = (start, end)

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """Its exact character ranges."""
        return self.ranges or ((self.start, self.end),)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = dict(self.__dict__)
        out["ranges"] = [list(r) for r in self.spans]
        return out


@dataclass(frozen=True)
class Asking:
    """How the benchmark asks a question set.

    Attributes:
        retrieve: Entries per question, or -1: as many as hold excerpts (at most 20).
        cross_corpus: Retrieve from every corpus of the set (False: the question's own).
        chunk_spans: Where a chunking's chunks are scored: ``reference`` (located as the
            reference's chunk search does) or ``exact``; a multi-granularity retriever's entries
            are always scored on their exact ranges.
    """

    retrieve: int = 5
    cross_corpus: bool = True
    chunk_spans: str = "reference"


@dataclass(frozen=True)
class QuestionsRun:
    """A retriever's answers to a question set, where each is scored, and what they cost.

    Attributes:
        retrieved: Per question (question-set order), what it returned, best first.
        scored: Per question and retrieved entry, the ranges its scores count (a chunk: where the
            reference's chunk search places it, or its exact span; a retriever's entry: its ranges).
        omega_spans: Per corpus, the spans precision-Ω is computed on (a chunking's chunks, a
            retriever's finest units).
        entries: Entries indexed over all levels and corpora.
        unit_tokens_mean: Mean tokens of its finest units (a chunking: of its chunks).
        index_seconds: Building and indexing every corpus.
        texts_embedded: Texts the embedder embedded while indexing (0 when cached).
        query_seconds: Mean seconds per question from its vector to its answer.
        reused: Every corpus was already indexed.
        routing: A routed retriever's weights, chosen and oracle levels (None otherwise).
    """

    retrieved: tuple[tuple[RetrievedChunk, ...], ...]
    scored: tuple[tuple[tuple[Range, ...], ...], ...]
    omega_spans: Mapping[str, Sequence[Range]]
    entries: int
    unit_tokens_mean: float
    index_seconds: float
    texts_embedded: int
    query_seconds: float
    reused: bool
    routing: Routing | None = None


@dataclass(frozen=True)
class AnswerRow:
    """One returned entry in a live answer's table: its rank, its ranges and the numbers beside it (one line each)."""

    rank: int
    ranges: tuple[Range, ...]
    numbers: tuple[str, ...]


@dataclass(frozen=True)
class AnswerTable:
    """A live answer as its top-k table shows it (:func:`backend.figures.retrieval_html.answer_html`).

    Attributes:
        css: The table's classes.
        heading: The text column's heading.
        numbers_heading: The numbers column's heading.
        numbers_title: What the numbers are (the heading's tooltip).
        empty: The row shown when nothing was returned ("" : none).
        rows: The returned entries, rank 1 first.
    """

    css: str
    heading: str
    numbers_heading: str
    numbers_title: str
    empty: str
    rows: tuple[AnswerRow, ...]


class Answer(Protocol):
    """A retriever's answer to one live query."""

    config: ChunkerConfig

    @property
    def units(self) -> Chunking:
        """Its finest units of the document (a chunking: itself): precision-Ω is computed on them."""

    @property
    def terms(self) -> UnitTerms:
        """How outputs name its units."""

    @property
    def panel(self) -> Any | None:
        """What the Retrieval page explains in a panel (a retriever's levels and routing), else None."""

    def retrieved(self) -> tuple[tuple[int, tuple[Range, ...]], ...]:
        """``(rank, ranges)`` of every returned entry, rank 1 first."""

    def table(self) -> AnswerTable:
        """Its top-k table."""

    def json_lines(self, text: str) -> list[dict[str, Any]]:
        """What ``python -m backend query`` prints: one object per returned entry, its text included."""

    def notes(self) -> list[str]:
        """What ``python -m backend query`` says on stderr beside it (a chosen level, a router's fallback)."""


class Indexed(Protocol):
    """A retriever's index of one document, as the store holds it."""

    units: Chunking
    reused: bool
    texts_embedded: int
    seconds: float

    @property
    def entries(self) -> int:
        """Entries over all its levels."""

    def to_json(self) -> dict[str, Any]:
        """What ``python -m backend index`` prints of it."""


class Retriever(Protocol):
    """What every retriever does (see the module docstring); built by :func:`~backend.retrieval.retriever.registry.make_retriever`."""

    config: ChunkerConfig

    def describe(self) -> RetrieverInfo:
        """Its levels, routing and how outputs name its units."""

    def finest_units(self, doc: Document) -> Chunking:
        """Its finest units of ``doc`` (a chunking: its chunks)."""

    def index(
        self,
        doc: Document,
        store: ChunkStore,
        embedder: TextEmbedder,
        *,
        cache: OutputCache | None = None,
        progress: Progress | None = None,
    ) -> Indexed:
        """Make sure its index of ``doc`` (every level) is in ``store``; reused when complete."""

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
    ) -> Answer:
        """Index ``doc`` if needed and answer ``query`` with at most ``k`` entries.

        ``marks`` (the marked answer) and ``train_on`` (the session's question set) serve a
        router that needs them (``oracle``, ``cv``); others ignore them.
        """

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
        """Index every corpus of ``questions`` and answer every question (``q_vectors``, in order)."""


def check_query(query: str, k: int) -> None:
    """A live query's arguments checked before anything is indexed.

    Raises:
        ParameterError: an empty query, ``k`` below 1.
    """
    if not query.strip():
        raise ParameterError("the query is empty")
    if k < 1:
        raise ParameterError(f"k ({k}) must be at least 1")


def index_corpora(
    retriever: Retriever,
    questions: QuestionSet,
    store: ChunkStore,
    embedder: TextEmbedder,
    *,
    cache: OutputCache | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every corpus of ``questions`` indexed by ``retriever``, in corpus order; one part of the bar per corpus, by length.

    A corpus done fills its part, even when its index came from the store or the cache.
    """
    progress = progress or Progress()
    ids = questions.corpus_ids
    sizes = [len(questions.corpora[c]) + 1 for c in ids]
    out: dict[str, Any] = {}
    for i, cid in enumerate(ids):
        part = progress.part(i, len(ids), "corpus", weights=sizes)
        out[cid] = retriever.index(questions.document(cid), store, embedder, cache=cache, progress=part)
        part(1, 1)
    return out
