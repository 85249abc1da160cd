"""Quality scoring as one task (backend/lab/quality.py): what is known, what is missing, its cost, its job, the table.

A short real document cut by two real chunkers, the real output cache in a temporary folder,
and model-free stand-ins (tests/support/quality.py's deterministic scorer behind a call counter,
a seeded embedder) prove what is read without a model and what the job computes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import Cancelled
from backend.lab.models import SessionModels
from backend.lab.quality import (
    csv_file_name,
    fold_scoring,
    needs_models,
    plan_quality,
    quality_settings,
    quality_view,
)
from backend.metrics.cost import Throughput, format_seconds
from backend.metrics.report import QualitySettings, table_rows
from backend.metrics.scores import pair_requests, score_chunkings, table_key
from backend.models.cache import OutputCache
from backend.models.rates import RateKey, rate_store
from backend.models.scoring import conditional_scores, pair_work
from backend.progress import CancelToken, Progress
from backend.text.document import Document
from tests.support.quality import Counting, LengthScorer, SeededEmbedder

TEXT = (
    "The cat sat on the mat. It was warm by the fire. Stock prices fell sharply on Monday. "
    "Investors worried about inflation. The cat went back to sleep."
)
CONFIGS = (
    ChunkerConfig.make("recursive", {"chunk_size": 12, "chunk_overlap": 0}),
    ChunkerConfig.make("fixed_token", {"chunk_size": 10, "chunk_overlap": 0}),
)
SLOW = Throughput(10.0, 0.5, measured=True)  # 10 characters/s: the costs below read in seconds
LENGTH_PAIRS = RateKey("fp-length-scorer", "lm", "cpu", "float32", "pairs")  # where the stand-in's speed is kept


@pytest.fixture(scope="module")
def doc() -> Document:
    return Document.from_text(TEXT, source="notes/My quality.txt")


@pytest.fixture(scope="module")
def chunked(doc: Document) -> list:
    """``(entry, chunking)`` of A (4 chunks of 6, 7, 12 and 8 tokens) and B (4 chunks of 10, 10, 10 and 3)."""
    out = [(ConfigEntry(i, "AB"[i], c), run_chunker(doc, c)) for i, c in enumerate(CONFIGS)]
    assert [ch.token_counts for _, ch in out] == [[6, 7, 12, 8], [10, 10, 10, 3]]
    return out


@pytest.fixture
def cache(tmp_path) -> OutputCache:
    return OutputCache(tmp_path / "cache")


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> None:
    """A fresh data directory: no speed is measured until a test records one."""
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))


def _models(scorer=None) -> SessionModels:
    """The session's models: the deterministic scorer, and the seeded embedder as the loaded one."""
    return SessionModels.of(
        scorer or LengthScorer(), embedder_loaded="seeded-embedder", embedder_loaded_fingerprint="fp-seeded-embedder"
    )


def _score(chunkings, cache, *, complete=True, window=None, scorer=None, embed=True) -> None:
    """Fill the output cache with the chunkings' pairs (and embeddings), as a finished job would."""
    embedder = SeededEmbedder()
    score_chunkings(
        [ch for _, ch in chunkings], scorer=scorer or LengthScorer(), embedder=(lambda: embedder) if embed else None,
        complete=complete, window=window, cache=cache,
    )


def test_cached_tables_and_vectors_are_found_with_no_model_call(doc, chunked, cache, tmp_path) -> None:
    _score(chunked, cache, window=2)
    scorer = Counting(LengthScorer())
    plan = plan_quality(doc, chunked, _models(scorer), metrics=["bc", "cs", "ds"], window=2, store={}, cache=cache)
    assert scorer.calls == 0
    assert [(c.entry.tag, c.table.complete, c.vectors.shape, c.missing) for c in plan.configs] == [
        ("A", True, (4, 8), False), ("B", True, (4, 8), False),
    ]
    assert plan.missing == () and plan.job is None and plan.cost.pairs == 0
    assert set(plan.found) == {k for c in plan.configs for k in (c.table_key, c.vectors_key)}
    # What the session holds is used as it is: nothing is read again.
    again = plan_quality(doc, chunked, _models(scorer), metrics=["bc", "cs", "ds"], window=2, store=plan.found,
                         cache=OutputCache(tmp_path / "empty"))
    assert again.found == {} and again.missing == ()
    assert [c.table for c in again.configs] == [c.table for c in plan.configs]


