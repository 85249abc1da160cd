"""The Compare page's Curves section with ``AppTest``: a semantic configuration's curve, none for recursive.

The semantic configuration runs in the page's background job (the bundled MiniLM), then its
curve is read from the output cache; the document's HTML reaches the hover labels escaped.
"""

from __future__ import annotations

import json
import uuid

import pytest
from streamlit.testing.v1 import AppTest

from backend.chunking import ConfigEntry
from backend.text.document import Document
from components.state import normalized_config
from tests.support.apptest import open_page
from tests.support.apptest import run as _run
from tests.support.apptest import wait_job as _wait

TEXT = (
    "The cat sat on the mat. It was warm by the fire. Then the <b>dog</b> came & barked loudly! "
    "Stock prices fell sharply on Monday. Investors worried about inflation. The central bank said nothing. "
    "Meanwhile, the cat went back to sleep. It dreamed of <script>fish</script>. "
    "Quantum chromodynamics describes the strong force. Gluons bind quarks together."
)


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory):
    """One output cache folder for the module, and the default models."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path_factory.mktemp("curves-cache")))
    mp.delenv("CHUNKLAB_LM", raising=False)
    mp.delenv("CHUNKLAB_EMBEDDER", raising=False)
    yield
    mp.undo()


def _open(doc: Document, configs: list[tuple[str, dict]]) -> AppTest:
    """The app on the Compare page with ``doc`` and ``configs`` (uids 0, 1, …)."""
    entries = [
        ConfigEntry(i, "ABCDEFGH"[i], normalized_config(name, params))
        for i, (name, params) in enumerate(configs)
    ]
    return open_page("pages/compare.py", doc, entries)


def _curve_charts(at: AppTest) -> dict[str, dict]:
    """The Curves section's figures by chart key (``cmp_curve_<uid>``)."""
    out = {}
    for chart in at.get("plotly_chart"):
        ident = chart.proto.id
        if "cmp_curve_" in ident:
            out["cmp_curve_" + ident.rsplit("cmp_curve_", 1)[1]] = json.loads(chart.proto.spec)
    return out


def _texts(at: AppTest) -> str:
    return " ".join(m.value for m in at.caption)


def test_semantic_configuration_gets_a_curve_and_recursive_none() -> None:
    doc = Document.from_text(f"Curves {uuid.uuid4().hex[:8]}. " + TEXT, source="curves.txt")
    at = _open(doc, [("recursive", {"chunk_size": 30, "chunk_overlap": 0}), ("semantic", {"amount": 70})])
    job = at.session_state["cmp_embedder_job"]  # the embedder runs in a job, never inline
    if job.running:
        assert "cmp_curve_1" not in _curve_charts(at)
        assert "Waiting for the model run" in _texts(at)
    job = _wait(at, "cmp_embedder_job")
    assert job.state == "done", job.error
    charts = _curve_charts(at)
    assert list(charts) == ["cmp_curve_1"]  # semantic has a curve, recursive none
    figure = charts["cmp_curve_1"]
    assert "B · semantic" in figure["layout"]["legend"]["title"]["text"]  # the legend's heading: never overlapped
    names = [t.get("name") for t in figure["data"]]
    assert any(n and n.startswith("threshold: 70th percentile") for n in names)
    assert "Show curves" in [t.label for t in at.toggle]

    # The hover previews are the sentences, HTML-escaped.
    hovers = json.dumps([t.get("customdata") for t in figure["data"]])
    assert "&lt;b&gt;dog&lt;/b&gt; came &amp; barked" in hovers
    assert "<b>dog" not in hovers and "<script>" not in hovers

    # Reopened with the embeddings cached: the curve at once, no job.
    again = _open(doc, [("semantic", {"amount": 70})])
    assert "cmp_embedder_job" not in again.session_state
    assert list(_curve_charts(again)) == ["cmp_curve_0"]


def test_only_recursive_configurations_have_no_curves_section() -> None:
    doc = Document.from_text(TEXT, source="plain.txt")
    at = _open(doc, [("recursive", {"chunk_size": 30, "chunk_overlap": 0}), ("fixed_token", {"chunk_size": 20})])
    assert _curve_charts(at) == {}
    assert "Curves" not in [h.value for h in at.subheader]
    assert len(at.get("plotly_chart")) == 2  # strip and histogram only


