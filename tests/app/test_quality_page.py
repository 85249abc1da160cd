"""The Quality page with ``AppTest``: cost shown before a run, scoring job, cache-only reopen, live K, match lengths.

The bundled SmolLM2 and MiniLM score a short document cut into a few chunks by two
configurations; one output cache serves the whole module, so the tests after the first
scoring start from cache hits. (Until the router lists the page, the tests add it to the
navigation themselves.)
"""

from __future__ import annotations

import json
import time
import uuid

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from backend.chunkers import run_chunker
from backend.chunking import ConfigEntry
from backend.jobs import Job
from backend.metrics.estimate import QualityEstimates, stratified_order
from backend.metrics.formulas import boundary_clarity, chunk_stickiness
from backend.metrics.report import QualitySettings, quality_row
from backend.metrics.scores import ScoringRun, node_pairs, partial_table
from backend.text.document import Document
from components.state import normalized_config
from tests.support.apptest import isolated_lab, open_page
from tests.support.apptest import run as _run
from tests.support.apptest import wait_job as _wait
from tests.support.quality import random_table

TEXT = (
    "The cat sat on the <b>mat</b> & slept. It was warm by the fire. "
    "Stock prices fell sharply on Monday. Investors worried about inflation. "
    "Quantum chromodynamics describes the strong force."
)
CONFIGS = (
    ("recursive", {"chunk_size": 16, "chunk_overlap": 0}),
    ("fixed_token", {"chunk_size": 20, "chunk_overlap": 0}),
)


@pytest.fixture(scope="module", autouse=True)
def module_setup(tmp_path_factory):
    """One output cache and one rate store (a data directory) for the module, and the default models."""
    with isolated_lab(tmp_path_factory.mktemp("quality-data")):
        yield


def _entries() -> list[dict]:
    return [ConfigEntry(i, "AB"[i], normalized_config(n, p)) for i, (n, p) in enumerate(CONFIGS)]


@pytest.fixture(scope="module")
def scored() -> Document:
    """TEXT with both configurations' pairs and embeddings in the output cache (scored through the backend)."""
    from backend.chunkers import run_chunker
    from backend.metrics.scores import score_chunkings
    from backend.models.cache import default_cache
    from backend.models.embedder import load_embedder
    from backend.models.scorer import load_scorer

    doc = Document.from_text(TEXT, source="quality.txt")
    chunkings = [run_chunker(doc, e.config) for e in _entries()]
    assert all(2 <= len(ch.chunks) <= 4 for ch in chunkings), [len(ch.chunks) for ch in chunkings]
    score_chunkings(
        chunkings, scorer=load_scorer(None), embedder=lambda: load_embedder(None), complete=True, window=None,
        cache=default_cache(),
    )
    return doc


def _open(doc: Document, page: str = "pages/quality.py") -> AppTest:
    return open_page(page, doc, _entries())


def _all_metrics(at: AppTest) -> AppTest:
    """BC, CS on every pair (w = 0, as the paper) and DS: what ``scored`` cached (the page defaults to less)."""
    at.multiselect(key="qual_metrics").set_value(["bc", "cs", "ds"])
    _run(at)
    at.number_input(key="qual_window").set_value(0)
    return _run(at)


def _paper_tables(at: AppTest) -> list:
    """The page's pair tables of every pair (complete graph, no window), in configuration order."""
    store = at.session_state["qual_store"]
    return [v for k, v in store.items() if k != "doc" and k[0] == "table" and v.complete and v.window is None]


def _has(at: AppTest, key: str) -> bool:
    try:
        at.get_by_key(key)
    except KeyError:
        return False
    return True


def _frame(at: AppTest, column: str):
    """The one data frame on the page that has ``column`` (AppTest's data frames carry no key)."""
    (frame,) = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


def _table(at: AppTest):
    return _frame(at, "cs_complete")


def _no_model_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.models.embedder import Embedder
    from backend.models.scorer import LocalScorer

    def refuse(*args, **kwargs):
        raise AssertionError("the page called a model")

    for name in ("token_nll", "conditional_nll", "next_token_probs"):
        monkeypatch.setattr(LocalScorer, name, refuse)
    monkeypatch.setattr(Embedder, "embed", refuse)


