"""The Retrieval page's work: which configurations can be searched, the search and CP plans, what the answers show.

A live query goes to every configuration's retriever in one background job
(:func:`plan_search`: its :class:`~backend.lab.jobs.JobPlan`, signature built here); chunkings and
multi-granularity retrievers answer alike (:class:`~backend.retrieval.retriever.base.Answer`).
Everything the page draws from the answers — the top-k tables, the retrievers' panels, the
sentences offered for marking, the scores against the marked answer, the document view — comes
from :func:`search_view`, :func:`scores_view` and :func:`document_view`, so the page only reads
its widgets and renders. Each step of the page is one call: :func:`retrieval_inputs` (the chosen
configurations chunked, with their colours and labels), :func:`plan_search`, :func:`search_view`,
:func:`answer_marks`, :func:`plan_cp`, :func:`answer_view`; the question set's (save, the table,
load back, import) are :mod:`backend.lab.questions`'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

from backend.chunkers.run import ChunkFn
from backend.chunking import ChunkerConfig, Chunking, ConfigEntry
from backend.errors import ModelError, ParameterError
from backend.figures.charts import config_color
from backend.figures.markdown import md_text
from backend.figures.retrieval_html import RET_STYLE, answer_html, answer_layer, highlight_html, layers_legend_html
from backend.figures.text import STYLE, esc, tag_badge_html
from backend.lab.compare import Column, chunk_entries
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.models.cache import default_cache
from backend.models.embeddings import embedded_in_parts
from backend.models.identity import embedder_fingerprint_without_loading
from backend.retrieval.evaluate import METRICS
from backend.retrieval.jobs import SearchResult, information_support_job, search_job
from backend.retrieval.live import (
    answer_texts,
    find_excerpts,
    live_scores,
    marked_ranges,
    retrieved_ranges,
    sentence_choices,
)
from backend.retrieval.metrics import union_ranges
from backend.retrieval.questions import QuestionSet
from backend.retrieval.retriever.base import Answer
from backend.retrieval.retriever.registry import describe
from backend.retrieval.store import store_location
from backend.text.document import Document

__all__ = [
    "PAGE_STYLE",
    "SearchInputs",
    "search_inputs",
    "retrieval_inputs",
    "plan_search",
    "indexing_resume_note",
    "SearchView",
    "search_view",
    "SentencePicker",
    "sentence_picker",
    "marks_caption",
    "ScoresView",
    "scores_view",
    "DocumentView",
    "document_view",
    "plan_cp",
    "question_rows",
    "QUESTION_COLUMNS",
    "units_caption",
    "question_set_key",
    "store_caption",
    "add_marks",
    "Marks",
    "answer_marks",
    "AnswerView",
    "answer_view",
]

PAGE_STYLE = STYLE + RET_STYLE  # the Retrieval page's CSS: the text views' and the top-k tables'

_PREVIEW_CHARS = 80
QUESTION_COLUMNS = ("question", "corpus_id", "excerpts", "characters", "first_excerpt")
_SCORES_NOTE = "The Chroma report's character-span metrics: overlapping retrieved chunks count twice in precision."


@dataclass(frozen=True)
class SearchInputs:
    """The chosen configurations that can be searched now, one line for each that cannot, and how each is drawn.

    Attributes:
        chunkings: Per tag, its chunking of the document (a retriever's: its finest units).
        notes: ``"B needs a model run: …"`` / ``"C: <error>"`` for the others.
        colors: Per chosen tag, its colour (:func:`backend.figures.charts.config_color`).
        labels: Per chosen tag, its configuration's label.
        uids: Per chosen tag, its configuration's uid.
    """

    chunkings: Mapping[str, Chunking]
    notes: tuple[str, ...]
    colors: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    uids: Mapping[str, int] = field(default_factory=dict)

    def header(self, tag: str) -> str:
        """The HTML above a configuration's top-k table: its coloured tag and its label (escaped)."""
        return f"{tag_badge_html(tag, self.colors[tag])}<b>{esc(self.labels[tag])}</b>"


def search_inputs(columns: Sequence[Column]) -> SearchInputs:
    """The columns of :func:`backend.lab.compare.chunk_entries` split into searchable chunkings and notes."""
    chunkings: dict[str, Chunking] = {}
    notes: list[str] = []
    entries = [c.entry for c in columns]
    colors = {e.tag: config_color(e.uid) for e in entries}
    labels = {e.tag: e.config.label for e in entries}
    uids = {e.tag: e.uid for e in entries}
    for c in columns:
        if c.chunking is not None:
            chunkings[c.entry.tag] = c.chunking
        elif c.pending:
            notes.append(f"{c.entry.tag} needs a model run: open it on the Compare page first")
        else:
            notes.append(f"{c.entry.tag}: {c.error}")
    return SearchInputs(chunkings, tuple(notes), colors, labels, uids)


def retrieval_inputs(doc: Document, chosen: Sequence[ConfigEntry], chunk: ChunkFn, with_model: ChunkFn) -> SearchInputs:
    """The chosen configurations chunked as Compare chunks them (:func:`backend.lab.compare.chunk_entries`), split.

    Args:
        doc: The document.
        chosen: The configurations picked, in order.
        chunk: How a configuration that needs no model is chunked.
        with_model: How a model-backed one is chunked without a model call (raises ``NotCached`` when it must run).
    """
    return search_inputs(chunk_entries(doc, chosen, chunk, with_model))


def question_set_key(qset: QuestionSet | None) -> Hashable:
    """What identifies a question set in a job's signature: its questions and its corpora's text digests."""
    if qset is None:
        return None
    return (qset.questions, tuple((cid, qset.document(cid).id) for cid in sorted(qset.corpora)))


def plan_search(
    doc: Document,
    chunkings: Mapping[str, Chunking],
    embedder_spec: str | None,
    query: str,
    k: int,
    *,
    marks: Sequence[tuple[int, int]] = (),
    train_on: QuestionSet | None = None,
) -> JobPlan:
    """The live search of every configuration for ``query`` (:func:`backend.retrieval.jobs.search_job`).

    The job's meta holds ``doc_id``, ``query``, ``k`` and ``tags`` (what the page shows beside
    its result).

    Raises:
        ParameterError: no query, or no configuration that has chunks.
    """
    query = query.strip()
    if not query:
        raise ParameterError("Type a query first.")
    if not chunkings:
        raise ParameterError("Pick at least one configuration that has chunks.")
    k = int(k)
    body = search_job(doc, dict(chunkings), embedder_spec, query, k, marks=tuple(marks), train_on=train_on)
    signature = (
        "search", doc.id, query, k, tuple((tag, ch.config) for tag, ch in chunkings.items()), embedder_spec,
        tuple(marks), question_set_key(train_on),
    )
    meta = {"doc_id": doc.id, "query": query, "k": k, "tags": list(chunkings)}
    return JobPlan("Searching", signature, lambda _scorer, progress: body(progress), meta=meta)


def indexing_resume_note(chunkings: Mapping[str, Chunking], embedder_spec: str | None) -> str | None:
    """``"N of M chunks already embedded"`` when an interrupted indexing run of these chunkings left work; else None.

    Reads only which parts of the embeddings of each configuration's finest units (a chunking's
    chunks, a retriever's first level) the output cache holds, never a model; the next search
    goes on from them.
    """
    try:
        fingerprint = embedder_fingerprint_without_loading(embedder_spec)
    except ModelError:
        return None
    if fingerprint is None:
        return None
    cache = default_cache()
    done = total = 0
    for chunking in chunkings.values():
        texts = [c.text for c in chunking.chunks]
        k = embedded_in_parts(cache, fingerprint, texts)
        if k:
            done, total = done + k, total + len(texts)
    return f"{done:,} of {total:,} chunks already embedded" if done else None


@dataclass(frozen=True)
class SearchView:
    """What the page shows of a finished search.

    Attributes:
        query: The query searched.
        k: Entries asked of each configuration.
        tags: The tags shown (the search's, among the configurations chosen now), in order.
        answers: Per shown tag, its answer.
        tables: Per shown tag, its top-k table (HTML).
        panels: Per shown tag that explains itself (a retriever), what its panel draws.
        caption: The line above the tables (Markdown).
    """

    query: str = ""
    k: int = 0
    tags: tuple[str, ...] = ()
    answers: Mapping[str, Answer] = field(default_factory=dict)
    tables: Mapping[str, str] = field(default_factory=dict)
    panels: Mapping[str, Any] = field(default_factory=dict)
    caption: str = ""


def search_view(doc: Document, result: SearchResult | None, tags_now: Sequence[str]) -> SearchView:
    """The finished search's tables, panels and caption, for the configurations chosen now (empty: no result)."""
    if result is None:
        return SearchView()
    tags = tuple(t for t in result.tags if t in tags_now)
    answers = {t: result.answers[t] for t in tags}
    panels = {t: a.panel for t, a in answers.items() if a.panel is not None}
    caption = (
        f"Query: {md_text(result.query)} · top {result.k} · distance is cosine (0 = same direction)"
        + (" · a retriever's score is its own (see its panel below)." if panels else ".")
    )
    tables = {t: answer_html(a.table(), doc.text) for t, a in answers.items()}
    return SearchView(result.query, result.k, tags, answers, tables, panels, caption)


@dataclass(frozen=True)
class SentencePicker:
    """The sentences offered for marking the answer, the picks still among them, and how each option reads.

    Attributes:
        options: Sentence indices offered: all, or in a long document those of what was retrieved.
        picked: The session's picks that are still offered (a stale pick is dropped).
        labels: Per option, ``"12: The keeper climbed…"`` (its first 90 characters, on one line).
    """

    options: tuple[int, ...]
    picked: tuple[int, ...]
    labels: Mapping[int, str]


def sentence_picker(doc: Document, view: SearchView, picked: Sequence[int]) -> SentencePicker:
    """The sentence picker's options near what ``view`` retrieved, the valid ``picked``, and the options' labels."""
    near = [r for a in view.answers.values() for r in retrieved_ranges(a)]
    options = sentence_choices(doc, near)
    offered = set(options)
    sentences = doc.sentences
    labels = {i: f"{i}: {' '.join(sentences[i].slice(doc.text).split())[:90]}" for i in options}
    return SentencePicker(tuple(options), tuple(i for i in picked if i in offered), labels)


def marks_caption(marks: Sequence[tuple[int, int]]) -> str:
    """``Marked: 2 range(s), 310 characters: 1,204–1,380, …`` (the first eight ranges)."""
    return (
        f"Marked: {len(marks)} range(s), {sum(e - s for s, e in marks):,} characters: "
        + ", ".join(f"{s:,}–{e:,}" for s, e in marks[:8]) + (" …" if len(marks) > 8 else "")
    )


@dataclass(frozen=True)
class ScoresView:
    """The scores table against the marked answer.

    Attributes:
        rows: One per shown tag: ``config``, recall, precision, precision-Ω and IoU in %, ``cp``
            (with CP values), ``omega_on`` (what precision-Ω was computed on).
        columns: The rows' columns, in order.
        caption: The line under the table.
    """

    rows: tuple[dict[str, Any], ...]
    columns: tuple[str, ...]
    caption: str


def scores_view(view: SearchView, marks: Sequence[tuple[int, int]], cp: Mapping[str, float] | None = None) -> ScoresView:
    """Each shown configuration's recall, precision, precision-Ω and IoU against ``marks`` (and CP when given).

    Raises:
        ParameterError: no marks.
    """
    scores = live_scores(view.answers, marks)
    rows = []
    for tag in view.tags:
        row: dict[str, Any] = {"config": tag, **{m: 100 * getattr(scores[tag], m) for m in METRICS}}
        if cp is not None:
            row["cp"] = cp.get(tag, math.nan)
        row["omega_on"] = view.answers[tag].terms.name
        rows.append(row)
    columns = ("config", *METRICS, *(("cp",) if cp is not None else ()), "omega_on")
    notes = dict.fromkeys(a.terms.scores_note for a in view.answers.values() if a.terms.scores_note)
    return ScoresView(tuple(rows), columns, " ".join([_SCORES_NOTE, *notes]))


@dataclass(frozen=True)
class DocumentView:
    """The document with every shown configuration's retrieved spans and the marked answer (HTML), and its key."""

    legend: str
    html: str


def document_view(
    doc: Document,
    view: SearchView,
    colors: Mapping[str, str],
    labels: Mapping[str, str],
    marks: Sequence[tuple[int, int]],
) -> DocumentView:
    """The document view: one coloured layer per shown tag, the marked answer underlined."""
    layers = [answer_layer(t, colors[t], view.answers[t]) for t in view.tags]
    return DocumentView(layers_legend_html(layers, labels), highlight_html(doc.text, layers, marks))


def plan_cp(doc: Document, view: SearchView, answer: str, models: SessionModels) -> JobPlan:
    """CP (information support) of each shown configuration's retrieved texts for ``answer``, with the language model.

    Raises:
        ParameterError: no answer, or the session's language model is unusable.
    """
    answer = answer.strip()
    if not answer:
        raise ParameterError("Type the answer first.")
    if models.error:
        raise ParameterError(models.error)
    texts = {t: answer_texts(view.answers[t], doc.text) for t in view.tags}
    signature = ("cp", doc.id, view.query, view.k, view.tags, answer, models.identity)
    return JobPlan("Computing CP", signature, information_support_job(texts, answer), models=models)


def question_rows(qset: QuestionSet) -> list[dict[str, Any]]:
    """One plain row per question (:data:`QUESTION_COLUMNS`): the question, its corpus, its excerpts and their characters."""
    return [
        {
            "question": q.question,
            "corpus_id": q.corpus_id,
            "excerpts": len(q.references),
            "characters": sum(r.end - r.start for r in q.references),
            "first_excerpt": _preview(q.references[0].content, _PREVIEW_CHARS),
        }
        for q in qset.questions
    ]



def store_caption() -> str:
    """Where the Chroma store is, in one line, for the Retrieval page's head.

    Raises:
        StoreError, ParameterError: ``CHROMA_HOST``/``CHROMA_PORT`` name no usable server.
    """
    kind, where = store_location()
    place = f"server at {where}" if kind == "server" else f"embedded store in {where}"
    return f"Chroma: {place} · each configuration is indexed once per document and embedder, then reused."


def add_marks(text: str, pasted: str, marks: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``marks`` with the pasted excerpts added (found exactly, or ignoring whitespace; ``---`` separates several).

    Raises:
        ParameterError: nothing pasted, or an excerpt that is not in ``text`` (one line naming it).
    """
    return union_ranges([*marks, *find_excerpts(text, pasted)])


def units_caption(config: ChunkerConfig) -> str:
    """What the Compare page says under a configuration's card about its units ("" : nothing)."""
    return describe(config).terms.caption


@dataclass(frozen=True)
class Marks:
    """The marked answer: its ranges and the line saying what is marked ("" when nothing is)."""

    ranges: tuple[tuple[int, int], ...]
    caption: str


def answer_marks(doc: Document, pasted: Sequence[tuple[int, int]], picked: Sequence[int]) -> Marks:
    """The pasted excerpts' ranges and the picked sentences, merged (:func:`backend.retrieval.live.marked_ranges`)."""
    ranges = tuple(marked_ranges(doc, pasted, picked))
    return Marks(ranges, marks_caption(ranges) if ranges else "")


@dataclass(frozen=True)
class AnswerView:
    """What the page shows once a search is marked: the scores table and the document view (None: not shown).

    Attributes:
        scores: The scores against the marks (a search and marks), else None.
        document: The document with the retrieved spans and the marks (a search or marks), else None.
    """

    scores: ScoresView | None
    document: DocumentView | None


def answer_view(doc: Document, view: SearchView, inputs: SearchInputs, marks: Sequence[tuple[int, int]],
                cp: Mapping[str, float] | None = None) -> AnswerView:
    """The scores (:func:`scores_view`) and the document view (:func:`document_view`) the search and marks call for."""
    scores = scores_view(view, marks, cp) if view.tags and marks else None
    shown = document_view(doc, view, inputs.colors, inputs.labels, marks) if view.tags or marks else None
    return AnswerView(scores, shown)


def _preview(text: str, n: int) -> str:
    """Text on one line, shortened to ``n`` characters (table cells are plain text)."""
    flat = " ".join(text[: n * 2].split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


