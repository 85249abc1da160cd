"""Saved sessions: the JSON round trip, its validation, the URL form, the document check and the sessions folder."""

from __future__ import annotations

import json

import pytest

from backend.chunkers import make_chunker
from backend.errors import InputError, ParameterError
from backend.report.session import (
    FORMAT_VERSION,
    DocRef,
    Session,
    configs_from_query,
    configs_to_query,
    load_session,
    parse_session,
    question_set_from_json,
    question_set_to_json,
    resolve_document,
    save_session,
    session_path,
    session_to_json,
)
from backend.retrieval.questions import load_sample_question_set
from backend.samples import load_sample
from backend.text.document import Document


def _config(name, **params):
    return make_chunker(name, params).config


CONFIGS = (
    ("A", _config("recursive", chunk_size=120, chunk_overlap=10)),
    ("C", _config("ppl", threshold=0.37, rule="paper")),
    ("B", _config("fixed_token", chunk_size=250, chunk_overlap=125)),
)


@pytest.fixture(scope="module")
def doc() -> Document:
    return load_sample("narrative")


def _session(doc: Document, **kw) -> Session:
    settings = {"quality": {"K": 0.8, "delta": 2}, "ppl": {"theta": 0.25, "tokenizer": "chars"}}
    return Session.make(DocRef.of(doc, "narrative"), CONFIGS, kw.get("models", {"lm": None}), kw.get("settings", settings))


def test_json_round_trip_keeps_letters_parameters_and_settings(doc: Document, tmp_path) -> None:
    session = _session(doc)
    assert parse_session(session_to_json(session)) == session
    path = save_session(session, tmp_path / "a" / "s.json")
    assert load_session(path) == session
    assert session.version == FORMAT_VERSION and session.doc.sha == doc.id


def test_no_api_key_is_ever_written(doc: Document) -> None:
    models = {"lm": {"kind": "remote", "name": "m", "api_key": "sk-LEAK1"}, "chat": {"kind": "remote", "OPENAI_API_KEY": "sk-LEAK2"}}
    settings = {"benchmark": {"gen_key": "sk-LEAK3", "retrieve": 5}, "ppl": {"tokenizer": "cl100k"}, "x": [{"token": "sk-LEAK4"}]}
    text = session_to_json(_session(doc, models=models, settings=settings))
    assert "sk-LEAK" not in text
    back = parse_session(text)
    assert back.settings["benchmark"] == {"retrieve": 5} and back.settings["ppl"] == {"tokenizer": "cl100k"}


def _edited(doc: Document, edit) -> str:
    raw = json.loads(session_to_json(_session(doc)))
    edit(raw)
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda r: r.update(version=FORMAT_VERSION + 1), "saved by a newer Chunk Lab (session format 2"),
        (lambda r: r.update(format="something"), "not a Chunk Lab session file"),
        (lambda r: r["configs"][0].update(chunker="nope"), "configuration 1 (A): unknown chunker 'nope'"),
        (lambda r: r["configs"][0]["params"].update(chunk_overlap=500), "chunk_overlap (500) must be smaller"),
        (lambda r: r["configs"][1]["params"].update(rule="sideways"), "rule must be one of reference, paper"),
        (lambda r: r["configs"][1].update(tag="A"), "letter 'A' is not valid or is used twice"),
        (lambda r: r["document"].update(sha="../../x"), "hash '../../x' is not valid"),
        (lambda r: r.pop("configs"), "'configs' is missing"),
        (lambda r: r.update(state=[1]), "damaged session file ('models', 'settings' and 'state' must be objects)"),
    ],
)
def test_a_bad_session_is_one_line_naming_the_problem(doc: Document, edit, expected: str) -> None:
    with pytest.raises(InputError) as e:
        parse_session(_edited(doc, edit), source="s.json")
    assert expected in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("s.json")


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe\x00", b"[]", b""])
def test_damaged_bytes_are_one_line(data: bytes) -> None:
    with pytest.raises(InputError, match="s.json: (damaged|not a Chunk Lab)") as e:
        parse_session(data, source="s.json")
    assert "\n" not in str(e.value)