def test_missing_pairs_and_their_cost_are_counted_exactly(doc, chunked, cache) -> None:
    plan = plan_quality(doc, chunked, _models(), metrics=["bc", "cs"], window=2, store={}, throughput=SLOW, cache=cache)
    assert [c.entry.tag for c in plan.to_score] == ["A", "B"] and plan.found == {}
    # 4 chunks each: 4 unconditional passes + 10 ordered pairs with |i - j| <= 2, no chunk shared.
    chars = sum(pair_work(list(dict.fromkeys(r for _, ch in chunked for r in pair_requests(
        [c.text for c in ch.chunks], complete=True, window=2)))))
    assert chars == pytest.approx(1385.0)
    assert (plan.cost.pairs, plan.cost.total_pairs, plan.cost.tokens, plan.cost.seconds) == (
        28, 28, 155 + 156, pytest.approx(138.5))
    assert plan.cost_note == "Scoring A, B costs **28** pairs still missing: about 2 min at 0.5 pairs/s, measured on this machine."
    assert plan.run_label == "Score with length-scorer: 28 pairs, about 2 min"
    assert plan.confirm_label is None
    # Every pair (no window) on a very slow machine: hours, so a tick first; DS adds its sentence.
    slow = plan_quality(doc, chunked, _models(), metrics=["bc", "cs", "ds"], window=None, store={},
                        throughput=Throughput(0.05, 0.01, measured=True), cache=cache)
    assert slow.cost.pairs == 2 * (4 + 12)
    assert slow.cost_note.endswith(
        "measured on this machine. A pair window w cuts the cost of CS. Embedding **8** chunks for DS "
        "(seeded-embedder): time measured on the first run."
    )
    assert slow.confirm_label == "Yes, run for 8 h 15 min (over about 10 min at this machine's measured speed)"


def test_with_nothing_measured_the_time_is_a_labelled_guess(doc, chunked, cache) -> None:
    plan = plan_quality(doc, chunked, _models(), metrics=["bc"], window=None, store={}, cache=cache)
    assert not plan.throughput.measured and plan.cost.pairs == 14
    assert plan.run_label == "Score with length-scorer: 14 pairs, 2 s (a guess)"
    assert plan.cost_note == (
        "Scoring A, B costs **14** pairs still missing: 2 s — a guess (600 characters/s) until the first run "
        "measures this machine."
    )


def test_the_speed_measured_for_the_model_comes_first(doc, chunked, cache) -> None:
    rate_store().record(LENGTH_PAIRS, units=20, work=400.0, seconds=10.0)  # 2 pairs/s, 40 characters/s
    plan = plan_quality(doc, chunked, _models(), metrics=["bc"], window=None, store={}, throughput=SLOW, cache=cache)
    assert plan.throughput == Throughput(40.0, 2.0, measured=True)
    assert plan.cost.seconds == pytest.approx(793.0 / 40.0)  # the 14 pairs' 793 characters at 40 characters/s
    assert plan.run_label == "Score with length-scorer: 14 pairs, 20 s"


def test_scoring_some_pairs_drops_the_count_by_exactly_those(doc, chunked, cache) -> None:
    before = plan_quality(doc, chunked, _models(), metrics=["bc", "cs"], window=2, store={}, throughput=SLOW,
                          cache=cache)
    assert (before.cost.pairs, before.cost.total_pairs) == (28, 28)
    requests = pair_requests([c.text for c in chunked[1][1].chunks], complete=True, window=2)
    conditional_scores(requests[:9], LengthScorer(), cache=cache)  # the job stopped after 9 of B's pairs
    after = plan_quality(doc, chunked, _models(), metrics=["bc", "cs"], window=2, store={}, throughput=SLOW,
                         cache=cache)
    assert (after.cost.pairs, after.cost.total_pairs) == (28 - 9, 28)
    every = dict.fromkeys(r for _, ch in chunked for r in pair_requests([c.text for c in ch.chunks], complete=True,
                                                                         window=2))
    left = [r for r in every if r not in set(requests[:9])]
    assert after.cost.seconds == pytest.approx(sum(pair_work(left)) / 10.0)
    assert after.cost_note.startswith("Scoring A, B costs **19** pairs still missing (9 of 28 already scored): ")


