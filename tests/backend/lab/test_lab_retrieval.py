"""The Retrieval page's work in the backend: searchable inputs, the search and CP plans, and what the answers show.

The search runs for real (embedded Chroma in a temporary data folder, the bundled MiniLM) on a
short document, so the view is the one the page renders.
"""

from __future__ import annotations

import pytest

from backend.chunkers import run_chunker
from backend.chunking import Chunk, ChunkerConfig, Chunking, ConfigEntry
from backend.errors import ParameterError
from backend.lab.compare import Column
from backend.lab.models import SessionModels
from backend.lab.retrieval import (
    AnswerView,
    Marks,
    SearchInputs,
    SearchView,
    add_marks,
    answer_marks,
    answer_view,
    document_view,
    indexing_resume_note,
    marks_caption,
    plan_cp,
    plan_search,
    question_rows,
    question_set_key,
    scores_view,
    search_inputs,
    search_view,
    sentence_picker,
    store_caption,
    units_caption,
)
from backend.progress import Progress
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.retrieval.retriever.chunks import ChunkAnswer
from backend.retrieval.store import Hit
from backend.text.document import Document
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "retrieval"
QUERY = "How was the granite brought to the headland?"
RECURSIVE = ChunkerConfig.make("recursive", {"chunk_size": 40})
MOG = ChunkerConfig.make("mog", {"chunk_size": 40, "levels": 3, "router": "uniform"})
SENTENCES = "One here. Two there! Three is last?\n\nFour ends."  # sentences at 0-9, 10-20, 21-35, 37-47


@pytest.fixture(scope="module", autouse=True)
def data_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("CHUNKLAB_DATA_DIR", str(tmp_path_factory.mktemp("lab-retrieval-data")))
    for name in ("CHROMA_HOST", "CHROMA_PORT", "CHUNKLAB_EMBEDDER"):
        mp.delenv(name, raising=False)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def doc() -> Document:
    text = (DATA / "corpora" / "lighthouses.md").read_text(encoding="utf-8")[:2500]
    return Document.from_text(text, source="lights-short.md")


@pytest.fixture(scope="module")
def chunkings(doc) -> dict[str, Chunking]:
    return {"A": run_chunker(doc, RECURSIVE), "B": run_chunker(doc, MOG)}


@pytest.fixture(scope="module")
def result(doc, chunkings):
    plan = plan_search(doc, chunkings, None, QUERY, 2)
    return plan.run(Progress())


def _chunking(spans: list[tuple[int, int]], text: str) -> Chunking:
    chunks = tuple(Chunk(i, s, e, text[s:e], e - s) for i, (s, e) in enumerate(spans))
    return Chunking(ChunkerConfig("fixed_token", (("chunk_size", len(spans)),)), chunks, 0.0, "d", len(text))


def test_search_inputs_keep_the_chunked_and_say_why_the_others_are_not() -> None:
    chunking = _chunking([(0, 5)], "x" * 5)
    columns = [
        Column(ConfigEntry(0, "A", chunking.config), chunking),
        Column(ConfigEntry(1, "B", ChunkerConfig.make("ppl")), pending=True),
        Column(ConfigEntry(2, "C", ChunkerConfig.make("semantic")), error="the embedder failed"),
    ]
    inputs = search_inputs(columns)
    assert dict(inputs.chunkings) == {"A": chunking}
    assert inputs.notes == ("B needs a model run: open it on the Compare page first", "C: the embedder failed")


