"""Page wiring with ``streamlit.testing.v1.AppTest``: widgets are found by key."""

from __future__ import annotations

import time
import uuid

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from backend.samples import list_samples
from backend.text.document import Document
from components.keys import CHAT_CHOICE, CHAT_KEY, COMPARE, CONFIGS, NEXT_UID
from components.state import normalized_config
from tests.conftest import ROOT
from tests.support.apptest import open_page, wait_job
from tests.support.apptest import run as checked_run
from tests.support.scripted_chat_server import start_scripted_server

TIMEOUT = 120


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


@pytest.fixture
def at() -> AppTest:
    """The app after its first run (the Document page, default sample loaded)."""
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    # AppTest starts every later run in Streamlit's legacy pages/ mode, where the page runs
    # without app.py (components.layout.ensure_routed covers that) and under its own URL
    # path instead of the default page's, which changes every widget id once. A second run
    # settles the ids, so the first simulated interaction is not lost.
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


@pytest.fixture
def compare(at: AppTest) -> AppTest:
    """The app switched to the Compare page."""
    at.switch_page("pages/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_app_opens_on_the_first_sample(at: AppTest) -> None:
    first = list_samples()[0]
    doc = at.session_state["doc"]
    assert doc.source == first.path.name
    assert doc.text
    assert first.path.name in [t.value for t in at.sidebar.text]
    assert [t.value for t in at.title] == ["Chunk Lab"]


def test_landing_page_has_a_title_a_purpose_and_compare_as_next_step(at: AppTest) -> None:
    from components.layout import PURPOSE

    assert [t.value for t in at.title] == ["Chunk Lab"]
    assert PURPOSE in [m.value for m in at.markdown]
    (link,) = at.get("page_link")
    assert link.proto.page == "compare" and link.proto.label == "Next: compare chunkers"
    assert "Document" in [h.value for h in at.header]


def test_sample_description_shows_only_for_the_sample_it_belongs_to(at: AppTest) -> None:
    first, second = list_samples()[:2]
    assert first.description in [c.value for c in at.caption]
    at.selectbox(key="docpage_sample").set_value(second.name).run()
    captions = [c.value for c in at.caption]
    assert first.description in captions and second.description not in captions  # picked, not opened yet
    _uploader(at).set_value(("report.txt", b"An uploaded report. Two lines.", "text/plain"))
    at.run()
    assert at.session_state["doc"].source == "report.txt"
    captions = [c.value for c in at.caption]
    assert not any(s.description in captions for s in list_samples())
    # An upload carrying a sample's file name but other text is no sample either.
    _uploader(at).set_value(None).run()
    _uploader(at).set_value((first.path.name, b"Other words entirely.", "text/plain")).run()
    assert at.session_state["doc"].source == first.path.name
    assert first.description not in [c.value for c in at.caption]


def test_document_page_shows_stats(at: AppTest) -> None:
    doc = at.session_state["doc"]
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) == {
        "Characters", "Tokens", "Sentences", "Paragraphs", "Pages", "Language", "Format", "Encoding"
    }
    assert metrics["Characters"] == f"{len(doc.text):,}"
    assert metrics["Pages"] == str(len(doc.pages))
    assert int(metrics["Tokens"].replace(",", "")) > 0
    assert metrics["Format"] == doc.kind.upper()


def test_document_preview_is_paginated_and_escaped(at: AppTest) -> None:
    html = "".join(h.value for h in at.html)
    doc = at.session_state["doc"]
    assert 'class="cl-doc"' in html
    assert at.get_by_key("docpage_preview_page").value == 1
    if len(doc.text) > 10_000 and len(doc.pages) == 1:
        assert doc.text[10_000:10_200] not in html  # only the first part is rendered


def test_open_another_sample(at: AppTest) -> None:
    other = list_samples()[1]
    at.selectbox(key="docpage_sample").set_value(other.name).run()
    at.button(key="docpage_open_sample").click().run()
    assert not at.exception
    assert at.session_state["doc"].source == other.path.name
    assert not _errors(at)


def _uploader(at: AppTest):
    """The Document page's uploader: its key names a generation, new after each rejected file."""
    generation = at.session_state["docpage_upload_gen"] if "docpage_upload_gen" in at.session_state else 0
    return at.file_uploader(key=f"docpage_upload_{generation}")