def test_only_what_is_missing_is_counted(doc, chunked, cache) -> None:
    _score(chunked[:1], cache, complete=False, embed=False)  # A's adjacent pairs only
    plan = plan_quality(doc, chunked, _models(), metrics=["bc"], window=3, store={}, cache=cache)
    assert [c.missing for c in plan.configs] == [False, True]
    assert (plan.cost.pairs, plan.cost.tokens) == (4 + 3, 30 + 23 + 37)  # B's: contexts, continuations, unconditional
    assert plan.cost.total_pairs == 7
    assert list(plan.found) == [table_key(chunked[0][1], "fp-length-scorer", complete=False, window=3)]
    # CS too: A's adjacent table still gives BC, but the table CS needs is missing.
    plan = plan_quality(doc, chunked, _models(), metrics=["bc", "cs"], window=3, store={}, cache=cache)
    a = plan.configs[0]
    assert a.table is not None and not a.table.complete and a.table_missing
    assert a.table_key == table_key(chunked[0][1], "fp-length-scorer", complete=True, window=3)


def test_only_embeddings_missing_says_so(doc, chunked, cache) -> None:
    _score(chunked, cache, complete=False, window=3, embed=False)
    plan = plan_quality(doc, chunked, _models(), metrics=["bc", "ds"], window=3, store={}, cache=cache)
    assert plan.to_score == () and [c.vectors_missing for c in plan.configs] == [True, True]
    assert plan.cost_note == (
        "A, B: the chunks need embedding for DS. Embedding **8** chunks for DS (seeded-embedder): time measured on "
        "the first run."
    )
    rate_store().record(RateKey.of(SeededEmbedder.info, "embed"), units=10, work=50.0, seconds=1.0)  # 50 chars/s
    texts = sum(len(c.text) for _, ch in chunked for c in ch.chunks)
    measured = plan_quality(doc, chunked, _models(), metrics=["bc", "ds"], window=3, store={}, cache=cache)
    assert measured.cost.embed.seconds == pytest.approx(texts / 50.0)
    assert measured.cost_note.endswith(f"(seeded-embedder): {format_seconds(texts / 50.0)}.")
    assert plan.run_label == "Embed the chunks" and plan.confirm_label is None
    assert plan.job is not None and not plan.job.needs_lm  # the language model is not loaded to embed
    default = plan_quality(doc, chunked, SessionModels.of(LengthScorer()), metrics=["ds"], window=3, store={},
                           cache=cache)
    assert default.embedder_name == "default embedder"


def test_the_job_signature_names_the_work(doc, chunked, cache) -> None:
    def signature(**changes):
        args = {"metrics": ["bc", "cs"], "window": 2, "store": {}, "cache": cache} | changes
        models = args.pop("models", _models())
        return plan_quality(doc, chunked, models, **args).job.signature

    assert signature() == signature() == signature(metrics=["cs", "bc"], throughput=SLOW)
    other_lm = replace(_models(), fingerprint="fp-another-model")
    other_embedder = replace(_models(), embedder_loaded_fingerprint="fp-another-embedder")
    variants = [signature(window=3), signature(window=0), signature(metrics=["bc"]), signature(models=other_lm),
                signature(metrics=["bc", "cs", "ds"]), signature(metrics=["bc", "cs", "ds"], models=other_embedder)]
    assert len({signature(), *variants}) == 1 + len(variants)
    assert signature(metrics=["ds"]) == signature(metrics=["ds"], models=other_lm)  # DS alone runs no language model


def test_the_job_scores_everything_and_folding_fills_the_store(doc, chunked, cache) -> None:
    _score(chunked[:1], cache, window=2, embed=False)  # A is cached: read back at once
    scorer = Counting(LengthScorer())
    plan = plan_quality(doc, chunked, _models(scorer), metrics=["bc", "cs"], window=2, store={}, cache=cache)
    assert [c.entry.tag for c in plan.missing] == ["B"]
    assert plan.job.title == "Scoring 2 configurations with length-scorer" and plan.job.needs_lm
    run = plan.job.body(scorer, None)
    assert scorer.calls == 1 and len(run.results) == 2
    store: dict = {"doc": doc.id}
    assert fold_scoring(plan, run, store) == plan.throughput  # the stand-in scorer measures no speed
    assert set(store) == {"doc", *(c.table_key for c in plan.configs)}
    after = plan_quality(doc, chunked, _models(scorer), metrics=["bc", "cs"], window=2, store=store, cache=cache)
    assert after.missing == () and after.found == {} and after.job is None
    np.testing.assert_allclose(after.configs[0].table.cond, plan.configs[0].table.cond)