def test_uncached_run_shows_its_cost_then_scores_in_a_job() -> None:
    doc = Document.from_text(f"Run {uuid.uuid4().hex[:8]} begins. " + TEXT, source="fresh.txt")
    at = _open(doc)
    assert [t.value for t in at.title] == ["Quality"]
    (info,) = [i.value for i in at.info if "pairs still missing" in i.value]
    assert "a guess" in info or "measured on this machine" in info  # a figure says what it stands on
    assert "qual_job" not in at.session_state  # a long run never starts on its own
    assert not [d for d in at.dataframe if "cs_complete" in d.value.columns]
    # BC and DS only: adjacent pairs, so the run stays short on a busy CPU (CS is checked on cached scores below).
    at.multiselect(key="qual_metrics").set_value(["bc", "ds"])
    _run(at)
    at.button(key="qual_run").click()
    _run(at)
    job = _wait(at, "qual_job")
    assert job.state == "done", job.error
    assert not at.error
    table = _table(at)
    assert list(table["chunker"]) == [e.config.label for e in _entries()]
    for col in ("bc", "ds"):
        assert np.isfinite(table[col].astype(float)).all(), col
    assert table["cs_complete"].isna().all()
    assert _has(at, "qual_bc_chart") and _has(at, "qual_csv") and not _has(at, "qual_cs_k")


def test_cached_document_opens_without_a_job_and_matches_the_backend(scored: Document, monkeypatch) -> None:
    _no_model_calls(monkeypatch)  # the cache-only lookup must need no model
    at = _all_metrics(_open(scored))
    assert "qual_job" not in at.session_state
    assert not at.error
    table = _table(at)
    tables = _paper_tables(at)
    assert len(tables) == 2
    for e in _entries():
        assert _has(at, f"qual_graph_{e.uid}") and _has(at, f"qual_graph_html_{e.uid}")
    assert _has(at, "qual_bc_chart") and _has(at, "qual_cs_k")
    for (_, row), t in zip(table.iterrows(), tables):
        assert float(row["bc"]) == pytest.approx(float(np.mean(boundary_clarity(t, "reference"))), abs=1e-9)
        assert float(row["cs_complete"]) == pytest.approx(chunk_stickiness(t, 0.8), abs=1e-9)


def test_k_rule_and_mode_recompute_with_no_model_call(scored: Document, monkeypatch) -> None:
    at = _all_metrics(_open(scored))
    _no_model_calls(monkeypatch)
    tables = _paper_tables(at)
    for K in (0.0, 0.3, 1.2):
        at.slider(key="qual_K").set_value(K)
        _run(at)
        got = [float(x) for x in _table(at)["cs_complete"]]
        assert got == pytest.approx([chunk_stickiness(t, K) for t in tables], abs=1e-9)
    at.segmented_control(key="qual_cs_rule").set_value("reference")
    at.number_input(key="qual_delta").set_value(1)
    _run(at)
    got = [float(x) for x in _table(at)["cs_incomplete"]]
    assert got == pytest.approx(
        [chunk_stickiness(t, 1.2, rule="reference", graph="incomplete", delta=1) for t in tables], abs=1e-9
    )
    at.segmented_control(key="qual_bc_mode").set_value("paper")
    at.segmented_control(key="qual_graph").set_value("incomplete")
    _run(at)
    got = [float(x) for x in _table(at)["bc"]]
    assert got == pytest.approx([float(np.mean(boundary_clarity(t, "paper"))) for t in tables], abs=1e-9)
    assert "qual_job" not in at.session_state and not at.error


