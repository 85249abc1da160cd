"""The Summary page's data in one call (backend/lab/summary.py): rows, verdict, notes, and the plan of what is missing.

A short real document cut by two real chunkers, the real output cache in a temporary folder and
the model-free scorer and embedder of the quality tests: the Summary's BC, CS and DS are the
Quality plan's, and its "compute the missing" job is that plan's job.
"""

from __future__ import annotations

import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import Cancelled
from backend.lab.models import SessionModels
from backend.lab.quality import plan_quality
from backend.lab.summary import question_sets_on_document, summary_estimates, summary_view
from backend.metrics.cost import Throughput
from backend.metrics.report import QualitySettings, quality_row
from backend.metrics.scores import score_chunkings
from backend.models.cache import OutputCache
from backend.progress import CancelToken, Progress
from backend.report.summary import verdict
from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.text.document import Document
from tests.support.quality import Counting, LengthScorer, SeededEmbedder

TEXT = (
    "The cat sat on the mat. It was warm by the fire. Stock prices fell sharply on Monday. "
    "Investors worried about inflation. The cat went back to sleep."
)
CONFIGS = (  # four chunks each
    ChunkerConfig.make("recursive", {"chunk_size": 12, "chunk_overlap": 0}),
    ChunkerConfig.make("fixed_token", {"chunk_size": 10, "chunk_overlap": 0}),
)
QUALITY = {"K": 0.8, "bc_mode": "reference", "cs_rule": "paper", "delta": 0, "window": 2}  # the Quality page's


@pytest.fixture(scope="module")
def doc() -> Document:
    return Document.from_text(TEXT, source="summary.txt")


@pytest.fixture(scope="module")
def entries() -> list[ConfigEntry]:
    return [ConfigEntry(i, "AB"[i], c) for i, c in enumerate(CONFIGS)]


@pytest.fixture(scope="module")
def chunked(doc, entries) -> list:
    return [(e, run_chunker(doc, e.config)) for e in entries]


@pytest.fixture
def cache(tmp_path) -> OutputCache:
    return OutputCache(tmp_path / "cache")


def _models(scorer=None) -> SessionModels:
    return SessionModels.of(
        scorer or LengthScorer(), embedder_loaded="seeded-embedder", embedder_loaded_fingerprint="fp-seeded-embedder"
    )


def _score(chunked, cache, *, complete=True, embed=True) -> None:
    embedder = SeededEmbedder()
    score_chunkings(
        [ch for _, ch in chunked], scorer=LengthScorer(), embedder=(lambda: embedder) if embed else None,
        complete=complete, window=2, cache=cache,
    )


def test_nothing_computed_yet_plans_the_quality_pages_job(doc, entries, chunked, cache) -> None:
    view = summary_view(doc, entries, chunked, _models(), quality=QUALITY, store={},
                        throughput=Throughput(10.0, 0.5, measured=True), cache=cache)
    assert [r.tag for r in view.summary.rows] == ["A", "B"]
    assert view.missing == {"quality": ["A", "B"], "retrieval": ["A", "B"]} and view.to_score == ("A", "B")
    assert view.verdict == (
        ("Not computed yet: BC, CS and DS for A and B; recall, precision, IoU and precision-Ω for A and B "
        "(no benchmark on questions about this document yet)."),
    )
    assert view.no_set_line == (
        "No retrieval numbers for this document (summary.txt) yet: recall, precision, IoU and precision-Ω need a "
        "benchmark on questions whose answers are in its text."
    )
    assert view.elsewhere is None
    assert view.quality_run_label == "Compute BC, CS and DS for A, B with length-scorer: 28 pairs, about 2 min"
    # The same plan as the Quality page's with BC, CS and DS picked under the same settings: one job, not two.
    quality_page = plan_quality(doc, chunked, _models(), metrics=["bc", "cs", "ds"], window=2, store={}, cache=cache)
    assert view.quality.job.signature == quality_page.job.signature
    assert view.quality.job.title == "Scoring 2 configurations with length-scorer"


