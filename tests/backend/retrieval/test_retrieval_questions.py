"""Question sets in the Chroma format: import with validation, export, round trips."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from backend.errors import InputError, ParameterError
from backend.loaders import load_bytes
from backend.retrieval.questions import (
    Question,
    QuestionSet,
    Reference,
    corpora_from_files,
    corpus_file_name,
    corpus_id_for,
    load_question_set,
    load_sample_question_set,
    merge_question_sets,
    parse_questions_csv,
    question_set_from_files,
    question_set_zip,
    questions_to_csv,
    read_corpus_text,
    save_question_set,
)
from backend.text.document import Document
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "retrieval"
CORPUS = "Alpha beta gamma.\nDelta epsilon zeta.\n"


def _csv(rows) -> str:
    return questions_to_csv([Question(q, tuple(refs), cid) for q, refs, cid in rows])


def test_loads_the_test_set():
    qs = load_question_set(DATA / "questions.csv", DATA / "corpora")
    assert len(qs) == 10
    assert qs.corpus_ids == ["lighthouses", "sourdough"]
    assert dict(qs.suffixes) == {"lighthouses": ".md", "sourdough": ".txt"}
    q = qs.questions[4]
    assert q.question.startswith("What light characteristic") and len(q.references) == 2
    text = qs.corpora["lighthouses"]
    for ref in q.references:
        assert text[ref.start : ref.end] == ref.content
    doc = qs.document("sourdough")
    # Read as its file loads (issue 25: eval and index share one text): the final newline goes, offsets stay.
    assert doc.text == qs.corpora["sourdough"].rstrip() and doc.source == "sourdough.txt"
    assert qs.document("sourdough") is doc


def test_round_trip(tmp_path):
    qs = load_question_set(DATA / "questions.csv", DATA / "corpora")
    written = save_question_set(qs, tmp_path / "out" / "questions.csv")
    assert [p.name for p in written] == ["questions.csv", "lighthouses.md", "sourdough.txt"]
    again = load_question_set(tmp_path / "out" / "questions.csv", tmp_path / "out" / "corpora")
    assert again == qs
    assert load_question_set(tmp_path / "out" / "questions.csv") == qs  # by default the corpora are beside the CSV
    assert (tmp_path / "out" / "corpora" / "sourdough.txt").read_bytes() == (DATA / "corpora" / "sourdough.txt").read_bytes()
    assert questions_to_csv(again) == questions_to_csv(qs)


def test_corpora_are_read_like_the_reference(tmp_path):
    """CRLF files are read with universal newlines: offsets index the \\n text, as open().read() gives it."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "doc.txt").write_bytes(CORPUS.replace("\n", "\r\n").encode())
    start = CORPUS.index("Delta")
    (tmp_path / "q.csv").write_text(
        _csv([("Which letter follows gamma?", [Reference("Delta", start, start + 5)], "doc")]), encoding="utf-8"
    )
    qs = load_question_set(tmp_path / "q.csv", tmp_path / "c")
    assert qs.corpora["doc"] == CORPUS
    assert read_corpus_text(b"a\rb\r\nc") == "a\nb\nc"
    with pytest.raises(InputError, match="not UTF-8"):
        read_corpus_text(b"\xff\xfe\x00", "bad.md")


def test_parse_accepts_extra_columns_string_offsets_and_a_bom():
    refs = json.dumps([{"content": "beta", "start_index": "6", "end_index": 10.0}])
    data = ("\ufeffidx,question,references,corpus_id\n" f'0,Which?,"{refs.replace(chr(34), chr(34) * 2)}",doc\n').encode()
    qs = parse_questions_csv(data, {"doc": CORPUS})
    assert qs.questions[0].references == (Reference("beta", 6, 10),)