def test_search_plans_have_equal_signatures_for_equal_inputs_and_differ_otherwise(doc, chunkings) -> None:
    plan = plan_search(doc, chunkings, None, f"  {QUERY} ", 2, marks=[(5, 9)])
    assert plan.signature == plan_search(doc, chunkings, None, QUERY, 2, marks=[(5, 9)]).signature
    assert dict(plan.meta) == {"doc_id": doc.id, "query": QUERY, "k": 2, "tags": ["A", "B"]}
    others = [
        plan_search(doc, chunkings, None, "Another query?", 2, marks=[(5, 9)]),
        plan_search(doc, chunkings, None, QUERY, 3, marks=[(5, 9)]),
        plan_search(doc, chunkings, None, QUERY, 2),
        plan_search(doc, {"A": chunkings["A"]}, None, QUERY, 2, marks=[(5, 9)]),
        plan_search(doc, chunkings, "/some/embedder", QUERY, 2, marks=[(5, 9)]),
    ]
    assert len({plan.signature, *(p.signature for p in others)}) == 6
    qset = QuestionSet((Question("q", (Reference(doc.text[0:9], 0, 9),), "lights"),), {"lights": doc.text})
    assert question_set_key(qset) == question_set_key(QuestionSet(qset.questions, dict(qset.corpora)))
    trained = plan_search(doc, chunkings, None, QUERY, 2, marks=[(5, 9)], train_on=qset)
    assert trained.signature != plan.signature
    with pytest.raises(ParameterError, match="Type a query first"):
        plan_search(doc, chunkings, None, "   ", 2)
    with pytest.raises(ParameterError, match="at least one configuration"):
        plan_search(doc, {}, None, QUERY, 2)


def test_the_search_view_has_a_table_per_tag_and_a_panel_per_retriever(doc, result) -> None:
    assert (result.doc_id, result.query, result.k, result.tags) == (doc.id, QUERY, 2, ("A", "B"))
    view = search_view(doc, result, ["B", "A"])
    assert view.tags == ("A", "B") and list(view.panels) == ["B"]
    assert 'class="rt-hits"' in view.tables["A"] and 'class="rt-hits rt-picks"' in view.tables["B"]
    assert view.caption == (
        "Query: How was the granite brought to the headland? · top 2 · distance is cosine (0 = same direction)"
        " · a retriever's score is its own (see its panel below)."
    )
    assert search_view(doc, result, ["A"]).tags == ("A",)
    assert search_view(doc, result, ["A"]).caption.endswith("(0 = same direction).")
    assert search_view(doc, None, ["A"]) == SearchView()


def test_scores_and_the_document_view_follow_the_marks(doc, result) -> None:
    view = search_view(doc, result, ["A", "B"])
    marks = [(321, 400)]
    scores = scores_view(view, marks)
    assert scores.columns == ("config", "recall", "precision", "precision_omega", "iou", "omega_on")
    assert [(r["config"], r["omega_on"]) for r in scores.rows] == [("A", "chunks"), ("B", "units")]
    assert scores.caption.endswith("Precision-Ω of a retriever is computed on its finest units (its levels have no "
                                   "single chunking).")
    with_cp = scores_view(view, marks, {"A": 1.25})
    assert with_cp.columns[-2:] == ("cp", "omega_on") and with_cp.rows[0]["cp"] == 1.25
    shown = document_view(doc, view, {"A": "#2563eb", "B": "#d97706"}, {"A": "recursive", "B": "mog"}, marks)
    assert ">A1</span>" in shown.html and ">B1</span>" in shown.html and "rt-ans" in shown.html
    assert "<b>A</b> recursive" in shown.legend
    with pytest.raises(ParameterError):
        scores_view(view, [])


def test_scores_of_a_chunkings_answer_are_exact() -> None:
    text = "x" * 40
    chunking = _chunking([(0, 10), (10, 20), (20, 30), (30, 40)], text)
    hits = (Hit(1, 0.1, 0, 10, 0, 10), Hit(2, 0.2, 20, 30, 2, 10))
    view = SearchView(tags=("A",), answers={"A": ChunkAnswer(chunking.config, chunking, hits)})
    assert scores_view(view, [(15, 25)]).rows == (
        {"config": "A", "recall": 50.0, "precision": 25.0, "precision_omega": 50.0, "iou": 20.0, "omega_on": "chunks"},
    )


def test_the_sentence_picker_offers_the_sentences_near_what_was_retrieved() -> None:
    doc = Document.from_text(SENTENCES, source="s.md")
    picker = sentence_picker(doc, SearchView(), [2, 9])
    assert picker.options == (0, 1, 2, 3) and picker.picked == (2,)
    assert picker.labels == {0: "0: One here.", 1: "1: Two there!", 2: "2: Three is last?", 3: "3: Four ends."}