def test_upload_replaces_the_document(at: AppTest) -> None:
    text = "Chunk Lab test upload.\n\nA second paragraph <b>with markup</b> & symbols."
    _uploader(at).set_value(("notes.txt", text.encode(), "text/plain")).run()
    assert not at.exception
    doc = at.session_state["doc"]
    assert doc.source == "notes.txt"
    assert not _errors(at)
    html = "".join(h.value for h in at.html)
    assert "&lt;b&gt;with markup&lt;/b&gt; &amp; symbols." in html
    assert "<b>with markup</b>" not in html


@pytest.mark.parametrize(
    ("name", "data"),
    [("empty.txt", b""), ("broken.pdf", b"this is not a PDF at all"), ("binary.txt", b"\x00\x01\x02\xff" * 64)],
)
def test_upload_error_is_one_line_and_keeps_the_document(at: AppTest, name: str, data: bytes) -> None:
    before = at.session_state["doc"]
    _uploader(at).set_value((name, data, "application/octet-stream")).run()
    assert not at.exception
    errors = _errors(at)
    assert len(errors) == 1 and errors[0] and "\n" not in errors[0]
    assert "Traceback" not in errors[0]
    assert at.session_state["doc"] is before
    # The page still shows the previous document.
    assert {m.label: m.value for m in at.metric}["Characters"] == f"{len(before.text):,}"


def test_a_rejected_upload_empties_the_box_keeps_its_error_until_the_next_file(at: AppTest) -> None:
    before = at.session_state["doc"]
    _uploader(at).set_value(("empty.txt", b"", "text/plain")).run()
    assert _uploader(at).value is None  # a new, empty uploader: it no longer names the rejected file
    (error,) = _errors(at)
    assert "empty.txt" in error
    at.run()
    assert _errors(at) == [error] and at.session_state["doc"] is before
    _uploader(at).set_value(("notes.txt", b"A good file.", "text/plain")).run()
    assert not _errors(at)
    assert at.session_state["doc"].source == "notes.txt"
    assert at.session_state["docpage_upload_gen"] == 1  # an accepted file stays in its box (no new one)


def test_compare_shows_one_column_per_default_configuration(compare: AppTest) -> None:
    configs = compare.session_state["configs"]
    assert [(e.config.name, e.config.params_dict) for e in configs] == [
        ("recursive", {"chunk_size": 200, "chunk_overlap": 0}),
        ("fixed_token", {"chunk_size": 250, "chunk_overlap": 125}),
    ]
    for e in configs:
        view = compare.get_by_key(f"cmp_view_{e.uid}")
        html = "".join(h.value for h in view.html)
        assert 'class="cl-badge' in html and "cl-c0" in html
    assert not _errors(compare)
    (stats,) = compare.dataframe
    assert list(stats.value.index) == [e.tag for e in configs]
    assert all(n > 0 for n in stats.value["chunks"])
    for e in configs:
        assert compare.get_by_key(f"cmp_dl_jsonl_{e.uid}") is not None
        assert compare.get_by_key(f"cmp_dl_csv_{e.uid}") is not None


def test_overlap_is_marked_only_where_chunks_overlap(compare: AppTest) -> None:
    recursive, fixed = compare.session_state["configs"]
    rec_html = "".join(h.value for h in compare.get_by_key(f"cmp_view_{recursive.uid}").html)
    fix_html = "".join(h.value for h in compare.get_by_key(f"cmp_view_{fixed.uid}").html)
    assert 'class="cl-ov' not in rec_html
    assert 'class="cl-ov' in fix_html


def test_add_configuration_through_the_form(compare: AppTest) -> None:
    compare.selectbox(key="cmp_new_chunker").set_value("sentence").run()
    compare.number_input(key="cmp_new_sentence_chunk_size").set_value(120)
    compare.button(key="cmp_new_submit").click().run()
    assert not compare.exception
    assert not _errors(compare)
    configs = compare.session_state["configs"]
    assert len(configs) == 3
    added = configs[-1]
    assert added.config.name == "sentence"
    assert added.config.params_dict["chunk_size"] == 120
    assert added.tag == "C"
    html = "".join(h.value for h in compare.get_by_key(f"cmp_view_{added.uid}").html)
    assert "cl-badge" in html


