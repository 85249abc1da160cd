"""The Edit page in AppTest: "Edit a copy" from a Compare card, a cut added, removed and moved with the widgets,
undo and redo, a click on the text (the component's trigger), the page with no edited copy, and a session
round trip that keeps the edits."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunkers import run_chunker
from backend.chunkers.meta.results import PPLScores
from backend.chunking import ConfigEntry
from backend.lab.edit import EditState, edit_copy, is_edited
from backend.models.cache import default_cache
from backend.models.scorer import load_scorer
from backend.models.scoring import document_token_scores
from backend.samples import load_sample
from backend.text.document import Document
from components.keys import EDIT_OPEN
from components.state import normalized_config
from components.views import export_stem
from tests.support.apptest import open_page, run
from tests.support.fake_scores import fake_token_scores
from tests.support.patching import patch_everywhere

COMPARE = "pages/compare.py"
EDIT = "pages/edit.py"
CONFIGS = [ConfigEntry(0, "A", normalized_config("recursive", {"chunk_size": 120, "chunk_overlap": 0}))]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    return tmp_path


def _counts(at: AppTest) -> str:
    """The editor's count line, e.g. ``**40 chunks (base 39): 1 cut added** · base …``."""
    (line,) = [m.value for m in at.markdown if " chunks (base " in m.value]
    return line.split("**")[1]


def _cut_picker(at: AppTest, uid: int = 1):
    """The selectbox of the cuts (a new widget, keyed by the cut set, whenever a cut changes)."""
    (picker,) = [s for s in at.selectbox if s.key.startswith(f"edit_cut_{uid}_pick_")]
    return picker


def _copy(doc) -> AppTest:
    """Compare with configuration A on ``doc``; "Edit a copy" on A's card; the Edit page open on the copy."""
    at = open_page(COMPARE, doc=doc, configs=CONFIGS)
    at.button(key="cmp_edit_0").click()
    run(at)
    assert at.title[0].value == "Edit"  # the button switched pages
    at.switch_page(EDIT)  # AppTest reruns the page it was opened on unless told
    return run(at)


def test_edit_a_copy_then_add_undo_redo_remove_and_move() -> None:
    doc = load_sample("technical")
    base = run_chunker(doc, CONFIGS[0].config)
    at = _copy(doc)
    copy = at.session_state["configs"][-1]
    assert (copy.uid, copy.tag) == (1, "B") and is_edited(copy.config)
    assert at.session_state[EDIT_OPEN] == 1
    assert at.selectbox(key="edit_pick").value == 1
    n = len(base.chunks)
    assert _counts(at) == f"{n} chunks (base {n}): no edits"
    assert at.button(key="edit_undo").disabled and at.button(key="edit_redo").disabled

    # A cut before sentence 5, inside A's second chunk (it holds sentences 4 to 6 here), moved to sentence 6.
    cut, moved = doc.sentences[4].start, doc.sentences[5].start
    base_starts = [c.start for c in base.chunks]
    assert cut not in base_starts and moved not in base_starts
    at.number_input(key="edit_sentence").set_value(5)
    run(at)
    at.button(key="edit_add").click()
    run(at)
    assert _counts(at) == f"{n + 1} chunks (base {n}): 1 cut added"
    assert f"Cut added at character {cut:,} (sentence 5)" in [c.value for c in at.caption]
    assert at.session_state["configs"][-1].config.params_dict["edits"] == f"+{cut}"
    assert _cut_picker(at).value == cut  # the new cut is selected
    assert not at.button(key="edit_undo").disabled and at.button(key="edit_redo").disabled

    at.button(key="edit_undo").click()
    run(at)
    assert _counts(at) == f"{n} chunks (base {n}): no edits"
    assert at.session_state["configs"][-1].config.params_dict["edits"] == ""
    assert at.button(key="edit_undo").disabled and not at.button(key="edit_redo").disabled

    at.button(key="edit_redo").click()
    run(at)
    assert _counts(at) == f"{n + 1} chunks (base {n}): 1 cut added"

    _cut_picker(at).set_value(cut)
    run(at)
    at.button(key="edit_right").click()  # one sentence forward
    run(at)
    assert at.session_state["configs"][-1].config.params_dict["edits"] == f"+{moved}"
    assert f"Cut moved from character {cut:,} to {moved:,}" in [c.value for c in at.caption]

    _cut_picker(at).set_value(moved)
    run(at)
    at.button(key="edit_remove").click()
    run(at)
    assert _counts(at) == f"{n} chunks (base {n}): no edits"

    # A base cut removed: the two chunks join.
    first_cut = base.chunks[1].start
    _cut_picker(at).set_value(first_cut)
    run(at)
    at.button(key="edit_remove").click()
    run(at)
    assert _counts(at) == f"{n - 1} chunks (base {n}): 1 cut removed"
    assert at.session_state["configs"][-1].config.params_dict["edits"] == f"-{first_cut}"
    # The card on Compare names the copy by its base and carries the run report.
    at.switch_page(COMPARE)
    run(at)
    captions = [c.value for c in at.caption]
    assert "B = A, edited: 1 cut removed · tokenizer cl100k" in captions
    assert "recursive(chunk_overlap=0, chunk_size=120) · cl100k: 1 cut removed" in captions  # its run report


def test_no_edited_copy_says_how_to_make_one_and_makes_one() -> None:
    doc = load_sample("technical")
    at = open_page(EDIT, doc=doc, configs=CONFIGS)
    (info,) = at.info
    assert "Edit a copy" in info.value and "Compare" in info.value
    assert at.selectbox(key="edit_from").value == 0
    at.button(key="edit_make").click()
    run(at)
    assert [e.tag for e in at.session_state["configs"]] == ["A", "B"]
    assert is_edited(at.session_state["configs"][1].config)


