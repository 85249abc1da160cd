"""The Meta-Chunking (PPL) page with ``AppTest``: scoring job, θ controls, target length, margin view, Compare.

Every test uses the bundled SmolLM2 on documents of a few sentences, and one output cache
for the module: the shared document is scored once (by the ``scored`` fixture, through the
backend), so the tests that only move controls start from a cache hit.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from streamlit.testing.v1 import AppTest

from backend.text.document import Document
from tests.support.apptest import open_page, wait_job
from tests.support.apptest import run as _run

TEXT = (
    "The cat sat on the mat. It was warm by the fire. Then the <b>dog</b> came & barked loudly! "
    "Stock prices fell sharply on Monday. Investors worried about inflation. The central bank said nothing. "
    "Meanwhile, the cat went back to sleep. It dreamed of <script>fish</script>. "
    "Quantum chromodynamics describes the strong force. Gluons bind quarks together."
)
_BADGE = re.compile(r'title="chunk (\d+) · (\d+) tokens · chars ([\d,]+)–([\d,]+)"')


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory):
    """One output cache folder for the module's tests (default_cache() follows CHUNKLAB_CACHE_DIR)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path_factory.mktemp("ppl-cache")))
    mp.delenv("CHUNKLAB_LM", raising=False)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def scored() -> Document:
    """TEXT as a document, its token scores in the output cache (scored through the backend)."""
    from backend.models.cache import default_cache
    from backend.models.scorer import load_scorer
    from backend.models.scoring import document_token_scores

    doc = Document.from_text(TEXT, source="tiny.txt")
    document_token_scores(doc.text, load_scorer(None), cache=default_cache())
    return doc


def _open(doc: Document, page: str = "pages/ppl.py") -> AppTest:
    """The app with ``doc`` as the current document, switched to ``page``."""
    return open_page(page, doc)


def _wait(at: AppTest, key: str, timeout: float = 120) -> object:
    return wait_job(at, key, timeout)


def _has(at: AppTest, key: str) -> bool:
    try:
        at.get_by_key(key)
    except KeyError:
        return False
    return True


def _stats(at: AppTest) -> str:
    (line,) = [m.value for m in at.markdown if "re-chunked in" in m.value]
    return line


def _n_chunks(at: AppTest) -> int:
    return int(re.match(r"\*\*([\d,]+)\*\* chunk", _stats(at)).group(1).replace(",", ""))


def _chunks(at: AppTest, view: str = "ppl_view") -> list[tuple[int, int, int]]:
    """``(start, end, tokens)`` of every chunk drawn in a document view (from the badges' titles)."""
    html = "".join(h.value for h in at.get_by_key(view).html)
    return [(int(a.replace(",", "")), int(b.replace(",", "")), int(n)) for _, n, a, b in _BADGE.findall(html)]


def _set_theta(at: AppTest, theta: float) -> None:
    at.number_input(key="ppl_threshold").set_value(theta)
    _run(at)


