"""Demo mode with ``AppTest``: every page draws its model-backed content from the shipped cache, no model loads.

The Summary is complete whichever page is visited first: BC, CS, DS and the retrieval numbers
(the demo's benchmark runs as demo mode opens, from the cache), the verdict, no "not computed
yet" and no Compute button.

``CHUNKLAB_DEMO=1`` with an empty main cache and an empty Chroma folder: the model outputs
can only come from ``assets/demo/cache``. The loaders of the language model and the embedder
raise, so a page (or a job) that tried to load one fails the test.
"""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from backend.lab.runs import MODEL_GROUPS
from backend.models.cache import DEMO_CACHE_DIR
from backend.samples import DEMO
from components.keys import BENCHMARK, BENCHMARK_JOB, COMPARE, CONFIGS, DEMO_MODE, PPL, QUALITY, RETRIEVAL
from tests.support.apptest import run, start_app, wait_job
from tests.support.demo import demo_environment

pytestmark = pytest.mark.skipif(not any(DEMO_CACHE_DIR.glob("*.entry")), reason="no shipped demo cache")


@pytest.fixture()
def demo_app(tmp_path, monkeypatch) -> AppTest:
    """The app in demo mode, on its first page, with every model loader refusing."""
    demo_environment(monkeypatch, tmp_path)
    return start_app()


def _visit(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    return run(at)


def _frame(at: AppTest, column: str):
    """The one data frame with ``column`` (data frames are not found by key)."""
    (frame,) = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def _tour(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if "**Tour**" in c.value]


def test_every_page_draws_from_the_shipped_cache_without_a_model(demo_app: AppTest):
    at = demo_app
    assert [e.config.name for e in at.session_state[CONFIGS]] == [name for name, _ in DEMO.configs]
    assert at.session_state["doc"].source == "narrative_clockmaker.txt" and _tour(at)

    _visit(at, "pages/compare.py")
    assert len(_frame(at, "mean_tokens")) == len(DEMO.configs)  # the model-backed ones too
    assert not any(COMPARE.group_job(g) in at.session_state for g in MODEL_GROUPS)  # no model run started

    _visit(at, "pages/ppl.py")
    assert at.session_state[PPL("scores")] is not None and PPL("score_job") not in at.session_state

    _visit(at, "pages/quality.py")
    quality = _frame(at, "bc")
    assert len(quality) == len(DEMO.configs) and quality[["bc", "ds"]].notna().all().all()  # the default metrics
    assert QUALITY("job") not in at.session_state

    _visit(at, "pages/retrieval.py")
    search = wait_job(at, RETRIEVAL("search_job"), timeout=120)
    assert search.state == "done", search.error
    assert len(_frame(at, "iou")) == len(DEMO.configs)  # the demo answer is marked

    _visit(at, "pages/benchmark.py")
    bench = at.session_state[BENCHMARK("job")]
    assert bench.state == "done" and bench.label == "from the cache", bench.error  # run as the demo opened
    summary = _frame(at, "chunker")
    assert len(summary) == len(DEMO.configs) and (summary["texts embedded"] == 0).all()  # Chroma filled from the cache

    _visit(at, "pages/models.py")
    assert _tour(at)

    _assert_complete_summary(_visit(at, "pages/summary.py"))


def _assert_complete_summary(at: AppTest) -> None:
    """The Summary shows every number — BC, CS, DS, recall, IoU — and the verdict, and offers no job."""
    texts = [e.value for kind in ("markdown", "caption", "error", "warning", "info") for e in getattr(at, kind)]
    assert not [t for t in texts if "not computed yet" in t.lower()], texts
    # No job to start: no Compute or Run button, and no estimate beyond seconds (the model-free question panel's is).
    assert not [
        b.label for b in at.button
        if "Compute" in b.label or "Run" in b.label or re.search(r"\b(about \d+ min|\d+ h)\b", b.label)
    ]
    frames = [getattr(d.value, "data", d.value) for d in at.dataframe]
    (quality,) = [f for f in frames if "bc" in f.columns]
    (retrieval,) = [f for f in frames if "iou" in f.columns]
    table = quality.join(retrieval.drop(columns=[c for c in retrieval.columns if c in quality.columns]))
    assert len(table) == len(DEMO.configs)
    for metric in ("bc", "cs", "ds", "recall", "precision", "iou", "precision_omega"):
        assert not table[metric].astype(str).str.contains("not computed").any(), (metric, table[metric].tolist())
    verdict = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert any("IoU" in line for line in verdict) and any("BC" in line for line in verdict)
    # The sample's own bundled set, on this document (Markdown-escaped).
    heading = " ".join(m.value for m in at.markdown if m.value.startswith("**Retrieval on this document"))
    assert "12 questions of the bundled English narrative set" in heading.replace("\\", ""), heading


def test_the_summary_first_is_complete(demo_app: AppTest):
    at = _visit(demo_app, "pages/summary.py")
    assert at.session_state[BENCHMARK_JOB].state == "done"
    _assert_complete_summary(at)


def test_the_tour_hides_for_the_session(demo_app: AppTest):
    at = demo_app
    at.button(key=DEMO_MODE("tour_hide")).click()
    run(at)
    assert not _tour(at)
    assert not _tour(_visit(at, "pages/compare.py"))


def test_the_tune_page_opens_on_the_demo_story_without_loading_a_model(demo_app: AppTest):
    at = _visit(demo_app, "pages/tune.py")
    assert not at.exception and not at.error
    assert [t.value for t in at.title] == ["Tune"] and "tune_job" not in at.session_state  # nothing starts by itself
    assert any("narrative_clockmaker.txt" in m.value.replace("\\", "") for m in at.markdown)