def test_bc_only_needs_no_embedder_and_a_window_changes_the_cost(scored: Document) -> None:
    at = _open(scored)
    at.multiselect(key="qual_metrics").set_value(["bc"])
    _run(at)
    table = _table(at)
    assert np.isfinite(table["bc"].astype(float)).all()
    assert table["ds"].isna().all() and table["cs_complete"].isna().all()
    assert not _has(at, "qual_cs_k")
    assert at.number_input(key="qual_window").disabled  # the window only applies to CS
    at.multiselect(key="qual_metrics").set_value(["bc", "cs"])
    _run(at)
    at.number_input(key="qual_window").set_value(1)
    _run(at)  # pairs with |i - j| <= 1, all cached: nothing to run
    assert not [i for i in at.info if "pairs over about" in i.value]
    assert np.isfinite(_table(at)["cs_complete"].astype(float)).all()
    assert any("pair window w = 1" in c.value for c in at.caption)
    at.multiselect(key="qual_metrics").set_value([])
    _run(at)
    assert [i.value for i in at.info] == ["Pick at least one metric."]


def test_match_lengths_then_use_the_tuned_configurations(scored: Document) -> None:
    at = _open(scored)
    at.number_input(key="qual_match_target").set_value(12)
    at.button(key="qual_match_run").click()
    _run(at)
    rows = _frame(at, "status")
    assert list(rows["configuration"]) == ["A", "B"] and set(rows["target"]) == {12}
    assert all(s in ("within ±5%", "closest reachable") for s in rows["status"])
    at.button(key="qual_match_apply").click()
    _run(at)
    configs = [e.config for e in at.session_state["configs"]]
    assert [c.params_dict["chunk_size"] for c in configs] == [int(v) for v in rows["after"]]
    assert [e.tag for e in at.session_state["configs"]] == ["A", "B"]
    assert any("Replaced 2 configurations" in s.value for s in at.success)


def test_match_lengths_without_a_configuration_is_one_line(scored: Document) -> None:
    at = _open(scored)
    at.multiselect(key="qual_match_sel_0_1").set_value([])
    at.button(key="qual_match_run").click()
    _run(at)
    assert [e.value for e in at.error] == ["Pick at least one configuration to match."]


def test_compare_page_has_the_match_lengths_block(scored: Document) -> None:
    at = _open(scored, "pages/compare.py")
    at.number_input(key="cmp_match_target").set_value(30)
    at.button(key="cmp_match_run").click()
    _run(at)
    rows = _frame(at, "status")
    assert len(rows) == 2 and not at.error
    assert _has(at, "cmp_match_apply")


def test_a_running_scoring_job_can_be_cancelled() -> None:
    doc = Document.from_text(f"Cancel {uuid.uuid4().hex[:8]} here. " + TEXT, source="cancel.txt")
    at = _open(doc)
    at.button(key="qual_run").click()
    _run(at)
    job = at.session_state["qual_job"]
    if job.running:
        at.button(key="qual_cancel").click()
        _run(at)
    t0 = time.perf_counter()
    while job.running and time.perf_counter() - t0 < 240:
        time.sleep(0.25)
        _run(at)
    _run(at)
    assert job.state in ("cancelled", "done")
    if job.state == "cancelled":
        assert any("cancelled" in w.value for w in at.warning)
        assert at.button(key="qual_run")  # the run can be started again, never on its own


def test_an_embedder_chunker_runs_in_jobs_on_the_page_and_in_match_lengths(scored: Document) -> None:
    at = _open(scored)
    at.multiselect(key="qual_metrics").set_value(["ds"])  # no language model needed by the metrics
    at.session_state["configs"] = [
        _entries()[0], ConfigEntry(2, "C", normalized_config("semantic_max", {"chunk_size": 30}))
    ]
    _run(at)
    job = _wait(at, "qual_embedder_job")  # the chunker needs the embedder: its job, never inline
    assert job.state == "done", job.error
    at.button(key="qual_run").click()
    _run(at)
    if "qual_job" in at.session_state:
        _wait(at, "qual_job")
    table = _table(at)
    assert list(table.index) == ["A", "C"]
    assert np.isfinite(table["ds"].astype(float)).all() and table["bc"].isna().all()
    at.number_input(key="qual_match_target").set_value(20)
    at.button(key="qual_match_run").click()
    _run(at)
    assert not at.error, [e.value for e in at.error]
    job = _wait(at, "qual_match_job")
    assert job.state == "done", job.error
    rows = _frame(at, "status")
    assert list(rows["configuration"]) == ["A", "C"] and not at.error
    assert list(rows["parameter"]) == ["chunk_size", "chunk_size"]


