"""The routing figures and captions on hand-built routings: exact counts, weights, matrix cells and curves."""

from __future__ import annotations

import numpy as np
import pytest

from backend.errors import ParameterError
from backend.retrieval.multi.retrievers import Routing
from backend.retrieval.multi.level_router import TrainReport
from backend.figures.routing import level_choice_bars, oracle_confusion_heatmap, training_curve
from backend.lab.benchmark import oracle_note, training_note

NAMES = ("L1", "L2", "L3")


def _routing(training: TrainReport | None = None) -> Routing:
    weights = np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.8, 0.3], [0.3, 0.3, 0.6], [0.5, 0.4, 0.1]])
    return Routing(
        level_names=NAMES,
        router="cv",
        weights=weights,
        chosen=np.array([1, 2, 2, 3, 1]),
        similarities=np.zeros((5, 3)),
        labels=np.zeros((5, 3)),
        oracle=np.array([1, 3, 2, 0, 2]),
        training=training,
    )


def _report(val: tuple[float, ...] = (1.2, 1.1, 1.15)) -> TrainReport:
    return TrainReport(questions=4, dropped=1, validation=1 if val else 0, train_loss=(1.0, 0.8, 0.6),
                       val_loss=val, label_histogram=(2, 1, 1), seconds=0.4, epochs=3)


def test_level_choice_bars_count_chosen_levels_and_average_weights_per_corpus() -> None:
    fig = level_choice_bars(_routing(), ["a", "a", "b", "b", "a"])
    counts = [t for t in fig.data if t.xaxis == "x"]
    weights = [t for t in fig.data if t.xaxis == "x2"]
    assert [t.name for t in counts] == ["a", "b"] and [t.name for t in weights] == ["a", "b"]
    assert list(counts[0].x) == list(NAMES)
    assert list(counts[0].y) == [2, 1, 0] and list(counts[1].y) == [0, 1, 1]
    assert list(weights[0].y) == pytest.approx([(0.9 + 0.2 + 0.5) / 3, (0.1 + 0.7 + 0.4) / 3, (0.0 + 0.1 + 0.1) / 3])
    assert list(weights[1].y) == pytest.approx([0.2, 0.55, 0.45])
    assert counts[0].marker.color == weights[0].marker.color != counts[1].marker.color
    with pytest.raises(ParameterError):
        level_choice_bars(_routing(), ["a"])


def test_corpus_names_are_escaped_in_the_legend() -> None:
    fig = level_choice_bars(_routing(), ["<b>x</b>"] * 5)
    assert fig.data[0].name == "&lt;b&gt;x&lt;/b&gt;"


def test_confusion_heatmap_counts_oracle_rows_against_chosen_columns() -> None:
    (trace,) = oracle_confusion_heatmap(_routing()).data
    want = [[1, 0, 0], [1, 1, 0], [0, 1, 0]]  # question 4 (oracle 0) is not counted
    assert np.asarray(trace.z).tolist() == want
    assert [list(r) for r in trace.text] == [[str(v) for v in row] for row in want]
    assert list(trace.x) == list(NAMES) and list(trace.y) == list(NAMES)
    note = oracle_note(_routing())
    assert "**2 of 4**" in note and "1 of 5 question(s) had no oracle level" in note


def test_no_oracle_level_at_all_is_said_plainly() -> None:
    r = _routing()
    r = Routing(r.level_names, r.router, r.weights, r.chosen, r.similarities, r.labels, np.zeros(5, np.int64), None)
    assert np.asarray(oracle_confusion_heatmap(r).data[0].z).sum() == 0
    assert oracle_note(r).startswith("None of the 5 questions has an oracle level")


def test_training_curve_draws_train_and_validation_loss_per_epoch() -> None:
    fig = training_curve(_report())
    assert [t.name for t in fig.data] == ["train", "validation"]
    assert list(fig.data[0].x) == [1, 2, 3] and list(fig.data[0].y) == [1.0, 0.8, 0.6]
    assert list(fig.data[1].y) == [1.2, 1.1, 1.15]
    assert [t.name for t in training_curve(_report(val=())).data] == ["train"]  # no validation split
    note = training_note(_report(), NAMES)
    assert "**4** usable" in note and "**1** dropped" in note and "L1: 2 · L2: 1 · L3: 1" in note


