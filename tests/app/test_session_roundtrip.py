"""Sessions in the app: save → a new session → open gives the same document, letters, spans and numbers;
a refused file changes nothing; ``?configs=…&sample=…`` and ``?session=NAME`` reproduce the comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from backend.chunkers import run_chunker
from backend.samples import load_sample
from components.state import normalized_config
from tests.support.apptest import TIMEOUT, open_page, run

COMPARE = "pages/compare.py"
SECRET = "sk-never-in-a-file-42"
CONFIGS = [
    ConfigEntry(0, "A", normalized_config("recursive", {"chunk_size": 120, "chunk_overlap": 20})),
    ConfigEntry(1, "C", normalized_config("sentence", {"chunk_size": 90})),
]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    return tmp_path


def _tagged(at: AppTest) -> list[tuple[str, object]]:
    return [(e.tag, e.config) for e in at.session_state["configs"]]


def _numbers(at: AppTest):
    """The Compare page's summary table without its timings (they are measured anew)."""
    (stats,) = at.dataframe
    return stats.value.drop(columns=[c for c in stats.value.columns if "time" in c or c.endswith("_s")])


def _open_upload(at: AppTest, name: str, data: bytes) -> AppTest:
    gen = at.session_state["ses_gen"] if "ses_gen" in at.session_state else 0
    at.file_uploader(key=f"ses_open_{gen}").set_value((name, data, "application/json"))
    return run(at)


def _saved(data_dir: Path) -> AppTest:
    """The comparison to save: a technical sample, two non-default configurations (letters A, C), K = 0.9."""
    doc = load_sample("technical")
    at = open_page(COMPARE, doc=doc, configs=CONFIGS)
    at.session_state["qual_K"] = 0.9
    at.session_state["models_chat_api_key"] = SECRET
    at.session_state["models_chat_choice"] = ("remote", ("http://127.0.0.1:9", "tiny"))
    at.text_input(key="ses_name").set_value("demo")
    run(at)
    at.button(key="ses_save").click()
    return run(at)


def test_save_then_open_in_a_new_session_gives_the_same_comparison(data_dir: Path) -> None:
    at = _saved(data_dir)
    path = data_dir / "sessions" / "demo.json"
    text = path.read_text(encoding="utf-8")
    assert SECRET not in text
    before_doc, before_configs, before_numbers = at.session_state["doc"], _tagged(at), _numbers(at)

    fresh = open_page("pages/document.py")  # a new session: the default sample and configurations
    assert fresh.session_state["doc"].id != before_doc.id
    _open_upload(fresh, "demo.json", text.encode())
    assert not fresh.error, [e.value for e in fresh.error]
    assert fresh.session_state["doc"].id == before_doc.id
    assert _tagged(fresh) == before_configs
    assert fresh.session_state["qual_K"] == 0.9
    assert fresh.session_state["models_chat_choice"] == ("remote", ("http://127.0.0.1:9", "tiny"))
    assert "models_chat_api_key" not in fresh.session_state
    for (_, config), (_, again) in zip(before_configs, _tagged(fresh)):
        spans = [(c.start, c.end) for c in run_chunker(before_doc, config).chunks]
        assert spans == [(c.start, c.end) for c in run_chunker(fresh.session_state["doc"], again).chunks]
    fresh.switch_page(COMPARE)
    run(fresh)
    assert _numbers(fresh).equals(before_numbers)

    # The link the app wrote reproduces it too, on yet another fresh session.
    assert fresh.query_params["sample"] == "technical"
    linked = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=TIMEOUT)
    linked.query_params.update({"configs": fresh.query_params["configs"], "sample": "technical"})
    run(linked)
    assert linked.session_state["doc"].id == before_doc.id and _tagged(linked) == before_configs

    # And ?session=NAME opens the saved file at start.
    named = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=TIMEOUT)
    named.query_params["session"] = "demo"
    run(named)
    assert named.session_state["doc"].id == before_doc.id and _tagged(named) == before_configs


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b'{"format": "chunklab-session", "version": 1, "configs": [', "damaged session file"),
        (None, "saved by a newer Chunk Lab (session format 2"),
        (b'{"format": "chunklab-session", "version": 1, "document": {"sample": null, "name": "x.txt", "sha": '
         b'"0123456789abcdef"}, "configs": [{"tag": "A", "chunker": "recursive", "params": {"chunk_size": -3}}]}',
         "chunk_size (-3) must be at least 1"),
    ],
)
def test_a_refused_file_is_one_line_and_changes_nothing(data_dir: Path, data: bytes | None, line: str) -> None:
    at = _saved(data_dir)
    if data is None:
        raw = json.loads((data_dir / "sessions" / "demo.json").read_text(encoding="utf-8"))
        data = json.dumps({**raw, "version": 2}).encode()
    at.session_state["configs"] = CONFIGS[:1]
    run(at)
    before_doc, before_configs = at.session_state["doc"], _tagged(at)
    _open_upload(at, "bad.json", data)
    (error,) = at.error
    assert line in error.value and "\n" not in error.value
    assert at.session_state["doc"] is before_doc and _tagged(at) == before_configs


def test_a_session_on_an_upload_asks_for_its_document_and_checks_its_hash(data_dir: Path) -> None:
    at = open_page("pages/document.py")
    gen = at.session_state["docpage_upload_gen"] if "docpage_upload_gen" in at.session_state else 0
    note = "A note of mine.\n\nIt has two paragraphs, and nothing else."
    at.file_uploader(key=f"docpage_upload_{gen}").set_value(("note.txt", note.encode(), "text/plain"))
    run(at)
    at.session_state["configs"] = CONFIGS
    at.text_input(key="ses_name").set_value("mine")
    run(at)
    at.button(key="ses_save").click()
    run(at)
    data = (data_dir / "sessions" / "mine.json").read_bytes()

    fresh = open_page("pages/document.py")
    sample_doc = fresh.session_state["doc"]
    _open_upload(fresh, "mine.json", data)
    assert fresh.session_state["doc"] is sample_doc  # nothing changes until the document comes
    gen = fresh.session_state["ses_gen"]
    fresh.file_uploader(key=f"ses_doc_{gen}").set_value(("other.txt", b"Some other text.", "text/plain"))
    run(fresh)
    (error,) = fresh.error
    assert error.value.startswith("this file is not the session's document (hash ")
    assert fresh.session_state["doc"] is sample_doc
    gen = fresh.session_state["ses_gen"]
    fresh.file_uploader(key=f"ses_doc_{gen}").set_value(("note.txt", note.encode(), "text/plain"))
    run(fresh)
    assert not fresh.error
    assert fresh.session_state["doc"].source == "note.txt" and _tagged(fresh) == _tagged(at)