def test_numbers_are_the_quality_rows_of_the_cached_scores(doc, entries, chunked, cache) -> None:
    _score(chunked, cache)
    scorer = Counting(LengthScorer())
    view = summary_view(doc, entries, chunked, _models(scorer), quality=QUALITY | {"K": 0.3}, store={}, cache=cache)
    assert scorer.calls == 0 and view.to_score == () and view.quality.job is None
    assert "quality" not in view.missing
    settings = QualitySettings(K=0.3, window=2)
    for e, ch in chunked:
        data = view.quality_data[e.tag]
        row = quality_row(ch.token_counts, table=data.table, vectors=data.vectors, settings=settings)
        values = view.summary.row(e.tag).values
        assert (values["bc"], values["cs"], values["ds"]) == (
            row.values["bc"], row.values["cs_complete"], row.values["ds"]
        )
        assert values["chunks"] == 4.0
    assert view.summary.settings == {
        "K": 0.3, "bc_mode": "reference", "cs_rule": "paper", "delta": 0, "window": 2, "retrieve": None,
        "embedder": None, "lm": "length-scorer", "question_set": None, "question_set_size": None,
    }
    assert view.notes == (
        "Best of each column in green; BC, CS (complete graph) and DS under the Quality page's settings: "
        "K = 0.30, CS rule paper, BC mode reference, δ = 0, pair window w = 2"
    )
    assert set(view.quality.found) == {k for c in view.quality.configs for k in (c.table_key, c.vectors_key)}


def test_an_adjacent_table_gives_bc_and_leaves_cs_to_compute(doc, entries, chunked, cache) -> None:
    _score(chunked, cache, complete=False, embed=False)
    view = summary_view(doc, entries, chunked, _models(), quality=QUALITY, store={}, cache=cache)
    a = view.summary.row("A").values
    assert a["bc"] is not None and a["cs"] is None and a["ds"] is None
    assert view.to_score == ("A", "B") and [c.table_missing for c in view.quality.configs] == [True, True]


def test_unchunked_configurations_benchmark_and_notes(doc, entries, chunked, cache) -> None:
    waiting = ConfigEntry(2, "C", ChunkerConfig.make("semantic"))
    qset, benchmark = _benchmark(doc, [("summary", TEXT)])
    view = summary_view(doc, [*entries, waiting], chunked[:1], _models(), quality=QUALITY | {"window": 0}, store={},
                        benchmark=benchmark, question_set_name="sample:narrative", pending=[waiting], cache=cache,
                        questions=qset)
    assert [r.tag for r in view.summary.rows] == ["A", "B", "C"]
    assert view.summary.row("B").values["chunks"] is None and view.to_score == ("A",)
    assert list(view.chunkings) == ["A"] and list(view.quality_data) == ["A"]
    assert view.summary.settings["question_set"] == "sample:narrative"
    assert view.summary.settings["retrieve"] == -1 and view.summary.settings["question_set_size"] == 1
    assert view.summary.row("A").values["iou"] == 0.25 and view.no_set_line == "" and view.elsewhere is None
    assert view.notes == (
        "Best of each column in green; BC, CS (complete graph) and DS under the Quality page's settings: "
        "K = 0.80, CS rule paper, BC mode reference, δ = 0 · retrieval on this document: 1 question of the bundled "
        "English narrative set (all-MiniLM-L6-v2, as many chunks as hold excerpts per question), each mean with its "
        "95% interval over these questions, a best marked only where its paired difference to every other excludes "
        "zero · "
        "C wait for their model run"
    )


def test_a_verdict_on_questions_of_a_method_that_ranks_recall_poorly_carries_a_warning(doc, entries, chunked, cache):
    qset, benchmark = _benchmark(doc, [("summary", TEXT)])
    plain = summary_view(doc, entries, chunked, _models(), quality=QUALITY, store={}, benchmark=benchmark,
                         cache=cache, questions=qset)
    assert plain.questions_warning == ""  # the set does not say how it was made: nothing is claimed
    for method, warned in (("hand-written", False), ("model-free", False), ("bundled", True),
                           ("hand-written + model-free keywords", True)):
        view = summary_view(doc, entries, chunked, _models(), quality=QUALITY, store={}, benchmark=benchmark,
                            cache=cache, questions=qset.with_method(method))
        assert bool(view.questions_warning) == warned, method
    assert "Spearman ρ -0.36" in view.questions_warning and "questions compare" in view.questions_warning