# --- the panel, drawn by AppTest -------------------------------------------------------------------


def _panel(routing) -> None:  # the source runs alone as the script: no annotations from this module
    from backend.chunking import ChunkerConfig
    from backend.retrieval.evaluate import ConfigResult, MetricSummary, QuestionResult
    from components.keys import BENCHMARK
    from components.routing import routing_panel

    questions = tuple(QuestionResult(i, c, f"q{i}", 0.0, 0.0, 0.0, 0.0, ()) for i, c in enumerate("aabba"))
    result = ConfigResult(ChunkerConfig("mog"), MetricSummary.of([]), {}, questions, 0, 0.0, 0.0, False, routing=routing)
    routing_panel(BENCHMARK, "B", result)


def _drawn(routing: Routing):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_panel, args=(routing,), default_timeout=30)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_cv_routing_draws_its_three_figures() -> None:
    at = _drawn(_routing(_report()))
    for key in ("bm_routing_levels", "bm_routing_confusion", "bm_routing_training"):
        at.get_by_key(key)
    assert any("**1** dropped" in c.value for c in at.caption)


def test_a_cv_router_with_too_few_usable_questions_says_so_instead_of_a_curve() -> None:
    at = _drawn(_routing(None))
    with pytest.raises(KeyError):
        at.get_by_key("bm_routing_training")
    assert any("fewer than 2 questions have a usable label" in c.value for c in at.caption)


# --- the tables' retriever columns ----------------------------------------------------------------


def test_tables_mark_a_retrievers_precision_omega_and_export_its_levels() -> None:
    from backend.chunking import ChunkerConfig
    from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult, RetrievedChunk
    from backend.lab.benchmark import benchmark_view, per_question
    from backend.retrieval.questions import Question, QuestionSet, Reference
    from components.retrieval import OMEGA_MARK, per_corpus_frame, summary_frame

    corpus_of = ["a", "a", "b", "b", "a"]
    picks = [(RetrievedChunk(c, 0, 10, 0, 0.0, 7, 2), RetrievedChunk(c, 20, 30, 1, 0.0, 3, 2)) for c in corpus_of]
    questions = tuple(
        QuestionResult(i, cid, f"q{i}", 1.0, 0.5, 0.25, 0.5, picks[i]) for i, cid in enumerate(corpus_of)
    )
    per_corpus = {c: MetricSummary.of([q for q in questions if q.corpus_id == c]) for c in ("a", "b")}
    result = ConfigResult(ChunkerConfig("mog"), MetricSummary.of(questions), per_corpus, questions, 40, 12.0, 1.5,
                          False, retrieved_tokens_mean=10.0, index_seconds=1.2, texts_embedded=40,
                          query_seconds=0.0025, omega_units="units", routing=_routing())
    bm = Benchmark((result,), "minilm", "fp", 2, 5, ("a", "b"), 1.5)
    qset = QuestionSet(tuple(Question(f"q{i}", (Reference("x", 0, 1),), c) for i, c in enumerate(corpus_of)),
                       {"a": "x", "b": "x"})
    view = benchmark_view(bm, {"tags": ["B"], "colors": ["#2563eb"], "qset": qset})

    row = summary_frame(view).loc["B"]
    assert row["Precision-Ω"] == f"25.0 ± 0.0 {OMEGA_MARK}" and row["IoU"] == "50.0 ± 0.0"
    costs = (row["retrieved tokens"], row["texts embedded"], row["index seconds"], row["query ms"])
    assert costs == (10.0, 40, 1.2, 2.5)
    corpus = per_corpus_frame(view)
    assert corpus["Precision-Ω"].tolist() == [f"25.0 ± 0.0 {OMEGA_MARK}"] * 2
    assert corpus["retrieved tokens"].tolist() == [10.0, 10.0]

    rows = per_question(bm, ["B"]).rows
    assert [r["retrieved_tokens"] for r in rows] == [10] * 5 and [r["retrieved_levels"] for r in rows] == ["2;2"] * 5
    assert [r["chosen_level"] for r in rows] == [1, 2, 2, 3, 1] and [r["oracle_level"] for r in rows] == [1, 3, 2, 0, 2]
    assert rows[0]["weights"] == "0.9000;0.1000;0.0000" and {r["omega_units"] for r in rows} == {"units"}