def _no_model_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every model call fail the test: the controls must only re-chunk cached values."""
    from backend.models.scorer import LocalScorer

    def refuse(*args, **kwargs):
        raise AssertionError("the page called the model")

    for name in ("token_nll", "conditional_nll", "next_token_probs"):
        monkeypatch.setattr(LocalScorer, name, refuse)


def test_uncached_document_is_scored_in_a_job_then_shows_the_curve() -> None:
    doc = Document.from_text(f"Run {uuid.uuid4().hex[:8]} starts here. " + TEXT, source="fresh.txt")
    at = _open(doc)
    job = at.session_state["ppl_score_job"]
    assert job.meta["signature"][0] == doc.id
    if job.running:  # the progress view: bar, ETA and a Cancel button
        assert at.button(key="ppl_score_cancel")
        assert not _has(at, "ppl_view")
    job = _wait(at, "ppl_score_job")
    assert job.state == "done", job.error
    assert not at.error
    assert "SmolLM2" in "".join(t.value for t in at.text) and "(default)" in "".join(t.value for t in at.text)
    assert len(at.get("plotly_chart")) == 3  # values, drops histogram, θ curve
    assert at.session_state["ppl_scores"].doc_id == doc.id
    assert len(at.session_state["ppl_scores"].sentences) == len(doc.sentences)
    assert _chunks(at) and _chunks(at)[0][0] == doc.sentences[0].start


def test_a_cached_document_opens_without_a_job(scored: Document) -> None:
    at = _open(scored)
    assert "ppl_score_job" not in at.session_state
    assert at.session_state["ppl_scores"].doc_id == scored.id
    assert float(at.select_slider(key="ppl_threshold_slider").options[-1]) > 0
    assert _n_chunks(at) >= 1


def _slider(at: AppTest):
    return at.select_slider(key="ppl_threshold_slider")


def test_theta_input_and_slider_rechunk_without_a_model_call(scored: Document, monkeypatch) -> None:
    at = _open(scored)
    _no_model_calls(monkeypatch)
    _low, high = float(_slider(at).options[0]), float(_slider(at).options[-1])
    assert high < 100  # from this document's drops, not a fixed 0..1 (nor the PPL scale)

    _set_theta(at, 0.0)
    many = _n_chunks(at)
    assert _slider(at).value == 0.0
    _set_theta(at, high)
    assert _n_chunks(at) == 1  # past the largest drop: no boundary
    assert _slider(at).value == high
    assert many > 1

    # The slider writes the exact input back.
    options = [float(o) for o in _slider(at).options]
    mid = options[len(options) // 2]
    _slider(at).set_value(mid)
    _run(at)
    assert at.number_input(key="ppl_threshold").value == mid == _slider(at).value
    assert 1 <= _n_chunks(at) <= many

    # A θ between two slider steps is kept exactly; the chunks follow it, and the slider stands on it.
    from backend.chunkers.meta.algorithms import boundary_candidates, find_minima, sentence_values

    values = sentence_values(at.session_state["ppl_scores"].nll, "nll")
    drops = sorted(c.drop for c in boundary_candidates(values, "reference"))
    exact = drops[0] + 1e-7  # just above the smallest drop: that minimum is no longer a boundary
    _set_theta(at, exact)
    assert at.number_input(key="ppl_threshold").value == pytest.approx(exact, abs=1e-12)
    assert _slider(at).value == at.number_input(key="ppl_threshold").value
    assert _n_chunks(at) == len(find_minima(values, exact, "reference")) + 1
    assert "ppl_score_job" not in at.session_state  # no job, no model call: only re-chunking


def test_theta_options_hold_the_exact_theta() -> None:
    from components.ppl import theta_label, theta_options

    # The case: steps of 0.04 pass 0.48 and 0.52; θ = 0.5 gets its own position.
    options = theta_options(0.5, 0.0, 0.2, 0.04)
    assert options == [0.0, 0.04, 0.08, 0.12, 0.16, 0.2, 0.5]
    assert theta_options(0.5, 0.0, 0.56, 0.04)[12:15] == [0.48, 0.5, 0.52]
    assert theta_options(0.08, 0.0, 0.2, 0.04) == [0.0, 0.04, 0.08, 0.12, 0.16, 0.2]  # on the grid: no extra
    assert theta_options(-0.5, -0.04, 0.08, 0.04) == [-0.5, -0.04, 0.0, 0.04, 0.08]
    assert theta_options(0.5, 0.0, 0.1, 0.04) == [0.0, 0.04, 0.08, 0.1, 0.5]  # the high end even off the grid
    assert [theta_label(t) for t in (0.5, 0.48, 0.1 + 0.2, -0.5)] == ["0.5", "0.48", "0.30000000000000004", "-0.5"]


def test_the_slider_shows_the_exact_theta_in_use(scored: Document, monkeypatch) -> None:
    at = _open(scored)
    _no_model_calls(monkeypatch)
    slider = _slider(at)
    # Opened at the default θ = 0.5: the slider stands on 0.5 and reads "0.5", whatever its step.
    assert at.number_input(key="ppl_threshold").value == 0.5
    assert slider.value == 0.5 and slider.format_func(slider.value) == "0.5" and "0.5" in slider.options
    step = float(slider.options[1]) - float(slider.options[0])
    _set_theta(at, 0.1237)  # between two steps
    assert step > 0.0001
    _set_theta(at, 0.123)
    slider = _slider(at)
    assert slider.value == 0.123 and slider.format_func(slider.value) == "0.123"
    assert "0.1237" not in slider.options  # positions: the grid and the θ in use, nothing older
    # A move of the slider sets θ to the very value shown; the slider is not written back (key presses
    # the browser sends meanwhile would be undone).
    step_up = slider.options[slider.options.index("0.123") + 1]
    slider.set_value(float(step_up))
    _run(at)
    assert at.number_input(key="ppl_threshold").value == float(step_up) == _slider(at).value
    assert not _slider(at).proto.set_value


def test_value_and_rule_switches_change_the_slider_range(scored: Document, monkeypatch) -> None:
    at = _open(scored)
    _no_model_calls(monkeypatch)
    nll_high = float(_slider(at).options[-1])
    at.segmented_control(key="ppl_value").set_value("ppl")
    _run(at)
    assert float(_slider(at).options[-1]) > nll_high  # perplexity drops are larger
    at.segmented_control(key="ppl_rule").set_value("paper")
    _run(at)
    _set_theta(at, -0.5)  # a negative θ is allowed (the paper rule then cuts at non-minima too)
    assert _slider(at).value == -0.5 and _slider(at).format_func(-0.5) in _slider(at).options
    assert _n_chunks(at) >= 1
    assert not at.error


def test_target_length_keeps_chunks_within_the_target(scored: Document, monkeypatch) -> None:
    from backend.chunkers.meta.algorithms import sentence_values
    from backend.chunkers.meta.chunkers import ppl_spans
    from backend.tokenizers import get_tokenizer

    at = _open(scored)
    _no_model_calls(monkeypatch)
    _set_theta(at, 0.0)
    target = 25
    at.number_input(key="ppl_target_length").set_value(target)
    _run(at)
    assert at.toggle(key="ppl_overlap").disabled  # overlap does not combine with a target
    assert at.button(key="ppl_add").label == "Add ppl_combined to Compare"
    chunks = _chunks(at)
    values = sentence_values(at.session_state["ppl_scores"].nll, "nll")
    meta = {(s, e) for s, e, _ in ppl_spans(scored, values, get_tokenizer("cl100k"), threshold=0.0)}
    assert len(chunks) > 1
    for start, end, tokens in chunks:
        assert tokens <= target or (start, end) in meta, (start, end, tokens)
    assert sum(1 for _, _, n in chunks if n > target) == sum(1 for s, e, n in ppl_spans(
        scored, values, get_tokenizer("cl100k"), threshold=0.0) if n > target)


def test_overlap_add_to_compare_and_exports(scored: Document, monkeypatch) -> None:
    from backend.chunkers.meta.results import values_csv

    at = _open(scored)
    _no_model_calls(monkeypatch)
    _set_theta(at, 0.0)
    at.toggle(key="ppl_overlap").set_value(True)
    _run(at)
    chunks = _chunks(at)
    assert any(a[1] > b[0] for a, b in zip(chunks, chunks[1:]))  # a boundary sentence is in two chunks
    assert 'class="cl-ov"' in "".join(h.value for h in at.get_by_key("ppl_view").html)
    assert {b.key for b in at.get("download_button")} >= {"ppl_dl_values", "ppl_dl_chunks"}

    at.button(key="ppl_add").click()
    _run(at)
    added = at.session_state["configs"][-1].config
    assert added.name == "ppl_overlap"
    assert added.params_dict == {"threshold": 0.0, "rule": "reference", "value": "nll"}

    # Compare shows it at once: the scores are cached, no job starts.
    at.switch_page("pages/compare.py")
    _run(at)
    assert "cmp_lm_job" not in at.session_state
    uid = at.session_state["configs"][-1].uid
    card = " ".join(c.value for c in at.get_by_key(f"cmp_card_{uid}").caption)
    assert f"**{len(chunks)}** chunks" in card

    # The per-sentence CSV: one row per sentence, the boundary flags where the chunks end.
    from backend.chunkers.meta.algorithms import boundary_candidates, find_minima, sentence_values

    scores = at.session_state["ppl_scores"]
    values = sentence_values(scores.nll, "nll")
    cands = boundary_candidates(values, "reference")
    kept = find_minima(values, 0.0, "reference")
    from backend.chunking import Chunk, ChunkerConfig, Chunking

    chunking = Chunking(ChunkerConfig.make("ppl"), tuple(Chunk(i, s, e, scored.text[s:e], n)
                                                         for i, (s, e, n) in enumerate(chunks)), 0.0, scored.id, len(TEXT))
    rows = values_csv(scores, values, cands, kept, chunking, "nll").splitlines()
    assert rows[0].startswith("index,start,end,tokens,nll_mean,ppl,nll,drop,boundary,chunk,text")
    assert len(rows) == 1 + len(scored.sentences)
    assert sum(int(r.split(",")[8]) for r in rows[1:]) == len(kept)


def test_compare_runs_an_uncached_ppl_configuration_in_a_job() -> None:
    doc = Document.from_text(f"Compare run {uuid.uuid4().hex[:8]}. " + TEXT, source="cmp.txt")
    at = _open(doc, "pages/compare.py")
    _run(at)
    assert "ppl · meta-chunking" in at.selectbox(key="cmp_new_chunker").options  # from the registry
    at.selectbox(key="cmp_new_chunker").set_value("ppl")
    _run(at)
    at.number_input(key="cmp_new_ppl_threshold").set_value(0.2)
    at.button(key="cmp_new_submit").click()
    _run(at)
    uid = at.session_state["configs"][-1].uid
    assert at.session_state["configs"][-1].config.name == "ppl"
    job = at.session_state["cmp_lm_job"]  # started on its own; the page did not wait for it
    if job.running:
        assert "Waiting for" in " ".join(c.value for c in at.get_by_key(f"cmp_card_{uid}").caption)
    job = _wait(at, "cmp_lm_job")
    assert job.state == "done", job.error
    card = " ".join(c.value for c in at.get_by_key(f"cmp_card_{uid}").caption)
    assert "chunks" in card and "Waiting" not in card
    assert not at.error


def test_margin_view_runs_on_a_tiny_document() -> None:
    doc = Document.from_text("Tea is hot. Rain fell on the roof. Stocks crashed today.", source="margin.txt")
    at = _open(doc)
    if "ppl_score_job" in at.session_state:
        _wait(at, "ppl_score_job")
    assert at.button(key="ppl_margin_run").label == "Run margin sampling (2 model calls)"
    at.button(key="ppl_margin_run").click()
    _run(at)
    job = _wait(at, "ppl_margin_job")
    assert job.state == "done", job.error
    steps = at.session_state["ppl_margin"].steps
    assert [s.index for s in steps] == [1, 2]
    assert all(-1 <= s.margin <= 1 for s in steps)
    assert steps[0].threshold == 0.0  # the adaptive threshold starts at 0
    assert len(at.get("plotly_chart")) == 4
    chunks = _chunks(at, "ppl_margin_view")
    assert len(chunks) == 1 + sum(s.split for s in steps)
    at.button(key="ppl_margin_add").click()
    _run(at)
    assert at.session_state["configs"][-1].config.name == "margin_sampling"

    # The other unit is another result: it needs its own run.
    at.segmented_control(key="ppl_margin_unit").set_value("sentence")
    _run(at)
    assert _has(at, "ppl_margin_run") and not _has(at, "ppl_margin_view")

    # Another session asking for the same margins reads them from the cache: no model call.
    again = _open(doc)
    again.button(key="ppl_margin_run").click()
    _run(again)
    _run(again)
    assert again.session_state["ppl_margin_job"].label == "from the cache"
    assert _chunks(again, "ppl_margin_view") == chunks


def test_bad_inputs_give_one_line_messages(scored: Document, monkeypatch) -> None:
    # No sentences: a message, no job.
    at = _open(Document.from_text("   \n  ", source="blank.txt"))
    assert [i.value for i in at.info] == ["This document has no sentences to score."]
    assert "ppl_score_job" not in at.session_state

    # A default model that does not exist: one line naming it, no job, no traceback.
    monkeypatch.setenv("CHUNKLAB_LM", "/no/such/model.gguf")
    at = _open(scored)
    (error,) = [e.value for e in at.error]
    assert "/no/such/model.gguf" in error and "\n" not in error
    assert "ppl_score_job" not in at.session_state
    monkeypatch.delenv("CHUNKLAB_LM")

    # Aiming at an unreachable length picks the nearest reachable θ.
    at = _open(scored)
    _no_model_calls(monkeypatch)
    at.number_input(key="ppl_aim").set_value(1_000_000)
    at.button(key="ppl_aim_apply").click()
    _run(at)
    assert _n_chunks(at) == 1
    assert any("aimed at 1,000,000" in t.value for t in at.toast)


def test_one_sentence_document_stays_one_chunk() -> None:
    doc = Document.from_text("Just one sentence here, nothing else.", source="one.txt")
    at = _open(doc)
    if "ppl_score_job" in at.session_state:
        _wait(at, "ppl_score_job")
    assert any("stays one chunk" in i.value for i in at.info)
    assert _n_chunks(at) == 1
    assert not at.error


def test_document_text_is_escaped(scored: Document) -> None:
    at = _open(scored)
    view = "".join(h.value for h in at.get_by_key("ppl_view").html)
    assert "&lt;b&gt;dog&lt;/b&gt; came &amp; barked" in view and "<b>dog</b>" not in view
    assert "&lt;script&gt;fish&lt;/script&gt;" in view and "<script>" not in view
    chart = at.get("plotly_chart")[0].proto.spec
    # Plotly's JSON writes "/" as \u002f: look for the escaped opening tag.
    assert "&lt;b&gt;dog" in chart and "<b>dog" not in chart and "<script>" not in chart


def test_compare_runs_an_embedder_chunker_in_a_job_then_from_the_cache() -> None:
    """semantic (needs the embedder) never runs inline: a job first, the output cache afterwards."""
    from backend.chunkers import ModelContext, make_chunker

    doc = Document.from_text(f"Semantic run {uuid.uuid4().hex[:8]}. " + TEXT, source="sem.txt")
    at = _open(doc, "pages/compare.py")
    at.selectbox(key="cmp_new_chunker").set_value("semantic")
    _run(at)
    at.button(key="cmp_new_submit").click()
    _run(at)
    uid = at.session_state["configs"][-1].uid
    config = at.session_state["configs"][-1].config
    assert config.name == "semantic"
    job = _wait(at, "cmp_embedder_job")
    assert job.state == "done", job.error
    want = make_chunker("semantic", config.params_dict).chunk(doc, ModelContext())
    card = " ".join(c.value for c in at.get_by_key(f"cmp_card_{uid}").caption)
    assert f"**{len(want)}** chunks" in card

    # A new session on the same document: served from the output cache, no job.
    again = _open(doc, "pages/compare.py")
    again.session_state["configs"] = at.session_state["configs"]
    _run(again)
    assert "cmp_embedder_job" not in again.session_state
    card = " ".join(c.value for c in again.get_by_key(f"cmp_card_{uid}").caption)
    assert f"**{len(want)}** chunks" in card


def test_while_the_first_pass_runs_the_page_draws_the_part_already_scored(monkeypatch) -> None:
    """A slow (fake) scoring job publishes the first half of its token scores: the page draws those sentences."""
    import threading

    import numpy as np

    import components.lm_runs as lm_runs
    from backend.chunkers.meta.results import PPLScores
    from backend.jobs import start_job
    from backend.models.scoring import partial_sentence_scores
    from backend.models.types import PartialTokenScores
    from tests.support.fake_scores import fake_token_scores

    doc = Document.from_text(f"Partial {uuid.uuid4().hex[:8]} starts here. " + TEXT, source="partial.txt")
    ts = fake_token_scores(doc.text)
    half = len(ts) // 2
    release = threading.Event()

    def slow_start(plan):
        def run(progress):
            nll = ts.nll.copy()
            nll[half:] = np.nan
            progress.publish(PartialTokenScores(type(ts)(ts.starts, ts.ends, nll, ts.window), half))
            progress(half, len(ts))
            while not release.wait(0.05):
                progress(half, len(ts))  # honours a cancel
            progress.publish(PartialTokenScores(ts, len(ts)))
            return PPLScores.build(doc, ts, plan.signature[1], "fake")

        return start_job(plan.title, run, signature=plan.signature, model=plan.model)

    monkeypatch.setattr(lm_runs, "start_plan", slow_start)
    try:
        at = _open(doc)
        job = at.session_state["ppl_score_job"]
        t0 = time.perf_counter()
        while job.partial is None and time.perf_counter() - t0 < 30:
            time.sleep(0.05)
        _run(at)
        assert job.running
        n = len(partial_sentence_scores(doc, job.partial))
        assert 0 < n < len(doc.sentences)
        assert at.button(key="ppl_score_cancel")  # the bar is still there
        charts = at.get("plotly_chart")
        assert len(charts) == 1 and _has(at, "ppl_partial_chart")  # only the growing curve
        captions = " ".join(c.value for c in at.caption)
        assert f"Scored {n:,} of {len(doc.sentences):,} sentences" in captions
        assert not _has(at, "ppl_view")  # the chunks come once the pass ends
    finally:
        release.set()
    job = _wait(at, "ppl_score_job")
    assert job.state == "done", job.error
    assert not _has(at, "ppl_partial_chart")
    assert len(at.get("plotly_chart")) == 3  # the full page
    assert len(at.session_state["ppl_scores"].sentences) == len(doc.sentences)


# --- θ is the session's: it survives leaving the page, and a saved session keeps it -----------------


def test_theta_survives_leaving_the_page_and_a_session_saved_from_compare_holds_it(
    scored: Document, monkeypatch, tmp_path
) -> None:
    import json

    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    at = _open(scored)
    _no_model_calls(monkeypatch)
    assert "ppl_threshold" in at.session_state and at.number_input(key="ppl_threshold").value == 0.5
    theta = 0.0123  # between two slider steps
    _set_theta(at, theta)
    chunks = _n_chunks(at)

    # The browser's bug: leaving Meta-Chunking put θ back to 0.5. Now it is the session's setting.
    at.switch_page("pages/compare.py")
    _run(at)
    assert at.session_state["ppl_threshold"] == theta
    at.text_input(key="ses_name").set_value("theta")  # saved from Compare, where no θ widget exists
    _run(at)
    at.button(key="ses_save").click()
    _run(at)
    saved = json.loads((tmp_path / "sessions" / "theta.json").read_text(encoding="utf-8"))
    assert saved["settings"]["ppl"]["threshold"] == theta and "theta" not in saved["settings"]["ppl"]

    at.switch_page("pages/ppl.py")
    _run(at)
    assert at.number_input(key="ppl_threshold").value == theta == _slider(at).value
    assert _n_chunks(at) == chunks


def _open_session_file(at: AppTest, name: str, data: bytes, doc: Document) -> AppTest:
    """Open a session file on an uploaded document, as the sidebar's panel does (file, then its document)."""
    gen = at.session_state["ses_gen"] if "ses_gen" in at.session_state else 0
    at.file_uploader(key=f"ses_open_{gen}").set_value((name, data, "application/json"))
    _run(at)
    gen = at.session_state["ses_gen"]
    at.file_uploader(key=f"ses_doc_{gen}").set_value((doc.source, doc.text.encode(), "text/plain"))
    return _run(at)