def test_the_page_row_is_what_the_cli_metrics_prints(scored: Document, tmp_path, capsys) -> None:
    """One chunking, same K, rule, mode, δ and window: the page's table row equals the CLI's JSON numbers."""
    from backend.cli.main import main

    path = tmp_path / "quality.txt"
    path.write_text(TEXT, encoding="utf-8")
    name, params = CONFIGS[0]
    capsys.readouterr()
    assert main(["metrics", str(path), "--chunker", name, *(f"--param={k}={v}" for k, v in params.items()),
                 "--K", "0.3", "--cs-rule", "reference", "--bc-mode", "paper", "--delta", "1", "--window", "2"]) == 0
    cli = json.loads(capsys.readouterr().out)
    at = _all_metrics(_open(scored))
    at.slider(key="qual_K").set_value(0.3)
    at.segmented_control(key="qual_cs_rule").set_value("reference")
    at.segmented_control(key="qual_bc_mode").set_value("paper")
    at.number_input(key="qual_delta").set_value(1)
    at.number_input(key="qual_window").set_value(2)
    _run(at)
    assert "qual_job" not in at.session_state and not at.error  # every pair and vector was cached
    row = _table(at).loc["A"]
    page = {"chunks": int(row["chunks"]), "mean_tokens": float(row["mean_tokens"]), "bc_mean": float(row["bc"]),
            "cs_complete": float(row["cs_complete"]), "cs_incomplete": float(row["cs_incomplete"]),
            "ds_mean": float(row["ds"])}
    assert page == {k: cli[k] for k in page}
    assert (cli["K"], cli["cs_rule"], cli["bc_mode"], cli["delta"], cli["window"]) == (0.3, "reference", "paper", 1, 2)


def _fresh(label: str) -> Document:
    return Document.from_text(f"{label} {uuid.uuid4().hex[:8]} here. " + TEXT, source=f"{label.lower()}.txt")


def _expected_label(doc: Document, *, complete: bool) -> str:
    """The run button's cost as the backend prices it: the pairs missing from the cache, at the measured speed."""
    from backend.chunkers import run_chunker
    from backend.lab.models import default_lm_identity
    from backend.metrics.cost import Throughput, cost_label, pair_cost
    from backend.models.cache import default_cache

    _name, fingerprint, _error = default_lm_identity(None)
    speed = Throughput.measured_for(fingerprint)
    texts = [[c.text for c in run_chunker(doc, e.config).chunks] for e in _entries()]
    cost = pair_cost(texts, complete=complete, window=3, fingerprint=fingerprint, kind="lm", cache=default_cache(),
                     throughput=speed)
    return cost_label({"pairs": cost.pairs, "seconds": cost.seconds, "measured": speed.measured})


def test_defaults_fit_a_cpu_and_the_button_shows_the_cost() -> None:
    from backend.metrics.cost import DEFAULT_PAIR_WINDOW

    doc = _fresh("Defaults")
    at = _open(doc)
    assert at.multiselect(key="qual_metrics").value == ["bc", "ds"]  # adjacent pairs only: n passes, not n²
    assert at.number_input(key="qual_window").value == DEFAULT_PAIR_WINDOW == 3
    want = _expected_label(doc, complete=False)
    button = at.button(key="qual_run")
    assert button.label.startswith("Score with ") and button.label.endswith(": " + want)
    assert not button.disabled and not _has(at, "qual_confirm")  # seconds, not minutes: one click
    # CS with the default window costs more passes, and the label follows.
    at.multiselect(key="qual_metrics").set_value(["bc", "cs", "ds"])
    _run(at)
    windowed = _expected_label(doc, complete=True)
    assert int(windowed.split(" pairs")[0].replace(",", "")) > int(want.split(" pairs")[0].replace(",", ""))
    assert at.button(key="qual_run").label.endswith(": " + windowed)
    assert "qual_job" not in at.session_state