def test_the_add_form_opens_on_a_model_free_chunker(compare: AppTest) -> None:
    from backend.chunkers import chunker_specs

    needs = {s["name"]: s["needs"] for s in chunker_specs()}
    box = compare.selectbox(key="cmp_new_chunker")
    assert box.value == "recursive" and needs["recursive"] == []
    assert needs[box.options[0].split(" · ")[0]], "the first listed chunker needs a model: the default is not an index"
    compare.button(key="cmp_new_submit").click().run()
    added = compare.session_state["configs"][-1]
    assert added.config.name == "recursive" and not _errors(compare)


def test_same_chunker_twice_gets_two_columns(compare: AppTest) -> None:
    compare.selectbox(key="cmp_new_chunker").set_value("recursive").run()
    compare.button(key="cmp_new_submit").click().run()
    configs = compare.session_state["configs"]
    assert [e.config.name for e in configs].count("recursive") == 2
    assert len({e.uid for e in configs}) == 3
    for e in configs:
        compare.get_by_key(f"cmp_view_{e.uid}")


def test_bad_parameter_shows_an_error(compare: AppTest) -> None:
    compare.selectbox(key="cmp_new_chunker").set_value("fixed_token").run()
    compare.number_input(key="cmp_new_fixed_token_chunk_size").set_value(100)
    compare.number_input(key="cmp_new_fixed_token_chunk_overlap").set_value(150)
    compare.button(key="cmp_new_submit").click().run()
    assert not compare.exception
    errors = _errors(compare)
    assert len(errors) == 1
    assert "chunk_overlap" in errors[0] and "\n" not in errors[0]
    assert len(compare.session_state["configs"]) == 2


def test_remove_configuration(compare: AppTest) -> None:
    first, second = compare.session_state["configs"]
    compare.button(key=f"cmp_remove_{first.uid}").click().run()
    assert not compare.exception
    assert [e.uid for e in compare.session_state["configs"]] == [second.uid]
    with pytest.raises(KeyError):
        compare.get_by_key(f"cmp_view_{first.uid}")


def _add(at: AppTest, chunker: str) -> None:
    at.selectbox(key="cmp_new_chunker").set_value(chunker).run()
    at.button(key="cmp_new_submit").click().run()
    assert not at.exception


def _tags(at: AppTest) -> list[tuple[int, str]]:
    return [(e.uid, e.tag) for e in at.session_state["configs"]]


def test_undo_puts_a_removed_configuration_back_with_its_letter_and_place(compare: AppTest) -> None:
    _add(compare, "paragraph")
    assert _tags(compare) == [(0, "A"), (1, "B"), (2, "C")]
    compare.button(key="cmp_remove_1").click().run()
    compare.button(key="cmp_remove_0").click().run()
    assert _tags(compare) == [(2, "C")]
    assert "Removed A: recursive" in " ".join(c.value for c in compare.caption)
    compare.button(key="cmp_undo_remove").click().run()
    assert _tags(compare) == [(0, "A"), (2, "C")]
    assert "Removed B: fixed_token" in " ".join(c.value for c in compare.caption)
    compare.button(key="cmp_undo_remove").click().run()
    assert not compare.exception
    assert _tags(compare) == [(0, "A"), (1, "B"), (2, "C")]
    assert compare.session_state["configs"][1].config.name == "fixed_token"
    compare.get_by_key("cmp_view_1")  # its column is back
    with pytest.raises(KeyError):
        compare.get_by_key("cmp_undo_remove")  # nothing left to undo


def test_a_new_configuration_takes_the_first_free_letter(compare: AppTest) -> None:
    _add(compare, "paragraph")
    _add(compare, "sentence")
    assert _tags(compare) == [(0, "A"), (1, "B"), (2, "C"), (3, "D")]
    compare.button(key="cmp_remove_1").click().run()
    compare.button(key="cmp_remove_2").click().run()
    _add(compare, "recursive")
    _add(compare, "recursive")
    _add(compare, "paragraph")
    # Letters B, C are reused in order; uids (widget keys) never are.
    assert _tags(compare) == [(0, "A"), (3, "D"), (4, "B"), (5, "C"), (6, "E")]
    with pytest.raises(KeyError):
        compare.get_by_key("cmp_undo_remove")  # adding ends the undo (a removed letter may be taken)