@pytest.mark.parametrize(("name", "saved_as"), [("threshold", "threshold"), ("theta", "theta")])
def test_a_restored_session_puts_theta_back(scored: Document, monkeypatch, tmp_path, name, saved_as) -> None:
    """A session file's ``ppl.threshold`` (or an older file's ``ppl.theta``) is the θ the page opens with."""
    import json

    from backend.report.session import DocRef, Session, session_to_json

    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    theta, target = 0.0123, 25
    settings = {"ppl": {saved_as: theta, "target_length": target, "rule": "paper"}}
    data = session_to_json(Session.make(DocRef.of(scored), [], {"lm": None}, settings)).encode()
    assert json.loads(data)["settings"]["ppl"][saved_as] == theta

    at = _open(scored, "pages/compare.py")
    _open_session_file(at, f"{name}.json", data, scored)
    assert not at.error, [e.value for e in at.error]
    assert (at.session_state["ppl_threshold"], at.session_state["ppl_target_length"]) == (theta, target)
    at.switch_page("pages/ppl.py")
    _run(at)
    assert at.number_input(key="ppl_threshold").value == theta == _slider(at).value
    assert at.segmented_control(key="ppl_rule").value == "paper"
    assert at.button(key="ppl_add").label == "Add ppl_combined to Compare"