def test_folding_returns_the_speed_measured_for_the_model(doc, chunked, cache) -> None:
    plan = plan_quality(doc, chunked, _models(), metrics=["bc"], window=None, store={}, cache=cache)
    run = plan.job.body(LengthScorer(), None)
    assert fold_scoring(plan, run, {}) == plan.throughput  # the stand-in measures nothing: still the guess
    rate_store().record(LENGTH_PAIRS, units=30, work=600.0, seconds=3.0)  # what a local scorer records as it goes
    assert fold_scoring(plan, run, {}) == Throughput(200.0, 10.0, measured=True)


def test_view_rows_notes_and_csv(doc, chunked, cache) -> None:
    _score(chunked, cache, window=2)
    plan = plan_quality(doc, chunked, _models(), metrics=["bc", "cs", "ds"], window=2, store={}, cache=cache)
    settings = quality_settings({"K": 0.3, "bc_mode": "paper", "cs_rule": "reference", "delta": 1, "window": 2})
    assert settings == QualitySettings(K=0.3, bc_mode="paper", cs_rule="reference", delta=1, window=2)
    view = quality_view(plan, settings, doc.source)
    assert [e.tag for e in view.entries] == ["A", "B"] and len(view.colors) == 2
    assert list(view.rows) == table_rows([c.data for c in plan.configs], metrics=["bc", "cs", "ds"], settings=settings)
    assert view.notes == (
        "Best value per column in green; K = 0.30, CS rule reference, BC mode paper, δ = 1 · "
        "pair window w = 2: pairs further apart are not scored and count as no edge · "
        "DS with seeded-embedder; the paper finds DS does not follow QA quality — it is shown for context"
    )  # A's and B's mean lengths are equal (8.25 tokens)
    assert view.csv_name == "My-quality__quality-K0.30-cs_reference-bc_paper-delta1-w2.csv"
    assert view.csv().splitlines()[0] == (
        "configuration,chunker,chunks,mean_tokens,bc,cs_complete,cs_incomplete,ds,K,bc_mode,cs_rule,delta,window"
    )
    # Unequal lengths are pointed out; a configuration still missing a score is not in the table.
    longer = (ConfigEntry(2, "C", CONFIGS[0]), run_chunker(doc, replace(CONFIGS[0], params=(("chunk_overlap", 0),
                                                                                           ("chunk_size", 30)))))
    _score([longer], cache)
    ds = plan_quality(doc, [*chunked, longer], _models(), metrics=["ds"], window=2, store={}, cache=cache)
    assert quality_view(ds, settings, doc.source).notes.endswith(
        " · mean lengths differ by more than 10 %: match lengths (above) for a fair comparison"
    )
    partial = plan_quality(doc, chunked, _models(), metrics=["bc", "cs", "ds"], window=3, store={}, cache=cache)
    assert quality_view(partial, settings, doc.source).entries == ()


@pytest.mark.parametrize(
    ("source", "settings", "expected"),
    [
        ("My report.pdf", QualitySettings(K=0.8), "My-report__quality-K0.80-cs_paper-bc_reference.csv"),
        (
            "../报告 v2.txt",
            QualitySettings(K=1.25, bc_mode="paper", cs_rule="reference", delta=2, window=5),
            "报告-v2__quality-K1.25-cs_reference-bc_paper-delta2-w5.csv",
        ),
        ("<>.md", QualitySettings(K=0.0), "document__quality-K0.00-cs_paper-bc_reference.csv"),
    ],
)
def test_csv_file_name_names_the_document_and_the_view(source: str, settings: QualitySettings, expected: str) -> None:
    assert csv_file_name(source, settings) == expected


def test_needs_models_and_settings_defaults() -> None:
    assert not needs_models(["ds"], [CONFIGS[0]])
    assert needs_models(["bc"], [CONFIGS[0]]) and needs_models(["ds"], [ChunkerConfig.make("semantic")])
    assert quality_settings({"K": 0.8, "bc_mode": "reference", "cs_rule": "paper", "delta": 0, "window": 0}) == \
        QualitySettings()


def test_the_embedder_fingerprint_is_known_without_loading() -> None:
    assert _models().embedder_fingerprint == "fp-seeded-embedder"  # the loaded one's
    hub = SessionModels.of(LengthScorer(), embedder_spec="some-org/some-embedder")
    assert hub.embedder_fingerprint is None  # a hub id is only known once loaded (the job loads it)


