"""The Models page with ``AppTest``: loading models, errors, scoring with progress and cancel, the cache."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from backend.models.cache import default_cache
from backend.text.document import Document
from tests.support.apptest import open_page
from tests.support.apptest import run as _run

TINY = "The cat sat on the mat. It was warm by the fire. Then the <b>dog</b> came & barked loudly!"
KEY = "sk-models-page-test-91e2"


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test gets its own output cache folder (default_cache() follows CHUNKLAB_CACHE_DIR)."""
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def no_models_loaded(monkeypatch):
    """The process's model caches emptied for the test (another test may have loaded the defaults)."""
    import backend.models.embedder as embedder_module
    import backend.models.lm as lm_module
    import backend.models.scorer as scorer_module

    monkeypatch.setattr(lm_module, "_models", {})
    monkeypatch.setattr(scorer_module, "_scorers", {})
    monkeypatch.setattr(embedder_module, "_loaded", {})


@pytest.fixture
def at() -> AppTest:
    """The app on the Models page (the default sample loaded, no model loaded)."""
    return _run(open_page("pages/models.py"))  # one run more: the page settled after its switch


def _load_bundled_lm(at: AppTest) -> None:
    at.button(key="models_lm_load").click()
    _run(at)
    _run(at)  # the load reruns the app so the sidebar shows the model; settle the ids again


def _score_and_wait(at: AppTest, timeout: float = 90) -> object:
    at.button(key="models_score").click()
    _run(at)
    job = at.session_state["models_score_job"]
    t0 = time.perf_counter()
    while job.running and time.perf_counter() - t0 < timeout:
        time.sleep(0.2)
        _run(at)  # what the progress fragment's timer does in a browser
    assert not job.running
    _run(at)
    return job


