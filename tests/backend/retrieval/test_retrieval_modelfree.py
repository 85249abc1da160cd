"""Model-free questions: exact excerpts on the PDF sample and on an uploaded-like text, determinism, the template."""

from __future__ import annotations

import math

import pytest

from backend.errors import ParameterError
from backend.loaders import load_document
from backend.retrieval.modelfree import context_terms, keyword_question, model_free_questions, passage_terms
from backend.retrieval.questions import parse_questions_csv, questions_to_csv
from backend.samples import load_sample
from backend.text.document import Document

TEXT = (
    "Granite lighthouses line the northern coast of the island. "
    "The Skerry light was built in 1844 by the engineer Alan Stevenson. "
    "Its tower rises 48 metres above the reef and is the tallest in Scotland.\n\n"
    "Keepers rowed supplies out from the harbour at Hynish every fortnight. "
    "Storms often kept the relief boat in port for weeks at a time.\n\n"
    "Granite lighthouses line the northern coast of the island."
)


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))  # the measured rate goes here


def _exact(doc: Document, gen) -> None:
    assert gen.questions
    for q in gen.questions:
        (ref,) = q.references
        assert doc.text[ref.start : ref.end] == ref.content
        assert ref.content.strip() == ref.content  # a passage starts and ends at a sentence


def test_a_small_text_gives_these_questions_and_drops_the_repeated_passage() -> None:
    doc = Document.from_text(TEXT, source="lights.txt")
    gen = model_free_questions(doc, n=6)
    # Each names the passage's three terms and the most distinctive term around it that it lacks.
    assert [(c.question.question, c.question.spans, why) for c, why in zip(gen.candidates, gen.drop_reasons)] == [
        ("What does the text say about Skerry, engineer and Stevenson in connection with lighthouses?", [(59, 125)],
         None),
        ("What does the text say about metres, tallest and Scotland in connection with lighthouses?", [(126, 198)],
         None),
        ("What does the text say about Keepers, supplies and fortnight in connection with lighthouses?", [(200, 270)],
         None),
        ("What does the text say about Storms, relief and weeks in connection with lighthouses?", [(271, 333)], None),
        ("What does the text say about Granite, lighthouses and northern in connection with Stevenson?", [(335, 393)],
         None),
        ("What does the text say about Granite, lighthouses and northern in connection with Stevenson?", [(0, 58)],
         "near-duplicate excerpt of candidate 5 (terms overlap 1.00)"),
    ]
    assert gen.kept == (True, True, True, True, True, False)
    assert gen.method == "model-free" and gen.weak and gen.embedder == "none" and gen.corpus_id == "lights"
    assert gen.question_set().method == "model-free"
    assert "no embedder" in gen.filter_note and "ρ" in gen.notice and "weaker" not in gen.notice
    assert gen.how.startswith("5 kept of 6 attempted · model-free questions from a passage and its neighbourhood")
    # The earlier style: the passage's own terms only, the same passages, stated as such.
    keywords = model_free_questions(doc, n=6, style="keywords")
    assert [c.question.question for c in keywords.candidates][:2] == [
        "What does the text say about Skerry, engineer and Stevenson?",
        "What does the text say about metres, tallest and Scotland?",
    ]
    assert [c.question.spans for c in keywords.candidates] == [c.question.spans for c in gen.candidates]
    assert keywords.method == keywords.question_set().method == "model-free keywords"
    assert all(math.isnan(s) for s in gen.excerpt_similarities)
    assert gen.refilter(0.0, 1.0) is gen  # no embedder ran: nothing to refilter on
    _exact(doc, gen)


def test_pdf_sample_excerpts_are_exact_and_the_set_round_trips() -> None:
    doc = load_sample("technical-pdf")
    gen = model_free_questions(doc, n=12)
    assert len(gen.questions) == 12
    _exact(doc, gen)
    starts = [q.references[0].start for q in gen.questions]
    assert max(starts) > len(doc.text) * 0.75 and min(starts) < len(doc.text) * 0.25  # spread over the document
    qs = gen.question_set()
    assert parse_questions_csv(questions_to_csv(qs), qs.corpora) == qs


def test_an_uploaded_text_with_odd_whitespace_and_markup_keeps_exact_offsets(tmp_path) -> None:
    raw = (
        "Release  notes\t for <b>v2.1.3</b>:\r\n\r\nThe   coordinator streams replicas in parallel now.\u00a0"
        "Buckets keep their own quotas and retention rules.\r\n\r\n"
        "Überprüfung: the checksum of every part is verified twice before the upload completes.\n" * 3
    )
    path = tmp_path / "notes.txt"
    path.write_bytes(raw.encode("utf-8"))
    doc = load_document(path)
    gen = model_free_questions(doc, n=5)
    _exact(doc, gen)
    assert len(gen.questions) == 3  # the text repeats three times: each passage is asked about once
    assert any("near-duplicate excerpt" in (why or "") for why in gen.drop_reasons)


def test_deterministic_with_a_seed() -> None:
    doc = load_sample("narrative")
    one, two = model_free_questions(doc, n=8, seed=3), model_free_questions(doc, n=8, seed=3)
    assert one.questions == two.questions
    assert model_free_questions(doc, n=8, seed=4).questions != one.questions


def test_terms_and_the_template() -> None:
    assert passage_terms("The Kestrel v2.1.3 release ships in 2024, and it's faster.") == [
        "kestrel", "v2.1.3", "release", "ships", "2024", "faster",
    ]
    assert passage_terms("雨季里的茶馆") == ["雨季", "季里", "里的", "的茶", "茶馆"]
    assert keyword_question(["A", "B", "C"]) == "What does the text say about A, B and C?"
    assert keyword_question(["A"]) == "What does the text say about A?"
    assert keyword_question(["A", "B"], ["C"]) == "What does the text say about A and B in connection with C?"
    text = "Kestrel stores objects. Replicas live on three nodes. Kestrel repairs replicas nightly."
    start = text.index("Replicas")
    end = text.index("nodes.") + len("nodes.")
    idf = {"kestrel": 2.0, "objects": 1.0, "stores": 1.0, "repairs": 1.0, "nightly": 1.0}
    # Around the passage, "kestrel" appears twice and weighs most; the passage's own "replicas" is never picked.
    assert context_terms(text, start, end, idf) == [("kestrel", "Kestrel")]


def test_bad_counts_and_a_text_without_passages() -> None:
    doc = Document.from_text(TEXT, source="lights.txt")
    with pytest.raises(ParameterError, match="n"):
        model_free_questions(doc, n=0)
    with pytest.raises(ParameterError, match="max_attempts"):
        model_free_questions(doc, n=2, max_attempts=0)
    with pytest.raises(ParameterError, match="style must be one of context, keywords"):
        model_free_questions(doc, n=2, style="cloze")
    empty = model_free_questions(Document.from_text("Too short.", source="x.txt"), n=3)
    assert empty.questions == () and empty.attempts == 1 and "no passage" in empty.rejected[0].reason
