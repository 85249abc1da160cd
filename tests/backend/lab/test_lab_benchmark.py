"""The Benchmark page's work in the backend: the run's plan, the results' tables, the per-question export, routing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import ParameterError
from backend.figures.charts import config_color
from backend.lab.benchmark import (
    PER_QUESTION_COLUMNS,
    ROUTING_COLUMNS,
    benchmark_view,
    oracle_note,
    per_question,
    plan_benchmark,
    qset_name,
    routing_view,
    write_per_question,
)
from backend.lab.models import SessionModels
from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult, RetrievedChunk
from backend.retrieval.multi.retrievers import Agreement, Routing
from backend.retrieval.questions import Question, QuestionSet, Reference

CORPUS = "c" * 100
QSET = QuestionSet(
    (Question("q1", (Reference(CORPUS[0:10], 0, 10),), "doc"), Question("q2", (Reference(CORPUS[50:60], 50, 60),), "doc")),
    {"doc": CORPUS},
)
LM = SessionModels("SmolLM2", "fp-1")


def _entries(*configs: ChunkerConfig) -> list[ConfigEntry]:
    return [ConfigEntry(i + 3, "ABCD"[i], c) for i, c in enumerate(configs)]


def _routing() -> Routing:
    return Routing(("L1", "L2"), "oracle", np.array([[0.8, 0.2], [0.0, 1.0]]), np.array([1, 2]), np.zeros((2, 2)),
                   np.zeros((2, 2)), np.array([1, 0]), None)


def _benchmark() -> Benchmark:
    results = []
    for config, retrieved, terms, routing in (
        (ChunkerConfig("recursive"), [(RetrievedChunk("doc", 0, 20, 0, 0.1, 5),), (RetrievedChunk("doc", 40, 60, 2, 0.2, 5),)],
         "chunks", None),
        (ChunkerConfig("mog"), [(RetrievedChunk("doc", 0, 10, 0, 0.0, 3, 1), RetrievedChunk("doc", 20, 40, 1, 0.0, 4, 2)),
                                (RetrievedChunk("doc", 50, 60, 5, 0.0, 3, 1),)], "units", _routing()),
    ):
        questions = tuple(
            QuestionResult(i, "doc", f"q{i + 1}", 1.0, 0.5, 0.25, 0.5, top) for i, top in enumerate(retrieved)
        )
        summary = MetricSummary.of(questions)
        results.append(ConfigResult(config, summary, {"doc": summary}, questions, 7, 5.0, 0.1, False,
                                    retrieved_tokens_mean=6.0, omega_units=terms, routing=routing))
    return Benchmark(tuple(results), "minilm", "fp", 5, 2, ("doc",), 0.2)


def test_benchmark_plans_have_equal_signatures_for_equal_inputs_and_differ_otherwise() -> None:
    entries = _entries(ChunkerConfig.make("recursive"), ChunkerConfig.make("mog"))
    kwargs = dict(embedder=None, retrieve=5, auto=False, cross_corpus=True, name="Session set")
    plan = plan_benchmark(QSET, entries, LM, **kwargs)
    assert plan.signature == plan_benchmark(QuestionSet(QSET.questions, dict(QSET.corpora)), entries, LM, **kwargs).signature
    assert plan.title == "Benchmarking 2 configuration(s)" and plan.models is None and plan.model == ""
    assert dict(plan.meta) == {"tags": ["A", "B"], "colors": [config_color(3), config_color(4)], "qset": QSET,
                               "qset_name": "Session set", "cross_corpus": True}
    others = [
        plan_benchmark(QSET, entries, LM, **{**kwargs, "retrieve": 3}),
        plan_benchmark(QSET, entries, LM, **{**kwargs, "auto": True}),
        plan_benchmark(QSET, entries, LM, **{**kwargs, "cross_corpus": False}),
        plan_benchmark(QSET, entries, LM, **{**kwargs, "embedder": "/my/embedder"}),
        plan_benchmark(QSET, entries[:1], LM, **kwargs),
    ]
    assert len({plan.signature, *(p.signature for p in others)}) == 6
    # retrieve is ignored with auto: as many chunks as hold excerpts
    auto = plan_benchmark(QSET, entries, LM, **{**kwargs, "auto": True, "retrieve": 9})
    assert auto.signature == others[1].signature


def test_a_configuration_that_needs_the_language_model_makes_it_a_model_job() -> None:
    entries = _entries(ChunkerConfig.make("ppl"))
    kwargs = dict(embedder=None, retrieve=5, auto=False, cross_corpus=True, name="sample:narrative")
    plan = plan_benchmark(QSET, entries, LM, **kwargs)
    assert plan.models is None and plan.model == "SmolLM2"  # the default, loaded by the chunkers only if needed
    other = plan_benchmark(QSET, entries, SessionModels("Qwen", "fp-2"), **kwargs)
    assert other.signature != plan.signature
    with pytest.raises(ParameterError, match="cannot load"):
        plan_benchmark(QSET, entries, SessionModels("x", None, error="cannot load it"), **kwargs)
    with pytest.raises(ParameterError, match="configuration"):
        plan_benchmark(QSET, [], LM, **kwargs)


def test_qset_names() -> None:
    assert qset_name("Bundled sample set", "narrative") == "sample:narrative"
    assert qset_name("Import", "narrative") == "Import"


def test_the_results_view_marks_a_retrievers_precision_omega_and_names_its_units() -> None:
    view = benchmark_view(_benchmark(), {"tags": ["A", "B"], "colors": ["#111111", "#222222"], "qset": QSET})
    assert [r["Precision-Ω"] for r in view.summary] == ["25.0 ± 0.0", "25.0 ± 0.0 †"]
    assert view.caption == ("2 questions · 1 corpus/corpora · embedder minilm · 5 chunks per question · 0.2 s. "
                            "Mean ± standard deviation over questions, in %.")
    assert len(view.notes) == 1 and view.notes[0].startswith("B: query-time retriever(s). † Their precision-Ω")
    assert view.agreement_notes == ("B: a retriever's spans here are its finest units (what it is built from).",)
    assert view.per_corpus == () and list(view.routed) == ["B"] and view.questions == ("q1", "q2")
    assert view.warning == ""
    bundled = benchmark_view(_benchmark(), {"tags": ["A", "B"], "colors": ["#111111", "#222222"],
                                            "qset": QSET.with_method("bundled")})
    assert bundled.caption.startswith("2 questions (bundled) · 1 corpus/corpora")
    assert "bundled questions, which ranked configurations by recall unlike a trusted set" in bundled.warning
    assert [r["tag"] for r in view.results] == ["A", "B"]
    # The page's downloads, moved here: the results CSV, the JSON and the per-question table.
    assert view.results_csv().splitlines()[0].startswith("tag,")
    assert json.loads(view.results_json()) == _benchmark().to_json()
    assert view.per_question() == per_question(_benchmark(), ["A", "B"])


def test_the_per_question_export_has_exact_columns_and_rows(tmp_path) -> None:
    table = per_question(_benchmark(), ["A", "B"])
    assert table.columns == PER_QUESTION_COLUMNS + ROUTING_COLUMNS
    assert table.rows[0] == {
        "config": "A", "chunker": "recursive() · cl100k", "index": 0, "corpus_id": "doc", "question": "q1", "recall": 1.0,
        "precision": 0.5, "precision_omega": 0.25, "iou": 0.5, "omega_units": "chunks", "retrieved_entries": 1,
        "retrieved_tokens": 5, "retrieved_levels": "", "chosen_level": None, "oracle_level": None, "weights": None,
    }
    assert [(r["retrieved_levels"], r["chosen_level"], r["oracle_level"], r["weights"]) for r in table.rows[2:]] == [
        ("1;2", 1, 1, "0.8000;0.2000"), ("1", 2, 0, "0.0000;1.0000")]
    csv_text = table.to_csv()
    assert csv_text.splitlines()[0] == ",".join(PER_QUESTION_COLUMNS + ROUTING_COLUMNS)
    assert csv_text.splitlines()[1] == "A,recursive() · cl100k,0,doc,q1,1.0,0.5,0.25,0.5,chunks,1,5,,,,"
    assert json.loads(table.to_json())[3]["oracle_level"] == 0
    chunks_only = per_question(Benchmark(_benchmark().results[:1], "minilm", "fp", 5, 2, ("doc",), 0.2), ["A"])
    assert chunks_only.columns == PER_QUESTION_COLUMNS
    assert write_per_question(table, tmp_path / "q.json").read_text(encoding="utf-8") == table.to_json()
    assert write_per_question(table, tmp_path / "q.CSV").read_text(encoding="utf-8") == csv_text
    with pytest.raises(ParameterError, match=r"\.csv or \.json"):
        write_per_question(table, tmp_path / "q.xlsx")


def test_oracle_agreement_is_computed_once_with_its_sentence() -> None:
    routing = Routing(("L1", "L2", "L3"), "cv", np.zeros((5, 3)), np.array([1, 2, 2, 3, 1]), np.zeros((5, 3)),
                      np.zeros((5, 3)), np.array([1, 3, 2, 0, 2]), None)
    assert routing.agreement() == Agreement(agreed=2, counted=4, questions=5)
    assert routing.agreement().share == 0.5 and routing.to_json()["oracle_agreement"] == 0.5
    assert oracle_note(routing) == (
        "The router chose the oracle level (the level whose top-1 entry best matches the answer) for **2 of 4** "
        "questions. 1 of 5 question(s) had no oracle level (no level's top-1 entry touches the answer) and are not "
        "counted."
    )
    none = Routing(routing.level_names, "cv", routing.weights, routing.chosen, routing.similarities, routing.labels,
                   np.zeros(5, np.int64), None)
    assert none.agreement().share is None and none.to_json()["oracle_agreement"] is None
    assert oracle_note(none) == "None of the 5 questions has an oracle level: no level's top-1 entry touches any answer."


def test_the_routing_view_says_how_it_routes_and_why_there_is_no_curve() -> None:
    result = _benchmark().results[1]
    view = routing_view("B", result)
    # Markdown: the router's words and the tag are escaped (they are user input).
    assert view.caption == "B · router=oracle: each question's own soft label \\(an upper bound\\)."
    assert view.training_note == "No training curve: router=oracle trains nothing on this set."
    assert view.corpus_of == ("doc", "doc") and not view.has_training
    with pytest.raises(ParameterError):
        routing_view("A", _benchmark().results[0])
