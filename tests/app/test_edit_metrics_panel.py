"""The Edit page's metrics panel (components/edit_metrics.py) with ``AppTest``, the bundled SmolLM2 and MiniLM.

The base's BC is scored first (as the Quality page would); the panel then shows the statistics
at once, starts the scoring of the edit's few pairs by itself and shows BC of both exactly;
retrieval waits for a click on the session's question set and shows the change.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.figures.markdown import md_text
from backend.lab.edit import EditState, add_cut, edit_copy
from backend.lab.edit_metrics import NO_QUESTION_SET, edit_stats
from backend.metrics.scores import score_chunkings
from backend.models.cache import default_cache
from backend.models.scorer import load_scorer
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.text.document import Document
from components.edit_metrics import QUALITY_JOB, RETRIEVAL_JOB
from components.keys import QSET
from components.settings import setting_key
from tests.conftest import ROOT
from tests.support.apptest import TIMEOUT, isolated_lab
from tests.support.apptest import run as _run
from tests.support.apptest import wait_job as _wait

TEXT = " ".join(f"Sentence number {i} tells about topic {i % 5} & more." for i in range(12))
BASE = ChunkerConfig.make("recursive", {"chunk_size": 40, "chunk_overlap": 0})


@pytest.fixture(scope="module", autouse=True)
def module_setup(tmp_path_factory):
    with isolated_lab(tmp_path_factory.mktemp("edit-metrics-data")):
        yield


@pytest.fixture(scope="module")
def edit():
    """The document, the base's entry (its BC in the output cache) and the copy's with one cut added in chunk 2."""
    doc = Document.from_text(TEXT, source="notes/<edit>.txt")
    base = run_chunker(doc, BASE)
    spans = [(c.start, c.end) for c in base.chunks]
    out = add_cut(EditState.of(edit_copy(BASE, doc)), doc, spans, base.chunks[1].start + 40)
    assert out.changed, out.message
    score_chunkings([base], scorer=load_scorer(None), embedder=None, complete=False, window=None,
                    cache=default_cache())
    return doc, ConfigEntry(0, "A", BASE), ConfigEntry(1, "B", out.state.config)


def _open(edit, qset=None) -> AppTest:
    doc, base, edited = edit
    at = AppTest.from_file(str(ROOT / "tests" / "support" / "edit_metrics_app.py"), default_timeout=TIMEOUT)
    at.session_state["doc"] = doc
    at.session_state["edit_test_base"] = base
    at.session_state["edit_test_edited"] = edited
    at.session_state[setting_key("quality", "metrics")] = ["bc"]
    if qset is not None:
        at.session_state[QSET] = qset
    return _run(at)


def _markdown(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown]


def test_statistics_at_once_and_the_edit_scored_by_itself(edit) -> None:
    doc, base, edited = edit
    n_base, n_edited = len(run_chunker(doc, base.config)), len(run_chunker(doc, edited.config))
    assert n_edited == n_base + 1
    at = _open(edit)
    stats = edit_stats(doc, run_chunker(doc, base.config), run_chunker(doc, edited.config))
    assert stats.summary.startswith(f"notes/<edit>.txt: chunks {n_base} → {n_edited} · mean tokens ")
    assert _markdown(at)[0] == f"**{md_text(stats.summary)}**"  # the document's name escaped
    assert at.dataframe[0].value["metric"].tolist()[:2] == ["chunks", "mean tokens"]
    # The base's BC is known; the copy's 5 new pairs start scoring without a click.
    assert QUALITY_JOB in at.session_state and [b.label for b in at.button] == ["Cancel"]
    _wait(at, QUALITY_JOB)
    assert QUALITY_JOB not in at.session_state  # folded into the store
    line = next(m for m in _markdown(at) if m.startswith("BC "))
    assert "≈" not in line and "–" not in line, line
    captions = [c.value for c in at.caption]
    assert md_text("notes/<edit>.txt: 5 pairs changed by the edits; every score known") in captions
    assert md_text(NO_QUESTION_SET) in captions


def test_retrieval_is_re_evaluated_on_a_click(edit) -> None:
    doc, _base, _edited = edit
    qset = QuestionSet.from_document(doc, [Question("What does sentence 4 tell?", (Reference(doc.text[:60], 0, 60),), "")])
    at = _open(edit, qset)
    button = next(b for b in at.button if b.label == "Re-evaluate on Session set (1 question)")
    button.click()
    _run(at)
    _wait(at, RETRIEVAL_JOB)
    line = next(m for m in _markdown(at) if m.startswith(md_text("Session set (1 question): IoU ")))
    assert " → " in line and "recall" in line and "precision" in line
    assert line.endswith(md_text(" (the edited copy's index embedded 2 chunks)")), line


def test_a_large_scoring_job_waits_for_a_click_with_its_cost() -> None:
    text = " ".join(f"Line {i} of a longer text speaks of item {i * 7 % 11}." for i in range(40))
    doc = Document.from_text(text, source="long.txt")
    small = ChunkerConfig.make("recursive", {"chunk_size": 12, "chunk_overlap": 0})
    base = run_chunker(doc, small)
    out = add_cut(EditState.of(edit_copy(small, doc)), doc, [(c.start, c.end) for c in base.chunks],
                  base.chunks[2].start + 20)
    assert len(base) >= 33, len(base)  # more than AUTO_PAIRS pairs, none scored
    at = _open((doc, ConfigEntry(0, "A", small), ConfigEntry(1, "B", out.state.config)))
    assert QUALITY_JOB not in at.session_state
    labels = [b.label for b in at.button]
    assert len(labels) == 1 and labels[0].startswith("Score with ") and " pairs" in labels[0], labels