def test_configs_round_trip_through_the_query_string() -> None:
    tokenized = ("D", make_chunker("sentence", {"chunk_size": 90}, "chars").config)
    configs = [*CONFIGS, tokenized]
    value = configs_to_query(configs)
    assert value == (
        "recursive:chunk_overlap=10,chunk_size=120;C.ppl:rule=paper,threshold=0.37;"
        "B.fixed_token:chunk_overlap=125;sentence:chunk_size=90,tokenizer=chars"
    )
    assert configs_from_query(value) == configs
    assert configs_from_query("recursive;fixed_token:chunk_size=250,chunk_overlap=125") == [
        ("A", _config("recursive")), ("B", _config("fixed_token", chunk_overlap=125)),
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "no configuration"),
        ("nope:chunk_size=1", "unknown chunker 'nope'"),
        ("recursive:chunk_size", "must look like key=value"),
        ("recursive:chunk_size=ten", "chunk_size must be int"),
        ("A.recursive;A.fixed_token", "repeated letter 'A'"),
    ],
)
def test_a_bad_link_is_one_parameter_error(value: str, expected: str) -> None:
    with pytest.raises(ParameterError, match=expected) as e:
        configs_from_query(value)
    assert "\n" not in str(e.value)


def test_resolve_document_checks_the_hash(doc: Document) -> None:
    assert resolve_document(DocRef("narrative", doc.source, doc.id)).id == doc.id
    upload = Document.from_text("An uploaded note.\n\nTwo paragraphs.", source="note.txt")
    ref = DocRef(None, "note.txt", upload.id)
    assert resolve_document(ref, upload) is upload
    with pytest.raises(InputError, match=r"^this file is not the session's document \(hash "):
        resolve_document(ref, doc)
    with pytest.raises(InputError, match="document is needed: note.txt"):
        resolve_document(ref, None)
    with pytest.raises(InputError, match="has changed since the session was saved"):
        resolve_document(DocRef("narrative", doc.source, "0" * 16))


@pytest.mark.parametrize("name", ["../x", "..", "/etc/passwd", "a/b", "a\\b", "", ".hidden", "x..json"])
def test_session_names_cannot_leave_the_sessions_folder(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    with pytest.raises(ParameterError, match="session"):
        session_path(name)


def test_a_link_out_of_the_sessions_folder_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    assert session_path("demo") == (tmp_path / "data" / "sessions" / "demo.json").resolve()
    (tmp_path / "data" / "sessions").mkdir(parents=True)
    (tmp_path / "outside.json").write_text("{}")
    (tmp_path / "data" / "sessions" / "evil.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(ParameterError, match="leads outside the sessions folder"):
        session_path("evil")


def test_a_small_question_set_is_embedded_and_checked() -> None:
    qset = load_sample_question_set("narrative")
    ref = question_set_to_json(qset)
    assert ref["count"] == len(qset) and question_set_from_json(ref) == qset
    assert "csv" not in question_set_to_json(qset, limit=10) and question_set_from_json(question_set_to_json(qset, limit=10)) is None
    with pytest.raises(InputError, match="does not match its hash"):
        question_set_from_json({**ref, "sha": "0" * 16})


def test_the_pages_state_is_written_only_when_there_is_some_and_read_back(doc: Document) -> None:
    assert "state" not in json.loads(session_to_json(_session(doc)))  # a file as an older Chunk Lab writes it
    state = {"retrieval": {"query": "When?", "marks": [[0, 4]]}, "benchmark": {"tags": ["A"]}}
    session = Session.make(DocRef.of(doc), [], {}, {}, state)
    assert parse_session(session_to_json(session)).state == state


def test_an_edited_copy_round_trips_through_a_session_and_a_link(doc: Document, tmp_path) -> None:
    from backend.chunkers import run_chunker

    base = CONFIGS[0][1]
    cut = run_chunker(doc, base).chunks[3].start
    edited = make_chunker(
        "manual", {"base": base.spec, "edits": f"-{cut},+{cut + 40}", "snap": "word", "doc": doc.id}
    ).config
    configs = (*CONFIGS, ("D", edited))
    session = Session.make(DocRef.of(doc, "narrative"), configs, {"lm": None}, {})
    opened = load_session(save_session(session, tmp_path / "edited.json"))
    assert opened == session and opened.configs[-1] == ("D", edited)
    assert [(c.start, c.end) for c in run_chunker(doc, opened.configs[-1][1]).chunks] == [
        (c.start, c.end) for c in run_chunker(doc, edited).chunks
    ]
    assert configs_from_query(configs_to_query(configs)) == list(configs)