def test_a_run_over_ten_minutes_asks_for_confirmation() -> None:
    from backend.models.rates import HORIZON_SECONDS, RateKey, rate_store
    from backend.models.scorer import load_scorer

    doc = _fresh("Confirm")
    key = RateKey.of(load_scorer(None).info, "pairs")
    rate_store().record(key, units=1, work=30.0, seconds=HORIZON_SECONDS)  # a very slow machine: minutes → hours
    try:
        _confirm_a_slow_run(doc, key)
    finally:  # the module's later jobs run at a plausible speed again (the store keeps the last 300 s)
        rate_store().record(key, units=300, work=180_000.0, seconds=HORIZON_SECONDS)


def _confirm_a_slow_run(doc: Document, key) -> None:
    from backend.metrics.cost import Throughput, format_seconds

    at = _open(doc)
    slow = Throughput.measured_for(key.model)
    assert slow.measured and slow.chars_per_s == pytest.approx(0.1)
    want = _expected_label(doc, complete=False)
    seconds = want.split(", ", 1)[1]
    assert at.button(key="qual_run").label.endswith(want) and format_seconds(601) != seconds
    box = at.checkbox(key="qual_confirm")
    assert not box.value and f"Yes, run for {seconds} (over about 10 min" in box.label
    assert at.button(key="qual_run").disabled  # nothing starts on one click
    box.check()
    _run(at)
    assert not at.button(key="qual_run").disabled
    # Another run (here DS only, no language model needed: no confirmation) forgets the tick.
    at.multiselect(key="qual_metrics").set_value(["ds"])
    _run(at)
    assert not _has(at, "qual_confirm") and not at.button(key="qual_run").disabled
    at.multiselect(key="qual_metrics").set_value(["bc"])
    _run(at)
    assert not at.checkbox(key="qual_confirm").value and at.button(key="qual_run").disabled
    assert "qual_job" not in at.session_state


def _live_frame(at: AppTest, column: str):
    """The table with ``column``: a running job's (drawn by its progress fragment, whose one-second timer may redraw it
    meanwhile), or the page's once the job has ended (drawn on the rerun the ended job asks for); a few runs at most."""
    for _ in range(3):
        frames = [d.value for d in at.dataframe if column in d.value.columns]
        if frames:
            return frames[0]
        _run(at)
    raise AssertionError(f"no table with {column} under the running job")


def _partial(doc: Document, rows_scored: int = 3) -> QualityEstimates:
    """What the scoring job publishes after its first batches: every ``uncond`` and the pairs of three context rows.

    Seeded random scores (``random_table``) stand in for the model's: the page only draws them.
    """
    tables, estimates, done, total = [], [], 0, 0
    for seed, e in enumerate(_entries()):
        chunking = run_chunker(doc, e.config)
        n = len(chunking.chunks)
        full = random_table(seed, n)
        rows = [i for i in stratified_order(n, seed) if i < n - 1][:rows_scored]
        cond = {(i, j): float(full.cond[i, j]) for v in rows for i, j in node_pairs(n, v)}
        table = partial_table(n, dict(enumerate(map(float, full.uncond))), cond, complete=True, window=None, sample=rows)
        tables.append(table)
        estimates.append(dict(quality_row(chunking.token_counts, table=table, metrics=("bc", "cs")).estimates))
        done, total = done + len(cond), total + n * (n - 1)
    return QualityEstimates(tuple(estimates), done, total, tables=tuple(tables), vectors=(None,) * len(tables))


def _job_started_then_cancelled(doc: Document) -> tuple[AppTest, Job]:
    """The page on ``doc`` with BC and CS on every pair, its scoring job started and cancelled (its ``meta`` is the
    plan's: a test hands the page a job of its own under it)."""
    at = _open(doc)
    at.multiselect(key="qual_metrics").set_value(["bc", "cs"])
    _run(at)
    at.number_input(key="qual_window").set_value(0)
    _run(at)
    at.button(key="qual_run").click()
    _run(at)
    started = at.session_state["qual_job"]
    started.cancel()
    assert started.wait(120)
    return at, started


