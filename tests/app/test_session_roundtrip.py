"""Sessions in the app: save → a new session → open gives the same document, letters, spans and numbers;
a refused file changes nothing; ``?configs=…&sample=…`` and ``?session=NAME`` reproduce the comparison.
A session comes back whole: the benchmark's results (so the Summary's numbers and verdict), the
Retrieval page's query, marks, picks and results, the Summary's charts toggle; ``?session=`` on an
uploaded document asks for it at the top of the main pane."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from backend.chunkers import run_chunker
from backend.samples import load_sample
from components.keys import BENCHMARK_JOB, RETRIEVAL
from components.state import normalized_config
from tests.conftest import ROOT
from tests.support.apptest import TIMEOUT, open_page, run, start_app, wait_job
from tests.support.demo import demo_environment

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


# --- the pages' state: the benchmark, the Retrieval page, every setting ---------------------------------------


@pytest.fixture
def demo_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Demo mode (model outputs from the shipped cache) with its own data folder; every model loader refuses."""
    return demo_environment(monkeypatch, tmp_path)


def _app() -> AppTest:
    return start_app()


def _visit(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    return run(at)


def _summary(at: AppTest) -> tuple[object, list[str]]:
    """The Summary's table and its verdict's lines."""
    frames = [getattr(d.value, "data", d.value) for d in at.dataframe]
    (quality,) = [f for f in frames if "bc" in f.columns]
    (retrieval,) = [f for f in frames if "iou" in f.columns]
    table = quality.join(retrieval.drop(columns=[c for c in retrieval.columns if c in quality.columns]))
    verdict = [m.value for m in at.markdown if m.value.startswith("- ")]
    return table, verdict


def _retrieval(at: AppTest) -> tuple:
    """The Retrieval page's query, marks, picked letters and the letters of the results shown."""
    entries = {e.uid: e.tag for e in at.session_state["configs"]}
    job = at.session_state[RETRIEVAL("search_job")]
    return (
        at.session_state[RETRIEVAL("query")], list(at.session_state[RETRIEVAL("marks")]),
        [entries[u] for u in at.session_state[RETRIEVAL("configs")]], list(job.result.tags),
    )


def test_a_session_comes_back_whole_benchmark_retrieval_and_settings(demo_lab: Path) -> None:
    at = _app()
    # A benchmark of its own (3 chunks per question; the demo opened with 5): it must come from the file.
    _visit(at, "pages/benchmark.py")
    at.number_input(key="bm_retrieve").set_value(3)
    run(at)
    at.button(key="bm_run").click()
    run(at)
    saved_benchmark = wait_job(at, BENCHMARK_JOB, timeout=120).result.benchmark
    assert saved_benchmark.retrieve == 3
    # The Retrieval page: the demo's question searched; B unpicked, then searched again without it.
    _visit(at, "pages/retrieval.py")
    wait_job(at, RETRIEVAL("search_job"), timeout=120)
    b_uid = next(e.uid for e in at.session_state["configs"] if e.tag == "B")
    at.multiselect(key=RETRIEVAL("configs")).unselect(b_uid)
    run(at)
    at.button(key=RETRIEVAL("search")).click()
    run(at)
    wait_job(at, RETRIEVAL("search_job"), timeout=120)
    retrieval_before = _retrieval(at)
    assert retrieval_before[2] == ["A", "C", "D"] and retrieval_before[3] == ["A", "C", "D"]
    # The Summary: its charts toggled off; its numbers and verdict as they are now.
    _visit(at, "pages/summary.py")
    at.toggle(key="sum_show_charts").set_value(False)
    run(at)
    table_before, verdict_before = _summary(at)
    assert "3 chunks per question" in " ".join(c.value for c in at.caption)
    at.text_input(key="ses_name").set_value("whole")
    run(at)
    at.button(key="ses_save").click()
    run(at)
    (saved,) = at.success
    assert "Saved on the server as whole" in saved.value
    assert [c.value for c in at.code] == ["?session=whole"]  # AppTest has no browser address: the relative link
    text = (demo_lab / "sessions" / "whole.json").read_text(encoding="utf-8")

    fresh = _app()  # a new demo session: its own benchmark (5 per question), no search yet
    assert fresh.session_state[BENCHMARK_JOB].result.benchmark.retrieve == 5
    _open_upload(fresh, "whole.json", text.encode())
    assert not fresh.error, [e.value for e in fresh.error]
    job = fresh.session_state[BENCHMARK_JOB]
    assert job.state == "done" and job.result.benchmark == saved_benchmark
    assert job.meta["qset_name"] == "sample:narrative" and job.meta["tags"] == ["A", "B", "C", "D"]
    assert fresh.session_state["sum_show_charts"] is False and fresh.session_state["bm_retrieve"] == 3
    _visit(fresh, "pages/summary.py")
    table_after, verdict_after = _summary(fresh)
    assert table_after.drop(columns="seconds").equals(table_before.drop(columns="seconds"))
    assert verdict_after == verdict_before and fresh.toggle(key="sum_show_charts").value is False
    _visit(fresh, "pages/retrieval.py")  # the saved query is searched again (embeddings from the cache)
    wait_job(fresh, RETRIEVAL("search_job"), timeout=120)
    assert _retrieval(fresh) == retrieval_before
    _visit(fresh, "pages/benchmark.py")
    (bench,) = [d.value for d in fresh.dataframe if "chunker" in d.value.columns]
    assert len(bench) == 4 and not [e for e in fresh.exception]

    # ?session=whole, in demo mode too: the link's session, not the demo's opening.
    linked = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    linked.query_params["session"] = "whole"
    run(linked)
    assert linked.session_state[BENCHMARK_JOB].result.benchmark == saved_benchmark
    _visit(linked, "pages/summary.py")
    assert _summary(linked)[1] == verdict_before and linked.toggle(key="sum_show_charts").value is False


def test_an_old_session_file_without_state_still_opens(data_dir: Path) -> None:
    at = _saved(data_dir)
    raw = json.loads((data_dir / "sessions" / "demo.json").read_text(encoding="utf-8"))
    raw.pop("state", None)
    fresh = open_page("pages/document.py")
    _open_upload(fresh, "old.json", json.dumps(raw).encode())
    assert not fresh.error and _tagged(fresh) == _tagged(at)
    assert BENCHMARK_JOB not in fresh.session_state


def test_a_damaged_benchmark_is_one_line_and_changes_nothing(demo_lab: Path) -> None:
    at = _app()
    at.text_input(key="ses_name").set_value("whole")
    run(at)
    at.button(key="ses_save").click()
    run(at)
    raw = json.loads((demo_lab / "sessions" / "whole.json").read_text(encoding="utf-8"))
    raw["state"]["benchmark"]["results"]["results"][0]["per_question"]["iou"] = ["x"]
    before_doc, before_job = at.session_state["doc"], at.session_state[BENCHMARK_JOB]
    at.session_state["configs"] = at.session_state["configs"][:2]
    run(at)
    _open_upload(at, "bad.json", json.dumps(raw).encode())
    (error,) = at.error
    assert error.value == "bad.json: the saved benchmark is damaged (configuration 1: iou is not a list of 12)"
    assert at.session_state["doc"] is before_doc and at.session_state[BENCHMARK_JOB] is before_job
    assert len(at.session_state["configs"]) == 2


def test_a_session_link_on_an_upload_asks_for_the_document_at_the_top_of_the_page(data_dir: Path) -> None:
    at = open_page("pages/document.py")
    gen = at.session_state["docpage_upload_gen"] if "docpage_upload_gen" in at.session_state else 0
    note = "My own notes.\n\nTwo paragraphs of them."
    at.file_uploader(key=f"docpage_upload_{gen}").set_value(("notes.md", note.encode(), "text/markdown"))
    run(at)
    at.text_input(key="ses_name").set_value("notes")
    run(at)
    at.button(key="ses_save").click()
    run(at)

    linked = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    linked.query_params["session"] = "notes"
    run(linked)
    # The main pane holds the ask, first thing, with its upload box; the page (the sample) is not drawn.
    (ask,) = linked.main.warning
    assert ask.value.startswith("This session was saved on **notes\\.md** (session notes: ")
    assert ask.value.endswith("upload it to reopen.")
    assert [u.key for u in linked.main.get("file_uploader")] == ["ses_doc_0"]
    assert not linked.main.title  # no page under it
    linked.file_uploader(key="ses_doc_0").set_value(("notes.md", note.encode(), "text/markdown"))
    run(linked)
    assert not linked.main.warning and linked.session_state["doc"].source == "notes.md"
    assert [t.value for t in linked.main.title] == ["Chunk Lab"]  # the Document page, drawn now