def test_toggle_hides_the_curves() -> None:
    doc = Document.from_text(f"Toggle {uuid.uuid4().hex[:8]}. " + TEXT, source="toggle.txt")
    at = _open(doc, [("semantic", {})])
    if "cmp_embedder_job" in at.session_state:
        _wait(at, "cmp_embedder_job")
    assert "cmp_curve_0" in _curve_charts(at)
    at.toggle(key="cmp_show_curves").set_value(False)
    _run(at)
    assert _curve_charts(at) == {}
    assert not at.error


def test_curve_chart_draws_every_kind_of_threshold_and_escapes() -> None:
    import numpy as np

    from backend.curves import Curve
    from backend.figures.curves import curve_chart

    text = "a <b>x</b>. b & c. d. e."
    units = ((0, 11), (12, 18), (19, 21), (22, 24))
    drops = curve_chart(
        Curve(units, np.array([3.0, 1.0, 2.0, np.nan]), "sentence", "mean token NLL", "sentence",
              boundaries=(1,), drop_threshold=0.5, candidates=(1,)),
        text, "#2563eb", "A · <ppl>",
    )
    names = [t.name for t in drops.data]
    assert "θ = 0.5 above a minimum" in names and "chunk boundary" in names
    bars = next(t for t in drops.data if t.name.startswith("θ"))
    assert list(bars.y[:2]) == [1.0, 1.5]  # from the minimum up by θ
    line = next(t for t in drops.data if t.name == "mean token NLL")
    assert line.customdata[0][0] == "a &lt;b&gt;x&lt;/b&gt;." and line.y[3] is None
    assert drops.layout.legend.title.text == "A · &lt;ppl&gt;" and drops.layout.title.text is None

    series = curve_chart(
        Curve(units, np.array([0.2, -0.1, 0.4, 0.0]), "sentence", "margin", "gap after sentence",
              boundaries=(2,), threshold_series=np.array([0.0, 0.0, 0.1, 0.2]), threshold_label="adaptive"),
        text, "#d97706", "B",
    )
    assert [t.name for t in series.data].count("adaptive") == 1
    flat = curve_chart(
        Curve(units[:3], np.array([0.1, 0.5, 0.2]), "sentence", "distance", "gap after sentence",
              boundaries=(1,), threshold=0.3, threshold_label="threshold: 95th percentile"),
        text, "#059669", "C",
    )
    hline = next(t for t in flat.data if t.name == "threshold: 95th percentile")
    assert list(hline.y) == [0.3, 0.3]


def test_while_the_first_pass_runs_compare_draws_the_part_already_scored(monkeypatch) -> None:
    """A slow (fake) model run for a ppl configuration publishes half its token scores: a partial curve and caption."""
    import threading
    import time

    import numpy as np

    import components.lm_runs as lm_runs
    from backend.jobs import start_job
    from backend.models.scoring import partial_sentence_scores
    from backend.models.types import PartialTokenScores
    from tests.support.fake_scores import fake_token_scores

    doc = Document.from_text(f"Partial {uuid.uuid4().hex[:8]}. " + TEXT, source="partial.txt")
    ts = fake_token_scores(doc.text)
    half = len(ts) // 2
    release = threading.Event()

    def slow_start(plan):
        def run(progress):
            nll = ts.nll.copy()
            nll[half:] = np.nan
            progress.publish(PartialTokenScores(type(ts)(ts.starts, ts.ends, nll, ts.window), half, doc.text))
            while not release.wait(0.05):
                progress(half, len(ts))  # honours a cancel
            return []

        return start_job(plan.title, run, signature=plan.signature, model=plan.model)

    monkeypatch.setattr(lm_runs, "start_plan", slow_start)
    try:
        at = _open(doc, [("ppl", {"threshold": 0.5})])
        job = at.session_state["cmp_lm_job"]
        t0 = time.perf_counter()
        while job.partial is None and time.perf_counter() - t0 < 30:
            time.sleep(0.05)
        _run(at)
        assert job.running
        n = len(partial_sentence_scores(doc, job.partial))
        assert 0 < n < len(doc.sentences)
        assert any("cmp_partial_curve" in c.proto.id for c in at.get("plotly_chart"))
        assert f"Scored {n:,} of {len(doc.sentences):,} sentences" in _texts(at)
    finally:
        release.set()
        job.cancel()
