"""The live query on one document: mark the true answer, score each configuration's hits, save it as a question.

The Retrieval page's rules, as plain functions of a :class:`~backend.text.document.Document`,
so the page only reads widgets and the same answers come out of a script:

- the answer is marked by pasting excerpts (:func:`split_excerpts`, :func:`find_excerpts`:
  found exactly, else ignoring whitespace, by :class:`~backend.retrieval.metrics.ExcerptFinder`)
  or by picking sentences (:func:`sentence_choices` limits what a long document offers);
- :func:`live_scores` is the Chroma report's four metrics of each configuration's answer
  against the union of the marks, chunkings and retrievers alike (every range of every
  returned entry; precision-Ω on its finest units — a chunking's chunks — as the benchmark
  computes it), and :func:`level_top1` each level's top-1 IoU with the marks (what MoG's soft
  labels are made of), so marking after a search needs no new search;
- :func:`question_from_marks` and :func:`add_questions` turn a query and its marks into a
  :class:`~backend.retrieval.questions.Question` of a session's
  :class:`~backend.retrieval.questions.QuestionSet` (one corpus per document, see
  :func:`corpus_id_in`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from backend.errors import ParameterError
from backend.retrieval.metrics import ExcerptFinder, RetrievalScores, score_retrieval, union_ranges
from backend.retrieval.multi.retrievers import LiveRetrieval
from backend.retrieval.multi.select import level_similarities
from backend.retrieval.questions import HAND_WRITTEN, Question, QuestionSet, Reference, corpus_id_for
from backend.retrieval.retriever.base import Answer
from backend.text.document import Document

if TYPE_CHECKING:
    import numpy as np


__all__ = [
    "EXCERPT_SEPARATOR",
    "split_excerpts",
    "find_excerpts",
    "live_scores",
    "level_top1",
    "retrieved_ranges",
    "answer_texts",
    "sentence_choices",
    "marked_ranges",
    "question_from_marks",
    "corpus_id_in",
    "add_questions",
    "questions_over",
]

EXCERPT_SEPARATOR = "---"  # a line holding only this separates pasted excerpts


def _flat(text: str, n: int) -> str:
    """``text`` on one line, shortened to ``n`` characters (for error messages)."""
    flat = " ".join(text[: n * 2].split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def split_excerpts(raw: str) -> list[str]:
    """Pasted excerpts: several are separated by a line holding only ``---``; blank ones are dropped.

    Args:
        raw: The pasted text.

    Returns:
        The excerpts, stripped, in the order pasted.
    """
    pieces, current = [], []
    for line in raw.splitlines(keepends=True):
        if line.strip() == EXCERPT_SEPARATOR:
            pieces.append("".join(current))
            current = []
        else:
            current.append(line)
    pieces.append("".join(current))
    return [p.strip() for p in pieces if p.strip()]


def find_excerpts(text: str, raw: str) -> list[tuple[int, int]]:
    """The ranges of the pasted excerpts in ``text`` (exact, else whitespace-insensitive).

    Args:
        text: The document text.
        raw: The pasted excerpts (see :func:`split_excerpts`).

    Returns:
        One ``(start, end)`` per excerpt, in the order pasted.

    Raises:
        ParameterError: nothing pasted, or an excerpt that is not in the text (named, shortened).
    """
    excerpts = split_excerpts(raw)
    if not excerpts:
        raise ParameterError("paste the answer's text first")
    finder = ExcerptFinder(text)
    found = []
    for i, excerpt in enumerate(excerpts, 1):
        match = finder.find(excerpt)
        if match is None:
            which = f"excerpt {i} " if len(excerpts) > 1 else "the excerpt "
            raise ParameterError(f"{which}{_flat(excerpt, 60)!r} is not in the document (even ignoring whitespace)")
        found.append((match.start, match.end))
    return found


def retrieved_ranges(answer: Answer) -> list[tuple[int, int]]:
    """Every character range an answer returned: each entry's ranges, in rank order (overlaps kept)."""
    return [r for _, ranges in answer.retrieved() for r in ranges]


def answer_texts(answer: Answer, text: str) -> list[str]:
    """Each returned entry's text, its stretches joined by a newline (what CP conditions on), rank 1 first."""
    return ["\n".join(text[s:e] for s, e in ranges) for _, ranges in answer.retrieved()]