def _benchmark(doc, corpora: list[tuple[str, str]]) -> tuple[QuestionSet, Benchmark]:
    """One question per corpus (its first 8 characters), configuration A's IoU 0.25 on each."""
    questions = tuple(Question(f"On {cid}?", (Reference(text[:8], 0, 8),), cid) for cid, text in corpora)
    qset = QuestionSet(questions, dict(corpora))
    per_question = tuple(QuestionResult(i, q.corpus_id, q.question, 0.5, 0.1, 0.2, 0.25, ())
                         for i, q in enumerate(questions))
    result = ConfigResult(CONFIGS[0], MetricSummary.of(per_question), {}, per_question, 4, 3.0, 0.1, True)
    benchmark = Benchmark((result,), "all-MiniLM-L6-v2", "fp", -1, len(questions), tuple(c for c, _ in corpora), 0.0)
    return qset, benchmark


def test_a_benchmark_on_another_document_is_its_own_section(doc, entries, chunked, cache) -> None:
    qset, benchmark = _benchmark(doc, [("clock", "The clockmaker wound every clock at noon.")])
    view = summary_view(doc, entries, chunked, _models(), quality=QUALITY, store={}, benchmark=benchmark,
                        question_set_name="sample:narrative", cache=cache, questions=qset, cross_corpus=True)
    assert all(view.summary.row(t).values[m] is None for t in "AB" for m in ("recall", "precision", "iou"))
    assert view.elsewhere.heading == "Retrieval on the bundled English narrative set, 1 corpus — not this document"
    assert [(r.tag, r.values["iou"]) for r in view.elsewhere.rows] == [("A", 0.25)]
    assert "25.0%" not in " ".join(view.verdict) and "retrieval on" not in view.notes
    assert view.no_set_line.endswith(
        "The last benchmark ran on the bundled English narrative set, which is not this document: it is shown apart "
        "below."
    )


def test_question_sets_on_document_offers_only_sets_on_it(doc) -> None:
    mixed, _ = _benchmark(doc, [("summary", TEXT), ("clock", "The clockmaker wound every clock at noon.")])
    other, _ = _benchmark(doc, [("clock", "The clockmaker wound every clock at noon.")])
    offered = question_sets_on_document(doc, {"session": mixed, "sample:narrative": other})
    assert list(offered) == ["session"] and [q.corpus_id for q in offered["session"].questions] == ["summary"]


def test_a_stopped_runs_sample_and_a_running_jobs_partial_read_as_estimates(tmp_path) -> None:
    """What a cancelled job scored: ± cells, still to score; a running job's partial: the live Summary and verdict."""
    text = " ".join(f"Sentence {i} is about topic {i % 5} and the cat number {i}." for i in range(40))
    long_doc = Document.from_text(text, source="long.txt")
    entries = [ConfigEntry(i, "AB"[i], c) for i, c in enumerate(CONFIGS)]
    chunked = [(e, run_chunker(long_doc, e.config)) for e in entries]
    cache = OutputCache(tmp_path / "cache")
    token, seen = CancelToken(), []

    def cancel_after_two(value) -> None:
        seen.append(value)
        if len(seen) == 2:
            token.cancel()

    with pytest.raises(Cancelled):  # every pair of both configurations (BC and CS), stopped after two batches
        score_chunkings([ch for _, ch in chunked], scorer=LengthScorer(), embedder=None, complete=True, window=None,
                        cache=cache, progress=Progress(cancel=token, partial=cancel_after_two))
    view = summary_view(long_doc, entries, chunked, _models(), quality=dict(QUALITY, window=0), store={}, cache=cache)
    estimated = [r for r in view.summary.rows if r.estimate("bc") is not None]
    assert estimated, "the stopped run's sample gives no estimate"
    for row in estimated:
        est = row.estimate("bc")
        assert row.values["bc"] == est.estimate and row.cell("bc") == est.label() and not est.exact
        assert row.tag in view.to_score  # not exact yet: the button to go on stays
    assert set(view.to_score) == {"A", "B"}
    # The running job's latest partial result (the first batch): the rows being scored and the verdict from it.
    live = summary_estimates(view, long_doc.source, seen[0])
    assert live.summary.rows[0].estimates["bc"].pairs_scored <= view.summary.rows[0].estimates["bc"].pairs_scored
    assert live.verdict == tuple(verdict(live.summary))
    assert summary_estimates(view, long_doc.source, None) is view