def test_marks_caption_and_question_rows_are_exact() -> None:
    assert marks_caption([(0, 12), (1200, 1380)]) == "Marked: 2 range(s), 192 characters: 0–12, 1,200–1,380"
    assert marks_caption([(i, i + 1) for i in range(0, 20, 2)]).endswith("12–13, 14–15 …")
    corpus = "First line.\nSecond <b>line</b>.\n"
    qset = QuestionSet(
        (Question("What is second?", (Reference(corpus[12:30], 12, 30), Reference(corpus[0:5], 0, 5)), "notes"),),
        {"notes": corpus},
    )
    assert question_rows(qset) == [
        {"question": "What is second?", "corpus_id": "notes", "excerpts": 2, "characters": 23,
         "first_excerpt": "Second <b>line</b>"}
    ]


def test_the_cp_plan_names_the_work_and_refuses_an_unusable_model(doc, result) -> None:
    view = search_view(doc, result, ["A", "B"])
    lm = SessionModels("SmolLM2", "fp-1")
    plan = plan_cp(doc, view, " On a railway. ", lm)
    assert plan.signature == ("cp", doc.id, QUERY, 2, ("A", "B"), "On a railway.", "fp-1")
    assert plan.signature == plan_cp(doc, view, "On a railway.", lm).signature
    assert plan.signature != plan_cp(doc, view, "By ship.", lm).signature
    assert plan.models is lm and plan.needs_lm
    with pytest.raises(ParameterError, match="no model here"):
        plan_cp(doc, view, "On a railway.", SessionModels("x", None, error="no model here"))


def test_units_caption_and_the_resume_note(chunkings) -> None:
    assert units_caption(RECURSIVE) == ""
    assert units_caption(MOG).startswith("A retriever, not a chunker: the chunks shown are its finest units")
    assert indexing_resume_note(chunkings, None) is None  # nothing was interrupted


def test_add_marks_joins_pasted_excerpts_to_the_marks_and_names_a_missing_one() -> None:
    text = "The lighthouse stood on the cliff. The keeper slept. Ships passed at night."
    marks = add_marks(text, "The keeper slept.", [(0, 10)])
    assert marks == [(0, 10), (35, 52)]
    assert add_marks(text, "stood on the cliff.\n---\nThe   keeper slept.", []) == [(15, 34), (35, 52)]
    with pytest.raises(ParameterError, match="is not in the document"):
        add_marks(text, "Not in the text at all.", marks)


def test_the_store_caption_names_the_embedded_store(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("CHROMA_HOST", raising=False)
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    assert store_caption().startswith(f"Chroma: embedded store in {tmp_path}")


def test_inputs_carry_each_chosen_tag_s_colour_label_and_header_and_the_marks_their_caption() -> None:
    # Moved from pages/retrieval.py: the colours, labels and the top-k table's header.
    chunking = _chunking([(0, 5)], "x" * 5)
    entry = ConfigEntry(0, "A", chunking.config)
    inputs = search_inputs([Column(entry, chunking), Column(ConfigEntry(3, "D", ChunkerConfig.make("ppl")), pending=True)])
    assert (dict(inputs.colors), dict(inputs.labels), dict(inputs.uids)) == (
        {"A": "#2563eb", "D": "#db2777"},  # config_color of uids 0 and 3
        {"A": "fixed_token(chunk_size=1) · cl100k", "D": "ppl() · cl100k"},
        {"A": 0, "D": 3},
    )
    assert inputs.header("A") == (
        '<span class="cl-tag" style="background:#2563eb">A</span><b>fixed_token(chunk_size=1) · cl100k</b>'
    )
    doc = Document.from_text(SENTENCES, source="s.md")
    assert answer_marks(doc, [(3, 6)], [1, 9]) == Marks(((3, 6), (10, 20)), "Marked: 2 range(s), 13 characters: 3–6, 10–20")
    assert answer_marks(doc, [], []) == Marks((), "")


def test_the_answer_view_shows_scores_with_a_search_and_marks_and_the_document_with_either(doc, result) -> None:
    view = search_view(doc, result, ["A"])
    inputs = SearchInputs({}, (), {"A": "#123456"}, {"A": "recursive"}, {"A": 0})
    marked = answer_view(doc, view, inputs, [(0, 40)])
    assert marked.scores == scores_view(view, [(0, 40)])
    assert marked.document == document_view(doc, view, {"A": "#123456"}, {"A": "recursive"}, [(0, 40)])
    assert answer_view(doc, view, inputs, []).scores is None
    assert answer_view(doc, SearchView(), inputs, []) == AnswerView(None, None)