def _pager(at: AppTest):
    """The side-by-side pagination: its key names a generation, new each time the page moves it."""
    return at.get_by_key(f"cmp_pager_{at.session_state['cmp_pager']}")


def test_state_survives_page_switches(compare: AppTest) -> None:
    compare.selectbox(key="cmp_new_chunker").set_value("paragraph").run()
    compare.button(key="cmp_new_submit").click().run()
    compare.selectbox(key="cmp_window_chars").set_value(5_000).run()
    _pager(compare).set_value(2).run()
    configs = [e.uid for e in compare.session_state["configs"]]
    doc = compare.session_state["doc"]
    assert "Characters 5,000–10,000" in " ".join(c.value for c in compare.caption)

    compare.switch_page("pages/document.py").run()
    assert not compare.exception
    assert [t.value for t in compare.title] == ["Chunk Lab"]
    compare.switch_page("pages/compare.py").run()
    assert not compare.exception
    assert [e.uid for e in compare.session_state["configs"]] == configs
    assert compare.session_state["doc"] is doc
    assert _pager(compare).value == 2
    assert compare.get_by_key("cmp_window_chars").value == 5_000
    assert "Characters 5,000–10,000" in " ".join(c.value for c in compare.caption)


def test_new_document_resets_the_window(compare: AppTest) -> None:
    compare.selectbox(key="cmp_window_chars").set_value(5_000).run()
    _pager(compare).set_value(2).run()
    compare.switch_page("pages/document.py").run()
    compare.selectbox(key="docpage_sample").set_value(list_samples()[1].name).run()
    compare.button(key="docpage_open_sample").click().run()
    compare.switch_page("pages/compare.py").run()
    assert not compare.exception
    assert _pager(compare).value == 1


def test_strip_can_be_hidden(compare: AppTest) -> None:
    assert len(compare.get("plotly_chart")) == 2  # strip and histogram
    compare.toggle(key="cmp_show_strip").set_value(False).run()
    assert not compare.exception
    assert len(compare.get("plotly_chart")) == 1


def test_chunk_inspector_shows_neighbours(compare: AppTest) -> None:
    recursive = compare.session_state["configs"][0]
    compare.number_input(key=f"cmp_sel_{recursive.uid}").set_value(2).run()
    assert not compare.exception
    html = "".join(h.value for h in compare.html)
    assert "Previous · chunk 1" in html and "Selected · chunk 2" in html and "Next · chunk 3" in html


def test_strip_click_selects_chunks_in_every_row_and_moves_the_window(compare: AppTest) -> None:
    # AppTest cannot click a Plotly chart; this is what the chart's selection callback stores.
    recursive, fixed = compare.session_state["configs"]
    compare.session_state["cmp_pending_focus"] = (fixed.tag, 3)
    compare.run()
    assert not compare.exception
    assert compare.session_state[f"cmp_sel_{fixed.uid}"] == 3
    assert compare.session_state[f"cmp_sel_{recursive.uid}"] >= 0
    html = "".join(h.value for h in compare.html)
    assert "Selected · chunk 3" in html


def test_a_strip_click_moves_the_window_without_a_session_state_warning(compare: AppTest, monkeypatch) -> None:
    # Streamlit logs (once per process) when a widget with a default also had its value set through
    # Session State: the page must move the pagination one way only.
    import logging

    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger(policies.__name__).addHandler(handler)
    try:
        compare.selectbox(key="cmp_window_chars").set_value(5_000).run()
        fixed = compare.session_state["configs"][1]
        compare.session_state["cmp_pending_focus"] = (fixed.tag, 12)  # what the strip's click handler stores
        compare.run()
    finally:
        logging.getLogger(policies.__name__).removeHandler(handler)
    assert not compare.exception
    assert [r.getMessage() for r in records] == []
    assert compare.session_state[f"cmp_sel_{fixed.uid}"] == 12
    page = compare.session_state["cmp_page"]
    assert page > 1
    assert f"(page {page} of " in " ".join(c.value for c in compare.caption)