def _open_upload(at: AppTest, name: str, data: bytes) -> AppTest:
    gen = at.session_state["ses_gen"] if "ses_gen" in at.session_state else 0
    at.file_uploader(key=f"ses_open_{gen}").set_value((name, data, "application/json"))
    return run(at)


def test_a_session_round_trip_keeps_the_edits(data_dir: Path) -> None:
    doc = load_sample("technical")
    at = _copy(doc)
    at.number_input(key="edit_sentence").set_value(3)
    run(at)
    at.button(key="edit_add").click()
    run(at)
    before = _counts(at)
    edited = at.session_state["configs"][-1]
    at.text_input(key="ses_name").set_value("edited")
    run(at)
    at.button(key="ses_save").click()
    run(at)
    text = (data_dir / "sessions" / "edited.json").read_text(encoding="utf-8")

    fresh = open_page("pages/document.py")
    _open_upload(fresh, "edited.json", text.encode())
    assert not fresh.error, [e.value for e in fresh.error]
    assert [(e.tag, e.config) for e in fresh.session_state["configs"]] == [("A", CONFIGS[0].config),
                                                                          ("B", edited.config)]
    fresh.switch_page(EDIT)
    run(fresh)
    assert _counts(fresh) == before  # the edits came back, as one undo step's state
    assert fresh.button(key="edit_undo").disabled


def test_the_curve_shows_when_the_document_is_scored_and_never_starts_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = load_sample("technical")
    at = _copy(doc)
    (info,) = at.info
    assert info.value == "Score the document on the Meta-Chunking page to see where the model would cut."
    assert len(at.get("plotly_chart")) == 0 and "edit_minima" not in [t.key for t in at.toggle]
    assert "ppl_score_job" not in at.session_state and "edit_lm_job" not in at.session_state  # no model run

    scores = PPLScores.build(doc, fake_token_scores(doc.text), "fake", "fake model")
    patch_everywhere(monkeypatch, "backend.lab.ppl.held_scores", lambda held, d, models: scores)
    run(at)
    assert not at.info
    (chart,) = at.get("plotly_chart")
    assert ("Per-sentence mean NLL under fake model, sentences of this window. Click a point to cut before its "
            "sentence.") in [c.value for c in at.caption]
    at.toggle(key="edit_minima").set_value(True)
    run(at)
    (chart,) = at.get("plotly_chart")
    assert '"perplexity minimum"' in chart.proto.spec


TINY = (
    "The cat sat on the mat. It was warm by the fire. Then the <b>dog</b> came & barked loudly! "
    "Stock prices fell sharply on Monday. Investors worried about inflation. The central bank said nothing. "
    "Meanwhile, the cat went back to sleep. It dreamed of <script>fish</script>. "
    "Quantum chromodynamics describes the strong force. Gluons bind quarks together."
)


def test_edit_a_copy_of_the_meta_chunking_setting_reads_its_base_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model-backed base: the PPL chunker's cut of the cached scores, no model run; the curve beside the text."""
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CHUNKLAB_LM", raising=False)
    doc = Document.from_text(TINY, source="tiny.txt")
    document_token_scores(doc.text, load_scorer(None), cache=default_cache())
    at = open_page("pages/ppl.py", doc=doc, configs=[])
    at.button(key="ppl_edit_copy").click()
    run(at)
    assert at.title[0].value == "Edit"
    (copy,) = at.session_state["configs"]
    state = EditState.of(copy.config)
    assert state.base.name.startswith("ppl") and state.doc_id == doc.id
    at.switch_page(EDIT)
    run(at)
    edited, base = _counts(at).split(":")[0].split(" chunks (base ")
    assert edited == base.rstrip(")")
    assert len(at.get("plotly_chart")) == 1  # the Meta-Chunking page's cached scores, beside the text
    assert "ppl_score_job" not in at.session_state and "edit_lm_job" not in at.session_state
    cut_sentences = {int(label.rsplit("sentence ", 1)[1].split(" ")[0]) for label in _cut_picker(at, 0).options}
    free = min(set(range(2, len(doc.sentences) + 1)) - cut_sentences)
    at.number_input(key="edit_sentence").set_value(free)
    run(at)
    at.button(key="edit_add").click()
    run(at)
    assert _counts(at) == f"{int(edited) + 1} chunks (base {edited}): 1 cut added"
    assert "edit_lm_job" not in at.session_state


def test_an_edited_copy_exports_under_a_short_name() -> None:
    doc = load_sample("technical")
    state = EditState.of(edit_copy(CONFIGS[0].config, doc)).pushed(f"-{doc.sentences[3].start},+{doc.sentences[4].start}")
    chunking = run_chunker(doc, state.config)
    assert export_stem("My report.pdf", "C", chunking) == "My-report__C-manual-recursive-1added-1removed"


def test_a_copy_with_an_edit_outside_the_document_is_a_one_line_error() -> None:
    doc = load_sample("technical")
    copy = edit_copy(CONFIGS[0].config, doc)
    far = ConfigEntry(1, "B", normalized_config("manual", {**copy.params_dict, "edits": "+99999999"}))
    at = open_page(EDIT, doc=doc, configs=[*CONFIGS, far])
    assert not at.exception
    assert [e.value for e in at.error] == [
        f"B cannot be edited here: manual: edit +99999999 is outside the document: offsets go from 0 to {len(doc.text):,}"
    ]