@pytest.mark.parametrize(
    ("csv_text", "needle"),
    [
        ("question,corpus_id\nq,doc\n", "missing column 'references'"),
        ("question,references,corpus_id\nq,not json,doc\n", "row 1: references is not JSON"),
        ('question,references,corpus_id\nq,"{""a"": 1}",doc\n', "row 1: references must be a JSON list"),
        ('question,references,corpus_id\nq,"[{""content"": ""beta""}]",doc\n', "row 1: reference 1 needs content"),
        ("question,references,corpus_id\nq,[],doc\n", "row 1: no references"),
        ("question,references,corpus_id\n", "holds no questions"),
    ],
)
def test_malformed_rows_are_named(csv_text, needle):
    with pytest.raises(InputError) as info:
        parse_questions_csv(csv_text, {"doc": CORPUS}, name="set.csv")
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_offsets_must_match_the_corpus():
    good = Reference("beta", 6, 10)
    rows = [("q1", [good], "doc"), ("q2", [good], "doc"), ("q3", [good, Reference("beta", 7, 11)], "doc")]
    with pytest.raises(InputError) as info:
        parse_questions_csv(_csv(rows), {"doc": CORPUS}, name="set.csv")
    msg = str(info.value)
    assert msg.startswith("set.csv row 3: reference 2 content does not match corpus 'doc' at [7, 11)")
    assert "'beta'" in msg and "'eta '" in msg
    with pytest.raises(InputError, match=r"row 1: reference 1 offsets \[30, 99\) are outside corpus 'doc'"):
        parse_questions_csv(_csv([("q", [Reference("x" * 69, 30, 99)], "doc")]), {"doc": CORPUS})
    with pytest.raises(InputError, match="row 1: reference 1 start_index must be an integer"):
        parse_questions_csv(
            'question,references,corpus_id\nq,"[{""content"": ""b"", ""start_index"": ""x"", ""end_index"": 1}]",doc\n',
            {"doc": CORPUS},
        )


def test_missing_corpus_and_missing_files(tmp_path):
    with pytest.raises(InputError, match="row 1: no corpus file for corpus_id 'other'"):
        parse_questions_csv(_csv([("q", [Reference("beta", 6, 10)], "other")]), {"doc": CORPUS})
    with pytest.raises(InputError, match="no such file"):
        load_question_set(tmp_path / "nope.csv", tmp_path)
    (tmp_path / "q.csv").write_text("question,references,corpus_id\n", encoding="utf-8")
    with pytest.raises(InputError, match="no such folder"):
        load_question_set(tmp_path / "q.csv", tmp_path / "corpora")


def test_from_document_with_questions_and_corpus_ids():
    doc = Document.from_text(CORPUS, source="My Notes (v2).md")
    assert corpus_id_for(doc) == "My_Notes_v2"
    q = Question("Which word comes after alpha?", (Reference("beta", 6, 10),), "anything")
    qs = QuestionSet.from_document(doc, [q])
    assert qs.questions[0].corpus_id == "My_Notes_v2" and qs.corpora == {"My_Notes_v2": CORPUS}
    more = qs.with_questions([Question("Last word?", (Reference("zeta", 32, 36),), "My_Notes_v2")])
    assert len(more) == 2 and len(qs) == 1
    with pytest.raises(InputError, match="question 2: reference 1 content does not match"):
        qs.with_questions([Question("Bad?", (Reference("zeta", 0, 4),), "My_Notes_v2")])
    with pytest.raises(ParameterError, match="different text"):
        qs.with_questions([], {"My_Notes_v2": "other text"})


def test_save_refuses_unsafe_corpus_ids(tmp_path):
    qs = QuestionSet((Question("q?", (Reference("beta", 6, 10),), "../evil"),), {"../evil": CORPUS})
    with pytest.raises(ParameterError, match="not a file name"):
        save_question_set(qs, tmp_path / "q.csv")
    assert not (tmp_path / "q.csv").exists()


def test_large_reference_cells_parse():
    text = "word " * 60_000
    ref = Reference(text[:250_000], 0, 250_000)
    qs = parse_questions_csv(_csv([("Long?", [ref], "doc")]), {"doc": text})
    assert qs.questions[0].references[0].end == 250_000