def test_a_failed_model_run_shows_its_error_on_the_compare_card(tmp_path, monkeypatch) -> None:
    # The model-run panel stores each configuration's outcome under COMPARE.lm_results and the card
    # reads it back under the same key: the run's one-line error, not "waiting" or "not cached".
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "CHUNKLAB_CHAT"):
        monkeypatch.delenv(name, raising=False)
    doc = Document.from_text(
        f"Failed run {uuid.uuid4().hex[:8]}.\n\nThe lighthouse stood on the cliff.\n\nStocks fell on Monday.",
        source="failed.txt",
    )
    with start_scripted_server(model="scripted-model", api_key="sk-the-right-one") as server:
        at = open_page("pages/document.py", doc)
        at.session_state[CONFIGS] = [ConfigEntry(0, "A", normalized_config("moc", {}))]
        at.session_state[NEXT_UID] = 1
        at.session_state[CHAT_CHOICE] = ("remote", (server.url, "scripted-model"))
        at.session_state[CHAT_KEY] = "sk-a-wrong-one"  # the server answers 401
        at.switch_page("pages/compare.py")
        checked_run(at)
        job = wait_job(at, COMPARE.group_job("chat"))
        assert job.state == "done", job.error  # the job ran; its one configuration failed
        # The server refuses the key at its model listing, before any chat request (the served identity is asked first).
        assert server.requests, "the job did not ask the chat server"
        checked_run(at)  # and stays shown on later runs
    card = at.get_by_key("cmp_card_0")
    errors = [e.value for e in card.error]
    assert len(errors) == 1 and "rejected the API key" in errors[0], errors
    assert "\n" not in errors[0]
    assert not any("Waiting for" in c.value for c in card.caption)
    assert not any("results are missing" in w.value for w in at.warning)
    assert job is at.session_state[COMPARE.group_job("chat")]  # no second run was started


def test_an_embedder_run_names_the_embedder_and_a_cancelled_card_can_run_again(tmp_path, monkeypatch) -> None:
    import threading

    import backend.lab.runs as lab_runs

    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CHUNKLAB_EMBEDDER", raising=False)
    doc = Document.from_text(
        f"Semantic run {uuid.uuid4().hex[:8]}. The lighthouse stood on the cliff. Stocks fell on Monday.",
        source="semantic.txt",
    )
    started = threading.Event()

    def held(doc, configs, scorer, progress, *rest):  # a run that waits until it is cancelled
        started.set()
        while True:
            progress(0, 1)  # raises Cancelled once the job is cancelled
            time.sleep(0.02)

    real = lab_runs.run_configs
    monkeypatch.setattr(lab_runs, "run_configs", held)
    at = open_page("pages/document.py", doc)
    at.session_state[CONFIGS] = [ConfigEntry(0, "A", normalized_config("semantic", {}))]
    at.session_state[NEXT_UID] = 1
    at.switch_page("pages/compare.py")
    checked_run(at)
    job = at.session_state[COMPARE.group_job("embedder")]
    assert started.wait(30) and job.running
    panel = " ".join(c.value for c in at.caption)
    assert "running it with all-MiniLM-L6-v2 (default) in the background" in panel and "SmolLM2" not in panel
    card = " ".join(c.value for c in at.get_by_key("cmp_card_0").caption)
    assert "Waiting for all-MiniLM-L6-v2 (default)…" in card and "SmolLM2" not in card

    job.cancel()
    wait_job(at, COMPARE.group_job("embedder"))
    assert job.state == "cancelled"
    card = at.get_by_key("cmp_card_0")
    assert "The run with all-MiniLM-L6-v2 (default) was cancelled." in [c.value for c in card.caption]
    assert not any("Waiting for" in c.value for c in card.caption)
    monkeypatch.setattr(lab_runs, "run_configs", real)
    at.button(key="cmp_retry_0").click()
    checked_run(at)
    again = at.session_state[COMPARE.group_job("embedder")]
    assert again is not job  # the card's button started the run again
    wait_job(at, COMPARE.group_job("embedder"))
    assert again.state == "done", again.error
    card = " ".join(c.value for c in at.get_by_key("cmp_card_0").caption)
    assert "chunks" in card and "cancelled" not in card
    with pytest.raises(KeyError):
        at.get_by_key("cmp_retry_0")