def test_a_running_job_shows_its_estimates_then_the_exact_numbers() -> None:
    doc = Document.from_text(f"Run {uuid.uuid4().hex[:8]} begins. " + " ".join([TEXT] * 3), source="running.txt")
    at, started = _job_started_then_cancelled(doc)
    # The job as the page sees it mid-run: running, for this plan, with its latest estimates.
    partial = _partial(doc)
    at.session_state["qual_job"] = Job(started.title, dict(started.meta), partial=partial)
    _run(at)
    frame = _live_frame(at, "cs_complete")
    chunkings = [run_chunker(doc, e.config) for e in _entries()]
    expected = [
        quality_row(ch.token_counts, table=t, metrics=("bc", "cs")).estimates
        for ch, t in zip(chunkings, partial.tables)
    ]
    assert list(frame["bc"]) == [est["bc"].label() for est in expected]
    assert list(frame["cs_complete"]) == [est["cs_complete"].label() for est in expected]
    assert all(" ± " in cell and " pairs)" in cell for cell in frame["bc"])
    assert all(" ± " in cell and " pairs)" in cell for cell in frame["cs_complete"])
    assert not any(est["cs_complete"].exact for est in expected)
    assert any("± narrows" in c.value and "when the job ends" in c.value for c in at.caption)
    assert not _has(at, "qual_bc_chart") and not _has(at, "qual_cs_k")  # they need every pair
    assert _has(at, "qual_K")  # K, the rule and the mode recompute the estimates meanwhile
    at.slider(key="qual_K").set_value(0.3)
    _run(at)
    at_k = [quality_row(ch.token_counts, table=t, metrics=("cs",), settings=QualitySettings(K=0.3)).estimates
            for ch, t in zip(chunkings, partial.tables)]
    assert list(_live_frame(at, "cs_complete")["cs_complete"]) == [est["cs_complete"].label() for est in at_k]

    # The job ends (here: run again for real): the exact numbers, the figures.
    del at.session_state["qual_job"]
    _run(at)
    at.button(key="qual_run").click()
    _run(at)
    job = _wait(at, "qual_job")
    assert job.state == "done", job.error
    table = _live_frame(at, "cs_complete")  # the ended job's rerun of the page may come one run later
    assert np.isfinite(table["bc"].astype(float)).all() and np.isfinite(table["cs_complete"].astype(float)).all()
    assert _has(at, "qual_bc_chart") and _has(at, "qual_cs_k")


def test_a_job_that_ends_mid_run_keeps_the_settings_and_shows_its_scores() -> None:
    """The page's rerun after a job ends (its tables folded in) keeps every setting the user chose.

    Here the job ends while the page is planning (the cache still lacks its pairs), so the page folds the job's
    result and reruns mid-run: that rerun may register the widgets under other ids (under AppTest it goes through
    ``app.py``), and a widget starting from its own default would have emptied the metrics ("Pick at least one
    metric") instead of showing the table.
    """
    doc = Document.from_text(f"Ended {uuid.uuid4().hex[:8]} mid-run. " + " ".join([TEXT] * 3), source="ended.txt")
    at, started = _job_started_then_cancelled(doc)
    chunkings = [run_chunker(doc, e.config) for e in _entries()]
    tables = [random_table(seed, len(ch.chunks)) for seed, ch in enumerate(chunkings)]
    ended = ScoringRun(results=tuple((t, None) for t in tables), seconds=1.0)
    at.session_state["qual_job"] = Job(started.title, dict(started.meta), state="done", fraction=1.0, result=ended)
    _run(at)
    assert at.multiselect(key="qual_metrics").value == ["bc", "cs"]
    assert at.number_input(key="qual_window").value == 0
    frame = _live_frame(at, "cs_complete")
    expected = [quality_row(ch.token_counts, table=t, metrics=("bc", "cs")).values for ch, t in zip(chunkings, tables)]
    assert list(frame["bc"].astype(float)) == pytest.approx([row["bc"] for row in expected])
    assert list(frame["cs_complete"].astype(float)) == pytest.approx([row["cs_complete"] for row in expected])
    assert "qual_job" not in at.session_state and _has(at, "qual_bc_chart") and _has(at, "qual_cs_k")