def test_a_cancelled_jobs_sample_gives_estimates_and_the_view_shows_a_running_job(tmp_path) -> None:
    text = " ".join(f"Sentence {i} is about topic {i % 5} and the cat number {i}." for i in range(40))
    doc = Document.from_text(text, source="long.txt")
    entry = ConfigEntry(0, "A", ChunkerConfig.make("recursive", {"chunk_size": 12, "chunk_overlap": 0}))
    chunking = run_chunker(doc, entry.config)
    cache = OutputCache(tmp_path / "cache")
    token, seen = CancelToken(), []

    def cancel_after_two(value) -> None:
        seen.append(value)
        if len(seen) == 2:
            token.cancel()

    with pytest.raises(Cancelled):
        score_chunkings([chunking], scorer=LengthScorer(), embedder=None, complete=False, window=None, cache=cache,
                        progress=Progress(cancel=token, partial=cancel_after_two))
    settings = QualitySettings(bc_mode="paper")
    plan = plan_quality(doc, [(entry, chunking)], _models(), metrics=["bc"], window=None, store={}, cache=cache,
                        settings=settings)
    (scores,) = plan.configs
    assert scores.table_missing and scores.sample is not None and scores.estimated and plan.job is not None
    estimate = scores.estimates["bc"]
    assert not estimate.exact and estimate.pairs_scored >= seen[-1].estimates[0]["bc"].pairs_scored
    assert estimate.pairs_total == len(chunking.chunks) - 1
    view = quality_view(plan, settings, doc.source)
    assert (view.entries, view.row_entries, view.estimated) == ((), (entry,), True)
    assert view.rows[0]["estimates"]["bc"] == estimate and view.rows[0]["bc"] == estimate.estimate
    assert "95 % interval" in view.notes
    # The running job's latest partial result: its tables, recomputed under the page's settings.
    running = quality_view(plan, settings, doc.source, partial=seen[0])
    first = running.rows[0]["estimates"]["bc"]
    assert first.pairs_scored == seen[0].estimates[0]["bc"].pairs_scored < estimate.pairs_scored
    # Once the job has run to its end, the configuration is exact and in the figures.
    run = plan.job.body(LengthScorer(), Progress())
    store: dict = {}
    fold_scoring(plan, run, store)
    done = plan_quality(doc, [(entry, chunking)], _models(), metrics=["bc"], window=None, store=store, cache=cache,
                        settings=settings)
    assert done.configs[0].estimates["bc"].exact and done.job is None
    assert quality_view(done, settings, doc.source).rows[0]["exact"] is True


def test_a_long_run_names_when_the_first_estimates_come_and_when_the_exact_values_do(cache) -> None:
    from tests.support.fake_scores import ClockedPairScorer

    words = " ".join(f"Sentence {i} tells of thing number {i} at some length." for i in range(30))
    doc = Document.from_text(words, source="long.txt")
    configs = [ChunkerConfig.make("fixed_token", {"chunk_size": s, "chunk_overlap": 0}) for s in (8, 12)]
    chunked = [(ConfigEntry(i, "AB"[i], c), run_chunker(doc, c)) for i, c in enumerate(configs)]
    scorer = ClockedPairScorer(chars_per_s=2.0)  # this machine's speed, measured by an earlier run
    rate_store().record(RateKey.of(scorer.info, "pairs"), 1, 2.0, 1.0)
    plan = plan_quality(doc, chunked, SessionModels.of(scorer), metrics=["bc"], window=None, store={}, cache=cache)
    cost = plan.cost
    assert cost.anytime and cost.seconds > 600 and 0 < cost.first_seconds < cost.seconds / 4
    first, every = format_seconds(cost.first_seconds), format_seconds(cost.seconds)
    assert plan.confirm_label == (f"Yes, run: first estimates ± 95 % intervals in {first}, exact values in {every} "
                                  "(over about 10 min at this machine's measured speed)")
    assert f"come after **{cost.first_pairs:,}** of them: in {first}." in plan.cost_note
    # Both times are the job's: its first estimates are published, and its last pair scored, at those moments.
    published: list[float] = []
    plan.job.run(Progress(partial=lambda _estimates: published.append(scorer.now), clock=scorer.clock))
    assert published[0] == pytest.approx(cost.first_seconds, rel=0.01)
    assert scorer.now == pytest.approx(cost.seconds, rel=0.01)