def live_scores(answers: Mapping[str, Answer], marks: Sequence[tuple[int, int]]) -> dict[str, RetrievalScores]:
    """The report's four metrics of each configuration's answer against the marked answer.

    An entry may cover several stretches (MoGG's neighbourhoods): each counts, as in the
    benchmark. Precision-Ω is computed on the answer's finest units (a chunking's chunks, a
    retriever's units: its levels have no single chunking).

    Args:
        answers: Per configuration tag, its answer to the live query.
        marks: The marked ranges; overlapping marks count once (their union is the answer).

    Returns:
        Per tag, its :class:`~backend.retrieval.metrics.RetrievalScores`.

    Raises:
        ParameterError: no marks.
    """
    excerpts = union_ranges(marks)
    return {
        tag: score_retrieval(retrieved_ranges(a), [(c.start, c.end) for c in a.units.chunks], excerpts)
        for tag, a in answers.items()
    }


def level_top1(live: LiveRetrieval, marks: Sequence[tuple[int, int]]) -> np.ndarray | None:
    """Each level's top-1 candidate's token IoU with the marked answer (None without marks).

    Args:
        live: A live retriever answer (its candidates per level).
        marks: The marked ranges now (they may have changed since the search).

    Returns:
        One value per level, finest first.
    """
    excerpts = union_ranges(marks)
    if not excerpts:
        return None
    return level_similarities([live.candidates], [live.index.doc.id], [excerpts], "iou")[0]


def sentence_choices(doc: Document, near: Sequence[tuple[int, int]] = (), limit: int = 1000) -> list[int]:
    """Indices of the sentences to offer for picking: all of them up to ``limit``, else those meeting ``near``.

    Args:
        doc: The document.
        near: Ranges (the retrieved chunks) whose sentences a long document offers.
        limit: The most sentences offered.
    """
    sentences = doc.sentences
    if len(sentences) <= limit:
        return list(range(len(sentences)))
    wanted = union_ranges(near)
    out = [i for i, s in enumerate(sentences) if any(s.start < e and s.end > b for b, e in wanted)]
    return out[:limit]


def marked_ranges(
    doc: Document, pasted: Sequence[tuple[int, int]], picked: Sequence[int]
) -> list[tuple[int, int]]:
    """The marked answer: the pasted excerpts' ranges and the picked sentences, merged.

    Args:
        doc: The document.
        pasted: Ranges found by :func:`find_excerpts`.
        picked: Sentence indices (ones past the last sentence are ignored: a stale pick).

    Returns:
        Sorted, disjoint ranges (touching ones joined).
    """
    sentences = doc.sentences
    chosen = [(sentences[i].start, sentences[i].end) for i in picked if 0 <= i < len(sentences)]
    return union_ranges([*pasted, *chosen])


def question_from_marks(doc: Document, query: str, marks: Sequence[tuple[int, int]], corpus_id: str) -> Question:
    """A question over ``doc`` with the union of ``marks`` as its references.

    Args:
        doc: The document the marks index.
        query: The question (stripped).
        marks: The answer's ranges.
        corpus_id: The corpus id the question refers to.

    Raises:
        ParameterError: an empty query or no marks.
    """
    if not query.strip():
        raise ParameterError("the query is empty: type the question first")
    spans = union_ranges(marks)
    if not spans:
        raise ParameterError("mark the true answer first (paste an excerpt or pick sentences)")
    return Question(query.strip(), tuple(Reference(doc.text[s:e], s, e) for s, e in spans), corpus_id)


def corpus_id_in(qset: QuestionSet | None, doc: Document) -> str:
    """``doc``'s corpus id in ``qset``: its file stem, with the document id added when that stem is taken.

    Args:
        qset: The set the document's questions join (None: a new set).
        doc: The document.
    """
    cid = corpus_id_for(doc)
    if qset is None or qset.corpora.get(cid, doc.text) == doc.text:
        return cid
    return f"{cid}-{doc.id[:8]}"


def add_questions(
    qset: QuestionSet | None, doc: Document, query: str, marks: Sequence[tuple[int, int]]
) -> QuestionSet:
    """``qset`` (or a new set) with the marked query over ``doc`` appended: a hand-written question.

    Args:
        qset: The set so far, or None.
        doc: The document the marks index (added as a corpus if new).
        query: The question.
        marks: The answer's ranges.

    Raises:
        ParameterError: an empty query or no marks.
    """
    cid = corpus_id_in(qset, doc)
    q = question_from_marks(doc, query, marks, cid)
    if qset is None:
        return QuestionSet((q,), {cid: doc.text}, method=HAND_WRITTEN)
    return qset.with_questions([q], {cid: doc.text}, method=HAND_WRITTEN)


def questions_over(qset: QuestionSet | None, doc: Document) -> list[Question]:
    """The questions of ``qset`` whose corpus is ``doc``'s text (to load one back into the live query)."""
    if qset is None:
        return []
    return [q for q in qset.questions if qset.corpora.get(q.corpus_id) == doc.text]