@pytest.mark.usefixtures("no_models_loaded")
def test_page_renders_with_no_model_loaded(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["Models"]
    assert not _errors(at)
    sidebar = [t.value for t in at.sidebar.text]
    assert "LM: not loaded" in sidebar and "Embedder: not loaded" in sidebar
    assert at.session_state["doc"].source in sidebar  # the document line is still there
    for key in ("models_lm_card", "models_emb_card"):
        assert [c.value for c in at.get_by_key(key).caption] == ["Not loaded."]
    button = at.button(key="models_score")
    assert button.disabled and "No language model is loaded" in button.help
    assert any(c.value.startswith("No language model is loaded: press Load") for c in at.caption)  # the reason, shown
    assert {m.label for m in at.metric} >= {"Entries", "Size"}


@pytest.mark.usefixtures("no_models_loaded")
def test_bad_model_path_shows_one_error_and_the_page_goes_on(at: AppTest) -> None:
    at.radio(key="models_lm_source").set_value("local")
    _run(at)
    at.text_input(key="models_lm_path").input("/no/such/model/folder")
    at.button(key="models_lm_load").click()
    _run(at)
    errors = _errors(at)
    assert len(errors) == 1 and "/no/such/model/folder" in errors[0] and "\n" not in errors[0]
    assert "LM: not loaded" in [t.value for t in at.sidebar.text]
    # The rest of the page still works: the embedder loads.
    at.button(key="models_emb_load").click()
    _run(at)
    assert at.session_state["models_emb_info"].name == "all-MiniLM-L6-v2"
    assert len(_errors(at)) == 1


@pytest.mark.usefixtures("no_models_loaded")
def test_bad_embedder_path_shows_an_error(at: AppTest) -> None:
    at.radio(key="models_emb_source").set_value("local")
    _run(at)
    at.text_input(key="models_emb_path").input("./missing-embedder")
    at.button(key="models_emb_load").click()
    _run(at)
    errors = _errors(at)
    assert len(errors) == 1 and "does not exist" in errors[0]
    assert [c.value for c in at.get_by_key("models_emb_card").caption] == ["Not loaded."]


def test_unreachable_remote_server_shows_an_error(at: AppTest) -> None:
    at.radio(key="models_lm_source").set_value("remote")
    _run(at)
    at.text_input(key="models_remote_url").input("http://127.0.0.1:9/v1")
    at.text_input(key="models_remote_model").input("m")
    at.text_input(key="models_remote_key").input(KEY)
    at.button(key="models_lm_load").click()
    _run(at)
    errors = _errors(at)
    assert len(errors) == 1 and "unreachable" in errors[0] and KEY not in errors[0]


@pytest.mark.usefixtures("no_models_loaded")
def test_models_a_job_loaded_are_named_and_usable(at: AppTest) -> None:
    """A job loads the default models through the backend's caches, not the session: the labels follow."""
    from backend.models.embedder import load_embedder
    from backend.models.scorer import load_scorer

    assert "LM: not loaded" in [t.value for t in at.sidebar.text]
    load_scorer(None)  # what a Compare, Quality or Benchmark job does in its thread
    load_embedder(None)
    at.session_state["doc"] = Document.from_text(TINY, source="tiny.txt")
    _run(at)
    sidebar = [t.value for t in at.sidebar.text]
    assert "LM: SmolLM2-135M-Instruct.Q4_1 (default)" in sidebar and "Embedder: all-MiniLM-L6-v2 (default)" in sidebar
    assert "models_lm_info" not in at.session_state  # the session chose nothing
    for key in ("models_lm_card", "models_emb_card"):
        card = at.get_by_key(key)
        assert card.metric and any("loaded by a background job" in c.value for c in card.caption)
    assert not at.button(key="models_score").disabled  # the loaded default scores the document
    assert not any(c.value.startswith("No language model is loaded") for c in at.caption)
    job = _score_and_wait(at)
    assert job.state == "done", job.error
    assert job.meta["model"] == "SmolLM2-135M-Instruct.Q4_1"
    at.switch_page("pages/compare.py")
    _run(at)
    assert "LM: SmolLM2-135M-Instruct.Q4_1 (default)" in [t.value for t in at.sidebar.text]


def test_loading_the_bundled_models_shows_their_info(at: AppTest) -> None:
    _load_bundled_lm(at)
    at.button(key="models_emb_load").click()
    _run(at)
    _run(at)
    assert not _errors(at)
    lm = {m.label: m.value for m in at.get_by_key("models_lm_card").metric}
    assert lm == {"Parameters": "134.5M", "Device": "cpu", "Dtype": "float32", "Context": "8,192"}
    emb = {m.label: m.value for m in at.get_by_key("models_emb_card").metric}
    assert emb == {"Parameters": "22.7M", "Device": "cpu", "Dtype": "float32", "Context": "256"}
    sidebar = [t.value for t in at.sidebar.text]
    assert "LM: SmolLM2-135M-Instruct.Q4_1" in sidebar and "Embedder: all-MiniLM-L6-v2" in sidebar
    assert "134.5M · cpu · float32" in [c.value for c in at.sidebar.caption]
    # The sidebar shows them on every page.
    at.switch_page("pages/compare.py")
    _run(at)
    assert "LM: SmolLM2-135M-Instruct.Q4_1" in [t.value for t in at.sidebar.text]


def test_scoring_a_short_document_produces_the_table(at: AppTest) -> None:
    at.session_state["doc"] = Document.from_text(TINY, source="tiny.txt")
    _load_bundled_lm(at)
    job = _score_and_wait(at)
    assert job.state == "done", job.error
    assert not _errors(at)
    (table,) = at.dataframe
    df = table.value
    doc = at.session_state["doc"]
    assert list(df["text"]) == [doc.text[s.start : s.end] for s in doc.sentences]
    assert "<b>dog</b> came & barked" in df["text"].iloc[-1]  # a cell is plain text, shown as typed
    assert (df["tokens"] > 0).all() and (df["ppl"] > 1).all()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Sentences"] == str(len(doc.sentences))
    assert metrics["Entries"] == "1"  # the token scores went to the output cache
    assert len(at.get("plotly_chart")) == 1


def test_precision_is_the_sessions_own_and_keyed_apart(at: AppTest) -> None:
    at.session_state["doc"] = Document.from_text(TINY, source="tiny.txt")
    at.selectbox(key="models_lm_precision").set_value("float16")
    _load_bundled_lm(at)
    assert not _errors(at)
    lm = {m.label: m.value for m in at.get_by_key("models_lm_card").metric}
    assert lm["Dtype"] == "float16"
    job = _score_and_wait(at)
    assert job.state == "done", job.error
    # Another browser session, loading with the default precision, gets float32 and its own entry.
    other = _run(open_page("pages/models.py"))
    other.session_state["doc"] = Document.from_text(TINY, source="tiny.txt")
    _load_bundled_lm(other)
    assert {m.label: m.value for m in other.get_by_key("models_lm_card").metric}["Dtype"] == "float32"
    job = _score_and_wait(other)
    assert job.state == "done", job.error
    assert {m.label: m.value for m in other.metric}["Entries"] == "2"  # float32's scores did not hit float16's
    _run(at)
    assert {m.label: m.value for m in at.get_by_key("models_lm_card").metric}["Dtype"] == "float16"


def test_cancel_stops_scoring(at: AppTest) -> None:
    # A text no earlier run has scored (no cache hit), long enough to still run when cancelled.
    text = f"Run {uuid.uuid4().hex}. " + at.session_state["doc"].text
    at.session_state["doc"] = Document.from_text(text, source="long.txt")
    _load_bundled_lm(at)
    at.button(key="models_score").click()
    _run(at)
    job = at.session_state["models_score_job"]
    assert job.running
    _run(at)
    at.button(key="models_score_cancel").click()
    _run(at)
    assert job.wait(timeout=60)
    _run(at)
    assert job.state == "cancelled"
    assert [w.value for w in at.warning] == ["Scoring was cancelled."]
    assert not at.dataframe
    assert not at.button(key="models_score").disabled  # and it can start again


def test_clear_cache_works(at: AppTest) -> None:
    cache = default_cache()
    cache.put({"kind": "test", "n": 1}, {"x": 1})
    cache.put({"kind": "test", "n": 2}, {"x": 2})
    _run(at)
    assert {m.label: m.value for m in at.metric}["Entries"] == "2"
    at.button(key="models_clear_cache").click()
    _run(at)
    assert {m.label: m.value for m in at.metric}["Entries"] == "0"
    assert [s.value for s in at.success] == ["Removed 2 cached entries."]
    assert cache.stats()["entries"] == 0


def test_cache_size_and_its_limit_are_shown(at: AppTest, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_CACHE_MAX_MB", "4")  # default_cache() follows it
    default_cache().put({"kind": "test", "n": 1}, {"x": np.zeros(131_072)})  # 1 MB (1024 × 1024 bytes) of float64
    _run(at)
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Entries"], metrics["Size"], metrics["Limit"]) == ("1", "1.0 MB", "4 MB")
    assert "1.0 MB of 4 MB used (25%); past the limit the least recently used entries are deleted." in [
        c.value for c in at.caption
    ]


def test_remote_server_connects_scores_and_never_shows_the_key(at: AppTest) -> None:
    from tests.support.openai_compat_server import start_server

    at.session_state["doc"] = Document.from_text(TINY, source="tiny.txt")
    with start_server(api_key=KEY) as server:
        at.radio(key="models_lm_source").set_value("remote")
        _run(at)
        at.text_input(key="models_remote_url").input(server.url)
        at.text_input(key="models_remote_key").input(KEY)
        at.button(key="models_lm_load").click()
        _run(at)
        _run(at)
        assert not _errors(at)
        card = at.get_by_key("models_lm_card")
        assert {m.label: m.value for m in card.metric}["Device"] == "remote"
        assert any(t.value.startswith("LM: ") and server.engine.name in t.value for t in at.sidebar.text)
        server.inject("truncated")  # an answer cut short: the job fails with one line, nothing is cached
        job = _score_and_wait(at)
        assert job.state == "failed" and _errors(at) == [job.error]
        assert job.error.startswith(f"remote scorer at {server.url} sent an answer to a completions request that is not")
        assert default_cache().stats()["entries"] == 0
        server.inject(None)
        job = _score_and_wait(at)
        assert job.state == "done", job.error
        assert not _errors(at) and default_cache().stats()["entries"] == 1
        assert len(at.dataframe[0].value) == 3
    shown = [str(e.value) for kind in ("text", "caption", "markdown", "error", "metric", "code") for e in at.get(kind)]
    assert shown and not any(KEY in s for s in shown)
