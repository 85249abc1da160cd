"""Which questions of a set are on a document: ``QuestionSet.document_ids``, ``corpora_of`` and ``on_document``."""

from __future__ import annotations

import pickle

from backend.retrieval.questions import (
    Question,
    QuestionSet,
    Reference,
    corpus_document_id,
    load_sample_question_set,
)
from backend.samples import list_question_sets, load_sample
from backend.text.document import Document


def test_every_bundled_set_is_on_its_sample_opened_as_the_document():
    names = [entry.name for entry in list_question_sets()]
    assert names  # the narrative and technical samples ship one
    for name in names:
        qset, doc = load_sample_question_set(name), load_sample(name)
        # The corpus is the file read as the reference reads it (trailing newline kept); the document is normalized.
        assert [qset.corpora[c] == doc.text for c in qset.corpus_ids] == [False]
        assert list(qset.document_ids.values()) == [doc.id]
        mine = qset.on_document(doc)
        assert mine is not None and len(mine) == len(qset) and mine == qset
    narrative, technical = load_sample_question_set("narrative"), load_sample("technical")
    assert narrative.on_document(technical) is None and narrative.corpora_of(technical) == []


def test_the_same_text_under_another_name_is_the_same_document():
    doc = load_sample("narrative")
    upload = Document.from_text(doc.text, source="my-upload.txt")
    assert load_sample_question_set("narrative").corpora_of(upload) == ["narrative_clockmaker"]


def test_a_set_made_on_a_document_is_on_it_and_a_mixed_set_gives_only_its_questions():
    doc = Document.from_text("The lamp was trimmed at dusk. The horn sounded twice in fog.", source="log.pdf")
    mine = QuestionSet.from_document(doc, [Question("When?", (Reference("at dusk", 21, 28),), "x")])
    assert mine.document_ids == {"log": doc.id} and mine.on_document(doc) == mine
    other = "A clockmaker wound the clocks."
    mixed = mine.with_questions([Question("Who?", (Reference("A clockmaker", 0, 12),), "clocks")], {"clocks": other})
    assert mixed.document_ids == {"log": doc.id, "clocks": corpus_document_id(other)}
    on_doc = mixed.on_document(doc)
    assert [q.question for q in on_doc.questions] == ["When?"] and list(on_doc.corpora) == ["log"]
    assert QuestionSet.from_document(doc).on_document(doc) is None  # no question on it yet


def test_corpus_document_id_is_the_id_of_the_loaded_text():
    assert corpus_document_id("Line one.  \r\nLine two.\n") == Document.from_text("Line one.\nLine two.").id


def test_a_set_pickles_without_its_lock_and_still_finds_its_document():
    # A corpus run on Ray sends its spec, question set included, to the workers.
    qset, doc = load_sample_question_set("narrative"), load_sample("narrative")
    assert qset.on_document(doc) is not None  # its caches filled
    again = pickle.loads(pickle.dumps(qset))
    assert again == qset and again.suffixes == qset.suffixes
    assert again.on_document(doc) == qset and again.document("narrative_clockmaker").text == doc.text