def test_path_like_corpus_ids_are_found_by_file_name(tmp_path):
    """The reference's generator uses corpus paths as ids; they resolve inside the corpora folder only."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "doc.md").write_text(CORPUS, encoding="utf-8")
    rows = [("q?", [Reference("beta", 6, 10)], "corpora/doc.md"), ("r?", [Reference("beta", 6, 10)], "/elsewhere/doc")]
    (tmp_path / "q.csv").write_text(_csv(rows), encoding="utf-8")
    qs = load_question_set(tmp_path / "q.csv", tmp_path / "c")
    assert qs.corpus_ids == ["corpora/doc.md", "/elsewhere/doc"]
    assert set(qs.corpora.values()) == {CORPUS}
    (tmp_path / "q.csv").write_text(_csv([("q?", [Reference("beta", 6, 10)], "../c/missing.md")]), encoding="utf-8")
    with pytest.raises(InputError, match="no corpus file for corpus_id '../c/missing.md'"):
        load_question_set(tmp_path / "q.csv", tmp_path / "c")


def test_uploaded_corpora_need_md_or_txt_and_distinct_ids():
    corpora, suffixes = corpora_from_files([("a.md", b"A\r\ntext"), ("b.txt", b"B")])
    assert corpora == {"a": "A\ntext", "b": "B"} and suffixes == {"a": ".md", "b": ".txt"}
    with pytest.raises(InputError, match="notes.pdf"):
        corpora_from_files([("notes.pdf", b"%PDF")])
    with pytest.raises(InputError, match="two corpus files are named a"):
        corpora_from_files([("a.md", b"x"), ("a.txt", b"y")])


def test_an_upload_reads_like_the_folder():
    """Uploaded files (name, bytes) give the set the same files in a folder give."""
    files = [(p.name, p.read_bytes()) for p in sorted((DATA / "corpora").iterdir())]
    uploaded = question_set_from_files((DATA / "questions.csv").read_bytes(), files, name="questions.csv")
    assert uploaded == load_question_set(DATA / "questions.csv", DATA / "corpora")
    assert dict(uploaded.suffixes) == {"lighthouses": ".md", "sourdough": ".txt"}
    with pytest.raises(InputError, match="up.csv row 1: no corpus file for corpus_id 'lighthouses'"):
        question_set_from_files((DATA / "questions.csv").read_bytes(), [], name="up.csv")


def test_the_zip_is_the_saved_layout_and_reads_back(tmp_path):
    a = QuestionSet((Question("Which?", (Reference("beta", 6, 10),), "a"),), {"a": CORPUS})
    b = QuestionSet((Question("Last?", (Reference("zeta", 32, 36),), "b"),), {"b": CORPUS}, {"b": ".txt"})
    qset = merge_question_sets(merge_question_sets(None, a), b)
    assert [q.question for q in qset.questions] == ["Which?", "Last?"] and dict(qset.suffixes) == {"b": ".txt"}
    assert [corpus_file_name(qset, "a"), corpus_file_name(qset, "b")] == ["a.md", "b.txt"]
    with zipfile.ZipFile(io.BytesIO(question_set_zip(qset))) as z:
        names = sorted(z.namelist())
        files = [(n.split("/")[1], z.read(n)) for n in names if n.startswith("corpora/")]
        csv_bytes = z.read("questions.csv")
    saved = save_question_set(qset, tmp_path / "questions.csv")
    assert names == ["corpora/a.md", "corpora/b.txt", "questions.csv"]
    assert sorted(str(p.relative_to(tmp_path)) for p in saved) == names
    assert question_set_from_files(csv_bytes, files) == qset
    with pytest.raises(ParameterError, match="different text"):
        merge_question_sets(a, QuestionSet((Question("x?", (Reference("A", 0, 1),), "a"),), {"a": "A"}))


# Trailing spaces on two lines: the loaders strip them, so the loaded text is shorter than the file.
ORIGINAL = "# Mills   \n\nThe river turns the wheel.  \nFarmers bring barley.\n\nMerchants trade wool and copper.\n"


def _set_made_on(name: str) -> QuestionSet:
    """A set made the way ``questions generate`` makes one: on the document its file loads as."""
    doc = load_bytes(ORIGINAL.encode(), name)
    start = doc.text.index("Merchants")
    q = Question("Who trades wool?", (Reference(doc.text[start : start + 15], start, start + 15),), "mills")
    return QuestionSet.from_document(doc, [q], "mills")


@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_a_generated_set_reads_with_the_original_file(tmp_path, suffix):
    made = _set_made_on(f"mills{suffix}")
    save_question_set(made, tmp_path / "set" / "questions.csv")
    (tmp_path / "orig").mkdir()
    (tmp_path / "orig" / f"mills{suffix}").write_text(ORIGINAL, encoding="utf-8")
    on_original = load_question_set(tmp_path / "set" / "questions.csv", tmp_path / "orig")
    # The corpus is the text the offsets index: the original file as the loaders read it.
    assert on_original == made == load_question_set(tmp_path / "set" / "questions.csv")
    assert on_original.corpora["mills"] == load_bytes(ORIGINAL.encode(), f"mills{suffix}").text != ORIGINAL
    assert on_original.document("mills").id == load_bytes(ORIGINAL.encode(), f"mills{suffix}").id
    upload = question_set_from_files(questions_to_csv(made), [(f"mills{suffix}", ORIGINAL.encode())])
    assert upload == made


def test_a_set_fits_one_reading_of_its_corpus_and_says_so_when_it_fits_none():
    made = _set_made_on("mills.md")
    (q,) = made.questions
    at = f"[{q.references[0].start}, {q.references[0].end})"
    hint = "; use the corpus the questions were made on (corpora/ beside their CSV)"
    with pytest.raises(InputError) as info:
        parse_questions_csv(questions_to_csv(made), {"mills": ORIGINAL.replace("Merchants", "Marchants")}, name="q.csv")
    # Shown against the reading that holds the excerpt more nearly: here the loaded text.
    assert str(info.value) == (
        f"q.csv row 1: reference 1 content does not match corpus 'mills' as written or as loaded at {at}: "
        f"expected 'Merchants trade', the loaded text has 'Marchants trade'{hint}"
    )
    # One corpus, one reading: a row that fits only the file as written after rows that fit only the loaded text.
    start = ORIGINAL.index("Merchants")
    as_written = Question("Who trades?", (Reference("Merchants", start, start + 9),), "mills")
    with pytest.raises(InputError) as info:
        parse_questions_csv(questions_to_csv([q, as_written]), {"mills": ORIGINAL}, name="q.csv")
    assert str(info.value) == (
        f"q.csv row 2: its references index corpus 'mills' as written, the rows before it as loaded{hint}"
    )


def test_a_set_states_its_method_through_save_load_merge_zip_pickle_and_the_session(tmp_path) -> None:
    import pickle

    from backend.report.session import question_set_from_json, question_set_to_json

    hand = load_sample_question_set("technical")
    assert hand.method == "hand-written"
    saved = tmp_path / "set" / "questions.csv"
    written = save_question_set(hand.with_method("model-free"), saved)
    assert written[1] == tmp_path / "set" / "questions.method" and written[1].read_text() == "model-free\n"
    assert load_question_set(saved).method == "model-free"
    save_question_set(hand.with_method(""), saved)  # over it, a set that does not say: no stale statement left
    assert not written[1].exists() and load_question_set(saved).method == ""
    assert merge_question_sets(hand, hand.with_method("bundled")).method == "hand-written + bundled"
    assert merge_question_sets(hand, hand.with_method("")).method == ""
    with zipfile.ZipFile(io.BytesIO(question_set_zip(hand))) as z:
        assert z.read("questions.method") == b"hand-written\n"
    assert pickle.loads(pickle.dumps(hand)).method == "hand-written"
    assert question_set_from_json(question_set_to_json(hand)).method == "hand-written"
    assert hand.on_document(hand.document("technical_kestrel")).method == "hand-written"
