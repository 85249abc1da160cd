"""The live query's rules: marking the answer, scoring hits, saving questions (exact outputs on small inputs).

These were the Retrieval page's helpers; the page and a script now call the same functions,
so each is pinned here with an exact expected value.
"""

from __future__ import annotations

import pytest

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.retrieval.live import (
    add_questions,
    corpus_id_in,
    find_excerpts,
    answer_texts,
    live_scores,
    marked_ranges,
    question_from_marks,
    questions_over,
    sentence_choices,
    split_excerpts,
)
from backend.retrieval.multi.select import Pick, Selection
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.retrieval.retriever.chunks import ChunkAnswer
from backend.retrieval.retriever.levels import LevelAnswer
from backend.retrieval.store import Hit
from backend.text.document import Document

SENTENCES = "One here. Two there! Three is last?\n\nFour ends."  # sentences at 0-9, 10-20, 21-35, 37-47


def _chunking(spans: list[tuple[int, int]], text: str) -> Chunking:
    chunks = tuple(Chunk(i, s, e, text[s:e], e - s) for i, (s, e) in enumerate(spans))
    return Chunking(ChunkerConfig("fixed_token", (("chunk_size", len(spans)),)), chunks, 0.0, "d", len(text))


def _hit(rank: int, start: int, end: int) -> Hit:
    return Hit(rank, 0.1 * rank, start, end, rank - 1, end - start)


def _answer(chunking: Chunking, *hits: Hit) -> ChunkAnswer:
    return ChunkAnswer(chunking.config, chunking, hits)


def test_excerpts_are_found_exactly_or_ignoring_whitespace() -> None:
    text = "Alpha beta.\nGamma   delta epsilon.\n\nZeta eta."
    assert split_excerpts("one\n---\n\ntwo\n  ---  \n\n") == ["one", "two"]
    assert find_excerpts(text, "Alpha beta.") == [(0, 11)]
    assert find_excerpts(text, "beta. Gamma delta") == [(6, 25)]
    assert find_excerpts(text, "Zeta eta.\n---\ndelta  epsilon") == [(36, 45), (20, 33)]
    with pytest.raises(ParameterError, match="excerpt 2 'omega' is not in the document"):
        find_excerpts(text, "Zeta\n---\nomega")
    with pytest.raises(ParameterError, match="the excerpt 'omega' is not"):
        find_excerpts(text, "omega")
    with pytest.raises(ParameterError, match="paste"):
        find_excerpts(text, "  \n---\n")


def test_live_scores_are_the_reports_metrics() -> None:
    text = "x" * 40
    chunking = _chunking([(0, 10), (10, 20), (20, 30), (30, 40)], text)
    answers = {"A": _answer(chunking, _hit(1, 10, 20), _hit(2, 20, 30))}
    # Two marks that overlap are one answer (their union), not counted twice.
    s = live_scores(answers, [(15, 22), (20, 25)])["A"]
    assert (s.recall, s.precision, s.iou) == (1.0, 0.5, 0.5)
    # Precision-Ω: chunks 10-20 and 20-30 meet the answer; |answer| / |their union| = 10 / 20.
    assert s.precision_omega == 0.5
    s = live_scores({"A": _answer(chunking, _hit(1, 0, 10), _hit(2, 20, 30))}, [(15, 25)])["A"]
    assert (s.recall, s.precision, s.iou) == (0.5, 0.25, 5 / 25)
    with pytest.raises(ParameterError):
        live_scores(answers, [])


def test_a_retrievers_scores_count_every_stretch_and_take_omega_on_the_units() -> None:
    from types import SimpleNamespace

    text = "x" * 40
    units = _chunking([(0, 10), (10, 20), (20, 30), (30, 40)], text)
    # A MoGG-like pick of two stretches (0-10 and 20-30), then one of a single stretch.
    picks = (Pick("d", 2, 0, ((0, 10), (20, 30)), 6, 0.9, (0, 2)), Pick("d", 2, 3, ((30, 40),), 3, 0.5, (3,)))
    live = SimpleNamespace(selection=Selection(picks, 2, (0.0, 1.0), ()), index=SimpleNamespace(units=units))
    answer = LevelAnswer(live)
    s = live_scores({"G": answer}, [(25, 35)])["G"]
    # 10 answer characters, all retrieved; 30 retrieved characters.
    assert (s.recall, s.precision, s.iou) == (1.0, 10 / 30, 10 / 30)
    assert s.precision_omega == 0.5  # units 20-30 and 30-40 meet the answer: 10 / 20
    assert answer_texts(answer, "abcdefghij" * 4) == ["abcdefghij\nabcdefghij", "abcdefghij"]
    with pytest.raises(ParameterError):
        live_scores({"G": answer}, [])


def test_sentence_choices_offer_all_or_those_near_the_hits() -> None:
    doc = Document.from_text(SENTENCES, source="s.md")
    assert sentence_choices(doc) == [0, 1, 2, 3]
    assert sentence_choices(doc, [(12, 25)], limit=3) == [1, 2]
    assert sentence_choices(doc, [(40, 41), (0, 2)], limit=1) == [0]


def test_marked_ranges_join_pasted_ranges_and_picked_sentences() -> None:
    doc = Document.from_text(SENTENCES, source="s.md")
    assert marked_ranges(doc, [(3, 12), (40, 44)], [2, 0, 9]) == [(0, 12), (21, 35), (40, 44)]
    assert marked_ranges(doc, [], []) == []


def test_questions_from_marks_and_their_corpus_ids() -> None:
    doc = Document.from_text("First line.\nSecond <b>line</b>.\n", source="my notes.md")
    q = question_from_marks(doc, "  What is second? ", [(12, 30), (12, 18), (0, 5)], "c")
    assert q == Question("What is second?", (Reference("First", 0, 5), Reference("Second <b>line</b>", 12, 30)), "c")
    with pytest.raises(ParameterError, match="query is empty"):
        question_from_marks(doc, " ", [(0, 5)], "c")
    with pytest.raises(ParameterError, match="mark"):
        question_from_marks(doc, "Q?", [], "c")

    qset = add_questions(None, doc, "What is second?", [(12, 30), (12, 18)])
    (q,) = qset.questions
    assert q.corpus_id == "my_notes" and q.references == (Reference("Second <b>line</b>", 12, 30),)
    other = Document.from_text("Another text.", source="my notes.txt")
    assert [corpus_id_in(None, other), corpus_id_in(qset, doc), corpus_id_in(qset, other)] == [
        "my_notes", "my_notes", f"my_notes-{other.id[:8]}",
    ]
    qset = add_questions(qset, other, "Which text?", [(0, 7)])
    assert [q.corpus_id for q in qset.questions] == ["my_notes", f"my_notes-{other.id[:8]}"]
    assert qset.method == "hand-written"  # marked by hand
    assert add_questions(qset.with_method("model-free"), other, "Which?", [(0, 7)]).method == "model-free + hand-written"
    assert [q.question for q in questions_over(qset, other)] == ["Which text?"]
    assert questions_over(None, other) == []
    with pytest.raises(ParameterError, match="mark"):
        add_questions(qset, doc, "No marks?", [])
    assert isinstance(qset, QuestionSet) and len(qset) == 2
