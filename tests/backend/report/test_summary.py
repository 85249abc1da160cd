"""The Summary's rows, bests, gaps and verdict on hand-built chunkings, quality rows and a benchmark."""

from __future__ import annotations

import csv
import math

import pytest

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.metrics.estimate import Estimate, exact_estimate
from backend.metrics.report import BEST, QualitySettings, quality_row
from backend.metrics.stats import chunking_stats
from backend.report.summary import (
    GROUPS,
    METRIC_INFO,
    METRICS,
    SUMMARY_CSV_COLUMNS,
    ConfigSummary,
    Summary,
    collect,
    estimate_text,
    format_value,
    question_set_title,
    split_benchmark,
    summarize,
    verdict,
    with_quality,
)
from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.text.document import Document

TEXT = "".join(f"Sentence number {i:02d} is here. " for i in range(40))  # 40 × 28 characters
DOC = Document.from_text(TEXT, source="summary.txt")
A = ChunkerConfig.make("recursive", {"chunk_size": 40, "chunk_overlap": 0})
B = ChunkerConfig.make("fixed_token", {"chunk_size": 30, "chunk_overlap": 0})
C = ChunkerConfig.make("sentence", {"chunk_size": 50, "chunk_overlap": 0})
# One question on this document (corpus "summary", its text), the set the fake benchmarks ran.
QS = QuestionSet.from_document(DOC, [Question("Which sentence?", (Reference(TEXT[:28], 0, 28),), "summary")], "summary")


def _chunking(config: ChunkerConfig, n: int, tokens: list[int] | None = None, seconds: float = 0.5) -> Chunking:
    """``n`` equal chunks of TEXT with the given token counts (default 10 each)."""
    size = len(TEXT) // n
    bounds = [(i * size, len(TEXT) if i == n - 1 else (i + 1) * size) for i in range(n)]
    tokens = tokens or [10] * n
    chunks = tuple(Chunk(i, s, e, TEXT[s:e], tokens[i]) for i, (s, e) in enumerate(bounds))
    return Chunking(config, chunks, seconds, DOC.id, len(TEXT))


def _summary_stats(**per_metric) -> MetricSummary:
    values = {f"{m}_{s}": 0.0 for m in ("recall", "precision", "precision_omega", "iou") for s in ("mean", "std")}
    values.update({f"{m}_mean": v for m, v in per_metric.items()})
    return MetricSummary(**values, questions=12)


def _benchmark(*rows: tuple[ChunkerConfig, dict], omega_units: str = "chunks") -> Benchmark:
    results = tuple(
        ConfigResult(config=c, summary=_summary_stats(**v), per_corpus={}, questions=(), chunks=0,
                     chunk_tokens_mean=0.0, seconds=0.0, reused=True, omega_units=omega_units)
        for c, v in rows
    )
    return Benchmark(results, "all-MiniLM-L6-v2", "fp", 5, 12, ("summary",), 1.0)


# Per-question noise around a row's retrieval value, different per row (its mean is 0): ten questions.
_NOISE = {t: tuple(o / 1000 for o in offsets * 2) for t, offsets in
          {"A": (2, -2, 1, -1, 0), "B": (-1, 1, 0, 2, -2), "C": (0, 2, -2, -1, 1), "D": (1, 0, -1, -2, 2)}.items()}


def _row(tag: str, **values) -> ConfigSummary:
    """A row of the given values; its retrieval values known question by question (ten questions, a little noise)."""
    scores = {m: tuple(values[m] + o for o in _NOISE[tag]) for m in GROUPS["retrieval"] if values.get(m) is not None}
    return ConfigSummary(tag, A, {m: values.get(m) for m in METRICS}, {}, scores=scores)


def test_metric_table_is_complete_and_quality_directions_follow_the_quality_table():
    assert METRICS == ("chunks", "tokens_mean", "tokens_std", "seconds", "bc", "cs", "ds", "recall", "precision",
                       "iou", "precision_omega")
    assert set(METRIC_INFO) == set(METRICS)
    assert [m for m in METRICS if METRIC_INFO[m].higher_is_better is None] == ["chunks", "tokens_mean", "tokens_std"]
    assert METRIC_INFO["bc"].higher_is_better is (BEST["bc"] == "max") is True  # docs/metrics.md: BC higher = clearer
    assert METRIC_INFO["cs"].higher_is_better is (BEST["cs_complete"] == "max") is False
    assert METRIC_INFO["seconds"].higher_is_better is False
    for m in METRICS:  # one plain sentence each
        assert METRIC_INFO[m].help.endswith(".") and METRIC_INFO[m].help.count(". ") == 0, m
    assert GROUPS["retrieval"] == ("recall", "precision", "iou", "precision_omega")


def test_format_value():
    assert format_value("iou", 0.0678) == "6.8%"
    assert format_value("chunks", 12.0) == "12"
    assert format_value("bc", 0.93) == "0.930"
    assert format_value("seconds", 0.0123) == "0.012"
    assert format_value("bc", None) == "—"


def test_summarize_reads_the_stats_quality_rows_and_benchmark_the_pages_show():
    a, b = _chunking(A, 4, [10, 12, 14, 16], seconds=0.25), _chunking(B, 5)
    qa = {"bc": 0.91, "cs_complete": 1.5, "cs_incomplete": 1.2, "ds": 0.3}  # a table_rows row
    bm = _benchmark((B, {"recall": 0.8, "precision": 0.1, "iou": 0.068, "precision_omega": 0.2}),
                    (A, {"recall": 0.7, "precision": 0.09, "iou": 0.061, "precision_omega": 0.18}))
    s = summarize(DOC, [("A", a), ("B", b)], quality={"A": qa}, benchmark=bm, questions=QS, settings={"K": 0.8})
    stats = chunking_stats([a])[0]
    assert s.doc_name == "summary.txt" and s.doc_id == DOC.id and s.settings == {"K": 0.8}
    assert dict(s.row("A").values) == {
        "chunks": 4.0, "tokens_mean": stats["mean_tokens"], "tokens_std": stats["std_tokens"], "seconds": 0.25,
        "bc": 0.91, "cs": 1.5, "ds": 0.3, "recall": 0.7, "precision": 0.09, "iou": 0.061, "precision_omega": 0.18,
    }
    assert s.row("A").values["tokens_mean"] == 13.0 and math.isclose(s.row("A").values["tokens_std"], math.sqrt(5))
    assert (s.row("B").values["bc"], s.row("B").values["iou"]) == (None, 0.068)
    assert s.missing() == {"quality": ["B"]}


def test_summarize_takes_a_quality_report_and_leaves_unchunked_configurations_empty():
    a = _chunking(A, 3)
    report = quality_row(a.token_counts, settings=QualitySettings())  # nothing scored: every metric None
    s = summarize(DOC, [("A", a), ("B", B)], quality={"A": report}, benchmark=None)
    assert [s.row("A").values[m] for m in ("chunks", "bc", "cs", "ds")] == [3.0, None, None, None]
    assert all(v is None for v in s.row("B").values.values())
    assert s.missing() == {"quality": ["A", "B"], "retrieval": ["A", "B"]}


def test_a_retriever_row_notes_its_units():
    mog = ChunkerConfig.make("mog", {})
    units = _chunking(mog, 6)
    bm = _benchmark((mog, {"recall": 0.5, "precision": 0.2, "iou": 0.1, "precision_omega": 0.3}), omega_units="units")
    s = summarize(DOC, [("A", units)], quality=None, benchmark=bm, questions=QS)
    assert dict(s.row("A").notes) == {"precision_omega": "on units", "chunks": "finest units"}
    assert s.row("A").values["precision_omega"] == 0.3


def test_best_follows_each_direction_and_needs_two_values():
    s = Summary("d", "id", (_row("A", bc=0.93, cs=1.2, seconds=0.2, chunks=10), _row("B", bc=0.97, cs=1.5, seconds=0.1,
                                                                                chunks=12)))
    assert (s.best("bc"), s.best("cs"), s.best("seconds"), s.best("chunks")) == ("B", "A", "B", None)
    assert s.best("iou") is None  # not computed
    one = Summary("d", "id", (_row("A", iou=0.1), _row("B")))
    assert one.best("iou") is None and one.leaders("iou") == []


def test_a_tie_as_shown_has_no_single_best():
    s = Summary("d", "id", (_row("A", bc=0.9701), _row("B", bc=0.9699), _row("C", bc=0.5)))
    assert s.leaders("bc") == ["A", "B"]  # both show 0.970
    assert s.best("bc") is None


def test_missing_skips_a_single_chunk_for_quality():
    s = Summary("d", "id", (_row("A", chunks=1), _row("B", chunks=3, bc=0.9, cs=1.0, ds=0.2)))
    assert s.missing() == {"retrieval": ["A", "B"]}


def test_verdict_two_configurations():
    s = Summary("d", "id", (
        _row("A", chunks=10, iou=0.061, recall=0.80, precision=0.1, precision_omega=0.2, bc=0.93, cs=1.20, ds=0.3),
        _row("B", chunks=13, iou=0.068, recall=0.75, precision=0.1, precision_omega=0.2, bc=0.97, cs=1.45, ds=0.2),
    ))
    assert verdict(s) == [
        "B has the highest IoU (6.8% [6.7, 6.9] vs 6.1% [6.0, 6.2] for A; difference 0.7 points [0.6, 0.9] over these "
        "10 questions) with 13 chunks to A's 10.",
        "A has the highest recall (80.0% [79.9, 80.1] vs 75.0% [74.9, 75.1] for B; difference 5.0 points [4.9, 5.2] over "
        "these 10 questions).",
        "B's boundaries are clearer (BC 0.970 vs 0.930 for A; higher is clearer).",
        "A's chunks lean on each other less (CS 1.200 vs 1.450 for B; lower is better).",
    ]


def test_verdict_three_configurations_ties_and_gaps():
    s = Summary("d", "id", (
        _row("A", chunks=10, iou=0.05, recall=0.5, bc=0.95),
        _row("B", chunks=10, iou=0.07, recall=0.5, bc=0.95),
        _row("C", chunks=20, iou=0.06, recall=0.4),
    ))
    assert verdict(s) == [
        "B has the highest IoU (7.0% [6.9, 7.1] vs 6.0% [5.9, 6.1] for C, the next best; difference 1.0 points "
        "[0.9, 1.1] over these 10 questions) with 10 chunks to C's 20.",
        # Equal means (B's ahead by a rounding error): their paired difference straddles zero, nothing is called.
        "B and A cannot be told apart on recall over these 10 questions (difference 0.0 points [-0.2, 0.2]).",
        "A and B tie on BC (0.950).",
        ("Not computed yet: BC for C; CS and DS for A, B and C; precision and precision-Ω for A, B and C "
        "(no benchmark on questions about this document yet)."),
    ]


def test_verdict_equal_chunk_counts_and_ratio_near_one():
    same = Summary("d", "id", (_row("A", chunks=10, iou=0.1), _row("B", chunks=10, iou=0.2)))
    vs = f"({same.row('B').cell('iou')} vs {same.row('A').cell('iou')} for A; difference 10.0 points [9.8, 10.2] over these"
    assert verdict(same)[0] == f"B has the highest IoU {vs} 10 questions) with as many chunks as A (10)."
    near = Summary("d", "id", (_row("A", chunks=1000, iou=0.1), _row("B", chunks=1010, iou=0.2)))
    assert verdict(near)[0] == f"B has the highest IoU {vs} 10 questions) with 1,010 chunks to A's 1,000."


def test_verdict_with_nothing_computed_and_one_configuration():
    empty = Summary("d", "id", (_row("A", chunks=3), _row("B", chunks=4)))
    assert verdict(empty) == [
        ("Not computed yet: BC, CS and DS for A and B; recall, precision, IoU and precision-Ω for A and B "
        "(no benchmark on questions about this document yet).")
    ]
    alone = Summary("d", "id", (_row("A", chunks=3, bc=0.9, cs=1.0, ds=0.1),))
    assert verdict(alone) == [
        "Only one configuration (A): nothing to compare yet.",
        ("Not computed yet: recall, precision, IoU and precision-Ω for A "
        "(no benchmark on questions about this document yet)."),
    ]
    assert verdict(Summary("d", "id", ())) == ["No configuration yet."]


def test_verdict_is_at_most_five_sentences_and_deterministic():
    rows = tuple(_row(t, chunks=10 + i, iou=0.01 * i, recall=0.1 * i, bc=0.9 + 0.01 * i, cs=2 - 0.1 * i)
                 for i, t in enumerate("ABCD"))
    s = Summary("d", "id", rows)
    assert len(verdict(s)) <= 5 and verdict(s) == verdict(s)
    assert s.to_json()["verdict"] == verdict(s)
    assert s.to_json()["best"]["cs"] == "D"


def test_collect_without_models_chunks_and_leaves_model_work_empty():
    s = collect(
        DOC, [("A", A), ("B", ChunkerConfig.make("ppl", {}))], context=None, question_set=None, embedder_spec=None,
        K=0.8, delta=0, window=3, cs_rule="paper", bc_mode="reference", retrieve=5, compute=False,
    )
    from backend.chunkers import run_chunker

    assert s.row("A").values["chunks"] == float(len(run_chunker(DOC, A).chunks))
    assert s.row("B").values["chunks"] is None  # a model-backed configuration without a model: not chunked
    assert s.settings["K"] == 0.8 and s.settings["window"] == 3 and s.settings["question_set"] is None
    assert s.missing() == {"quality": ["A", "B"], "retrieval": ["A", "B"]}


@pytest.mark.parametrize("bad", [{"cs_rule": "nope"}, {"delta": -1}])
def test_collect_names_a_bad_setting(bad):
    from backend.errors import ParameterError

    kwargs = dict(K=0.8, delta=0, window=None, cs_rule="paper", bc_mode="reference") | bad
    with pytest.raises(ParameterError):
        collect(DOC, [("A", A)], context=None, question_set=None, embedder_spec=None, retrieve=5, compute=False, **kwargs)


def test_collect_computes_then_reads_the_same_numbers_from_the_cache(tmp_path, monkeypatch):
    """``compute=True`` scores through the output cache; a cache-only context then reads the very same numbers."""
    from backend.chunkers.context import ModelContext, unloaded_model_info
    from backend.models.identity import fingerprint_without_loading

    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CHUNKLAB_LM", raising=False)
    monkeypatch.delenv("CHUNKLAB_EMBEDDER", raising=False)
    doc = Document.from_text(
        "The cat sat on the mat. It slept by the fire all day long. Stock prices fell on Monday. Investors worried.",
        source="tiny.txt",
    )
    configs = [("A", ChunkerConfig.make("recursive", {"chunk_size": 10})),
               ("B", ChunkerConfig.make("fixed_token", {"chunk_size": 14}))]
    kwargs = dict(question_set=None, embedder_spec=None, K=0.8, delta=0, window=3, cs_rule="paper",
                  bc_mode="reference", retrieve=5)
    computed = collect(doc, configs, context=ModelContext(), compute=True, **kwargs)
    lookup = ModelContext.cache_only(unloaded_model_info("lm", fingerprint_without_loading(None)))
    cached = collect(doc, configs, context=lookup, compute=False, **kwargs)
    for a, b in zip(computed.rows, cached.rows):
        assert all(a.values[m] is not None for m in ("bc", "cs", "ds"))
        assert {**a.values, "seconds": 0} == {**b.values, "seconds": 0}
    assert computed.missing() == cached.missing() == {"retrieval": ["A", "B"]}
    assert computed.settings["lm"] and computed.settings["window"] == 3


# --- never mix documents -------------------------------------------------------------------------------

OTHER = "A story about a clockmaker and his clocks. It is not this document."


def _mixed() -> tuple[QuestionSet, Benchmark]:
    """Two questions on this document (corpus ``summary``) and one on another corpus, benchmarked for A and B."""
    qs = QuestionSet(
        (
            Question("First?", (Reference(TEXT[:28], 0, 28),), "summary"),
            Question("Clocks?", (Reference(OTHER[:10], 0, 10),), "other"),
            Question("Second?", (Reference(TEXT[28:56], 28, 56),), "summary"),
        ),
        {"summary": TEXT, "other": OTHER},
    )
    scores = {A: ((0.2, 0.9, 0.4), (0.5, 1.0, 0.7)), B: ((0.1, 0.8, 0.3), (0.4, 0.9, 0.6))}  # iou, recall per question
    results = []
    for config, (ious, recalls) in scores.items():
        per_question = tuple(
            QuestionResult(i, q.corpus_id, q.question, recalls[i], 0.1, 0.2, ious[i], ())
            for i, q in enumerate(qs.questions)
        )
        per_corpus = {cid: MetricSummary.of([r for r in per_question if r.corpus_id == cid]) for cid in qs.corpus_ids}
        summary = MetricSummary.of(per_question)
        results.append(ConfigResult(config, summary, per_corpus, per_question, 7, 10.0, 0.1, True))
    return qs, Benchmark(tuple(results), "all-MiniLM-L6-v2", "fp", 5, 3, ("summary", "other"), 1.0)


def test_a_mixed_set_counts_only_this_documents_questions_in_the_rows():
    qs, bm = _mixed()
    a, b = _chunking(A, 4), _chunking(B, 5)
    s = summarize(DOC, [("A", a), ("B", b)], benchmark=bm, questions=qs, question_set_name="Import", cross_corpus=True)
    assert math.isclose(s.row("A").values["iou"], (0.2 + 0.4) / 2) and math.isclose(s.row("A").values["recall"], 0.6)
    assert math.isclose(s.row("B").values["iou"], (0.1 + 0.3) / 2)
    assert s.retrieval is not None and s.retrieval.corpora == ("summary",) and s.retrieval.questions == 2
    assert s.retrieval.across == "retrieved across the set's 2 corpora"
    assert s.elsewhere is not None and s.elsewhere.scope.corpora == ("other",) and s.elsewhere.scope.questions == 1
    assert s.elsewhere.heading == "Retrieval on the imported question set, 1 corpus — not this document"
    assert [(r.tag, r.values["iou"], r.values["recall"], r.values["chunks"]) for r in s.elsewhere.rows] == [
        ("A", 0.9, 1.0, None), ("B", 0.8, 0.9, None),
    ]
    # Two questions on this document, A ahead by exactly 10 points on each: no spread, the difference is called.
    assert verdict(s)[0] == (
        f"A has the highest IoU ({s.row('A').cell('iou')} vs {s.row('B').cell('iou')} for B; difference 10.0 points "
        "[10.0, 10.0] over these 2 questions) with 4 chunks to B's 5."
    )
    assert s.row("A").scores["iou"] == (0.2, 0.4) and s.row("A").interval("iou").n == 2
    assert not any("90.0%" in line or "80.0%" in line for line in verdict(s))  # the other corpus is never cited
    assert s.to_json()["elsewhere"]["heading"] == s.elsewhere.heading


def test_a_benchmark_on_another_document_leaves_the_rows_and_verdict_alone():
    qs, bm = _mixed()
    other_doc = Document.from_text(OTHER, source="other.txt")
    s = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5))], benchmark=bm,
                  questions=qs.with_questions([]).on_document(other_doc), question_set_name="sample:narrative")
    # The set given holds only the other corpus: nothing is on DOC.
    assert s.retrieval is None and all(s.row(t).values[m] is None for t in "AB" for m in GROUPS["retrieval"])
    assert s.elsewhere.heading == "Retrieval on the bundled English narrative set, 2 corpora — not this document"
    lines = verdict(s)
    assert not any("IoU (" in line or "recall (" in line for line in lines)
    assert lines[-1] == (
        "Not computed yet: BC, CS and DS for A and B; recall, precision, IoU and precision-Ω for A and B "
        "(no benchmark on questions about this document yet)."
    )
    unknown = summarize(DOC, [("A", _chunking(A, 4))], benchmark=bm)  # no question set: no corpus known to be DOC
    assert unknown.retrieval is None and unknown.elsewhere.heading == (
        "Retrieval on a question set, 2 corpora — not known to be this document"
    )


def test_split_benchmark_keeps_a_benchmark_wholly_on_the_document():
    qs, bm = _mixed()
    mine, others = split_benchmark(bm, qs, DOC)
    assert [len(r.questions) for r in mine.results] == [2, 2] and mine.corpora == ("summary",) and mine.questions == 2
    assert list(mine.results[0].per_corpus) == ["summary"] and others.corpora == ("other",)
    only = qs.on_document(DOC)
    whole = _restricted_benchmark(bm, "summary")
    assert split_benchmark(whole, only, DOC) == (whole, None)  # the very object: the Benchmark page's numbers


def _restricted_benchmark(bm: Benchmark, corpus: str) -> Benchmark:
    mine, _ = split_benchmark(bm, QuestionSet.from_document(DOC, [], corpus).with_questions(
        [Question("First?", (Reference(TEXT[:28], 0, 28),), corpus)]), DOC)
    return mine


def test_question_set_titles():
    assert question_set_title("sample:narrative") == "the bundled English narrative set"
    assert question_set_title("sample:technical") == "the bundled English technical guide (Markdown) set"
    assert question_set_title("Session set") == question_set_title("session") == "the session's question set"
    assert question_set_title("questions.csv") == "questions.csv" and question_set_title(None) == "a question set"


def test_missing_names_each_metric_not_the_whole_group():
    s = Summary("d", "id", (_row("A", chunks=3, ds=0.42), _row("B", chunks=4, bc=0.9, cs=1.0, ds=0.64), _row("C")))
    assert s.missing_metrics() == {
        "chunks": ["C"], "bc": ["A", "C"], "cs": ["A", "C"], "ds": ["C"], "recall": ["A", "B", "C"],
        "precision": ["A", "B", "C"], "iou": ["A", "B", "C"], "precision_omega": ["A", "B", "C"],
    }
    assert verdict(s)[-1] == (
        "Not computed yet: chunks and DS for C; BC and CS for A and C; recall, precision, IoU and precision-Ω for "
        "A, B and C (no benchmark on questions about this document yet)."
    )


# --- estimates from some of the pairs: the cells, the JSON and CSV, and a verdict that respects the intervals ---


def _est(value: float, half: float, scored: int = 120, total: int = 1747) -> Estimate:
    """An estimate from ``scored`` of ``total`` pairs, ``value ± half``."""
    return Estimate(value, value - half, value + half, scored, total, "t")


def _estimated(tag: str, **estimates: Estimate) -> ConfigSummary:
    """A row whose BC, CS or DS are the given estimates (their point estimates as the values)."""
    values = {m: estimates[m].estimate if m in estimates else None for m in METRICS}
    return ConfigSummary(tag, A, values, {}, estimates)


def test_the_verdict_calls_a_difference_only_when_the_intervals_do_not_overlap():
    overlapping = Summary("d", "id", (_estimated("A", bc=_est(0.93, 0.03)), _estimated("B", bc=_est(0.94, 0.03))))
    assert overlapping.leaders("bc") == ["A", "B"] and overlapping.best("bc") is None
    assert verdict(overlapping)[0] == "A and B cannot be told apart yet (BC 0.93 ± 0.03 vs 0.94 ± 0.03)."

    disjoint = Summary("d", "id", (_estimated("A", bc=_est(0.80, 0.03)), _estimated("B", bc=_est(0.94, 0.03))))
    assert disjoint.leaders("bc") == ["B"] and disjoint.best("bc") == "B"
    assert verdict(disjoint)[0] == "B's boundaries are clearer (BC 0.94 ± 0.03 vs 0.80 ± 0.03 for A; higher is clearer)."

    exact = Summary("d", "id", (_estimated("A", bc=exact_estimate(0.93, 1747)),
                                _estimated("B", bc=exact_estimate(0.94, 1747))))
    assert exact.best("bc") == "B"  # width 0: compared as today, however close
    assert verdict(exact)[0] == "B's boundaries are clearer (BC 0.940 vs 0.930 for A; higher is clearer)."


def test_cs_verdict_and_an_exact_value_against_an_estimate():
    sticky = Summary("d", "id", (_estimated("A", cs=_est(1.2, 0.3)), _estimated("B", cs=_est(1.45, 0.3))))
    assert verdict(sticky)[0] == "A and B cannot be told apart yet (CS 1.20 ± 0.30 vs 1.45 ± 0.30)."
    apart = Summary("d", "id", (_estimated("A", cs=_est(1.2, 0.05)), _estimated("B", cs=_est(1.45, 0.05))))
    assert verdict(apart)[0] == "A's chunks lean on each other less (CS 1.20 ± 0.05 vs 1.45 ± 0.05 for B; lower is better)."
    # An exact value is an interval of width 0: inside the other's interval, they cannot be told apart yet.
    mixed = Summary("d", "id", (_row("A", bc=0.93), _estimated("B", bc=_est(0.95, 0.03))))
    assert verdict(mixed)[0] == "A and B cannot be told apart yet (BC 0.930 vs 0.95 ± 0.03)."
    outside = Summary("d", "id", (_row("A", bc=0.80), _estimated("B", bc=_est(0.95, 0.03))))
    assert verdict(outside)[0] == "B's boundaries are clearer (BC 0.95 ± 0.03 vs 0.800 for A; higher is clearer)."


def test_among_three_only_those_overlapping_the_best_are_named():
    s = Summary("d", "id", (_estimated("A", bc=_est(0.80, 0.01)), _estimated("B", bc=_est(0.93, 0.03)),
                            _estimated("C", bc=_est(0.94, 0.03))))
    assert s.leaders("bc") == ["B", "C"] and s.best("bc") is None
    assert verdict(s)[0] == "B and C cannot be told apart yet (BC 0.93 ± 0.03 vs 0.94 ± 0.03)."
    clear = Summary("d", "id", (_estimated("A", bc=_est(0.80, 0.01)), _estimated("B", bc=_est(0.90, 0.01)),
                                _estimated("C", bc=_est(0.94, 0.01))))
    assert verdict(clear)[0] == (
        "C's boundaries are the clearest (BC 0.94 ± 0.01 vs 0.90 ± 0.01 for B, the next best; higher is clearer)."
    )


def test_summarize_carries_a_rows_estimates_into_its_cells_json_and_csv():
    a, b = _chunking(A, 4), _chunking(B, 5)
    bc, cs = _est(0.93, 0.02), _est(1.5, 0.25, 300, 3000)
    qa = {"bc": 0.93, "cs_complete": 1.5, "cs_incomplete": 1.2, "ds": None,  # a table_rows row, being scored
          "estimates": {"bc": bc, "cs_complete": cs, "cs_incomplete": _est(1.2, 0.2), "ds": None}}
    qb = {"bc": 0.9, "cs_complete": 1.1, "cs_incomplete": 1.0, "ds": 0.25,
          "estimates": {"bc": exact_estimate(0.9, 4), "cs_complete": exact_estimate(1.1, 20)}}
    s = summarize(DOC, [("A", a), ("B", b)], quality={"A": qa, "B": qb})
    assert dict(s.row("A").estimates) == {"bc": bc, "cs": cs}
    assert (s.row("A").values["bc"], s.row("A").values["cs"], s.row("A").values["ds"]) == (0.93, 1.5, None)
    assert [s.row("A").cell(m) for m in ("bc", "cs", "ds")] == [
        "0.93 ± 0.02 (120 of 1,747 pairs)", "1.50 ± 0.25 (300 of 3,000 pairs)", "—",
    ]
    assert [s.row("B").cell(m) for m in ("bc", "cs", "ds")] == ["0.900", "1.100", "0.250"]  # exact: as today
    assert s.to_json()["rows"][0]["estimates"]["bc"] == {
        "estimate": 0.93, "ci_low": 0.93 - 0.02, "ci_high": 0.93 + 0.02, "pairs_scored": 120, "pairs_total": 1747,
        "method": "t",
    }
    assert s.to_json()["rows"][1]["estimates"]["cs"]["pairs_scored"] == 20
    lines = s.to_csv().splitlines()
    assert lines[0].split(",") == list(SUMMARY_CSV_COLUMNS)
    assert SUMMARY_CSV_COLUMNS[-24:-12] == (
        "bc_ci_low", "bc_ci_high", "bc_pairs_scored", "bc_pairs_total", "cs_ci_low", "cs_ci_high", "cs_pairs_scored",
        "cs_pairs_total", "ds_ci_low", "ds_ci_high", "ds_pairs_scored", "ds_pairs_total",
    )
    row_a = dict(zip(SUMMARY_CSV_COLUMNS, next(csv.reader([lines[1]]))))
    assert (row_a["bc"], row_a["bc_pairs_scored"], row_a["bc_pairs_total"]) == ("0.93", "120", "1747")
    assert (float(row_a["cs_ci_low"]), float(row_a["cs_ci_high"])) == (1.25, 1.75)
    assert (row_a["ds"], row_a["ds_ci_low"], row_a["ds_pairs_scored"]) == ("", "", "")  # not computed
    row_b = dict(zip(SUMMARY_CSV_COLUMNS, next(csv.reader([lines[2]]))))
    assert [row_b[c] for c in ("bc_ci_low", "bc_ci_high", "bc_pairs_scored", "bc_pairs_total")] == [
        "0.9", "0.9", "4", "4"]  # exact: an interval of width 0, every pair
    assert [row_b[c] for c in ("ds_ci_low", "ds_ci_high", "ds_pairs_scored")] == ["0.25", "0.25", ""]


def test_with_quality_puts_a_running_jobs_estimates_into_its_rows_only():
    a, b = _chunking(A, 4), _chunking(B, 5)
    s = summarize(DOC, [("A", a), ("B", b)], quality={"A": {"bc": 0.9, "cs_complete": 1.1, "ds": 0.2}})
    bc = _est(0.93, 0.02)
    live = with_quality(s, {"B": {"bc": 0.93, "cs_complete": None, "ds": None, "estimates": {"bc": bc}}})
    assert live.row("A") == s.row("A")
    assert dict(live.row("B").estimates) == {"bc": bc}
    assert {m: live.row("B").values[m] for m in ("chunks", "bc", "cs", "ds")} == {
        "chunks": 5.0, "bc": 0.93, "cs": None, "ds": None}
    assert live.row("B").cell("bc") == "0.93 ± 0.02 (120 of 1,747 pairs)"
    assert verdict(live)[0] == "B's boundaries are clearer (BC 0.93 ± 0.02 vs 0.900 for A; higher is clearer)."


def test_an_interval_not_bounded_yet_reads_plus_minus_infinity():
    one = Estimate(0.63, -math.inf, math.inf, 1, 8, "t")  # one boundary scored: no spread to measure
    assert estimate_text(one) == "0.63 ± ∞ (1 of 8 pairs)" and estimate_text(one, pairs=False) == "0.63 ± ∞"
    assert estimate_text(_est(0.93, 0.02)) == "0.93 ± 0.02 (120 of 1,747 pairs)"
    assert estimate_text(exact_estimate(0.93, 8)) == "0.93 (all 8 pairs)"
    s = Summary("d", "id", (_estimated("A", bc=one), _estimated("B", bc=_est(0.9, 0.01))))
    assert verdict(s)[0] == "A and B cannot be told apart yet (BC 0.63 ± ∞ vs 0.90 ± 0.01)."


# --- retrieval means over questions: their intervals, and a verdict that calls only a paired difference excluding 0 ---


def _on_doc(n: int) -> QuestionSet:
    """``n`` questions on this document (corpus ``summary``), one sentence each."""
    return QuestionSet.from_document(DOC, [
        Question(f"Sentence {i}?", (Reference(TEXT[28 * i:28 * i + 28], 28 * i, 28 * i + 28),), "summary") for i in range(n)
    ], "summary")


def _scored_benchmark(qs: QuestionSet, per_config: dict[ChunkerConfig, list[float]]) -> Benchmark:
    """A benchmark of ``qs`` whose every metric of a configuration is the given score on each question."""
    results = []
    for config, scores in per_config.items():
        rows = tuple(QuestionResult(i, q.corpus_id, q.question, x, x, x, x, ()) for i, (q, x) in
                     enumerate(zip(qs.questions, scores)))
        results.append(ConfigResult(config, MetricSummary.of(rows), {"summary": MetricSummary.of(rows)}, rows, 7, 10.0,
                                    0.1, True))
    return Benchmark(tuple(results), "all-MiniLM-L6-v2", "fp", 5, len(qs), ("summary",), 1.0)


# Ten questions: B ahead of A on every one (by 15 to 25 points); C all over the place around A.
_A = [0.55, 0.62, 0.48, 0.70, 0.66, 0.51, 0.59, 0.64, 0.57, 0.68]
_B = [a + d for a, d in zip(_A, [0.20, 0.15, 0.25, 0.18, 0.22, 0.16, 0.24, 0.19, 0.21, 0.17])]
_C = [0.95, 0.10, 0.90, 0.30, 0.85, 0.05, 0.99, 0.20, 0.75, 0.45]
_D = [0.99, 0.40, 0.98, 0.55, 0.99, 0.35, 0.99, 0.50, 0.97, 0.70]  # as noisy, around B's level


def test_a_difference_on_every_question_is_called_with_its_interval_above_zero():
    qs = _on_doc(10)
    s = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5))], benchmark=_scored_benchmark(qs, {A: _A, B: _B}),
                  questions=qs)
    paired = s.paired("recall")
    assert paired.leaders == ("B",) and paired.questions == 10 and s.best("recall") == "B" and s.leaders("iou") == ["B"]
    diff = paired.differences["A"]
    assert diff.low > 0 and math.isclose(diff.mean, 0.197, abs_tol=1e-9) and diff.n == 10
    a, b = s.row("A").interval("recall"), s.row("B").interval("recall")
    assert (a.n, b.n) == (10, 10) and a.low < a.mean < a.high and b.low < b.mean < b.high
    assert s.row("B").cell("recall") == b.text() == f"{100 * b.mean:.1f}% [{100 * b.low:.1f}, {100 * b.high:.1f}]"
    lines = verdict(s)
    assert lines[1] == (
        f"B has the highest recall ({b.text()} vs {a.text()} for A; difference 19.7 points "
        f"[{100 * diff.low:.1f}, {100 * diff.high:.1f}] over these 10 questions)."
    )
    assert lines[0].startswith("B has the highest IoU (") and lines[0].endswith(" with 5 chunks to A's 4.")


def test_noisy_overlapping_scores_cannot_be_told_apart_and_nothing_is_highlighted():
    qs = _on_doc(10)
    s = summarize(DOC, [("A", _chunking(A, 4)), ("C", _chunking(C, 5))], benchmark=_scored_benchmark(qs, {A: _A, C: _C}),
                  questions=qs)
    assert s.best("recall") is None and s.leaders("recall") == ["A", "C"]
    diff = s.paired("recall").differences["C"]  # A's mean is the higher: A − C
    assert diff.low < 0 < diff.high
    assert verdict(s)[1] == (
        f"A and C cannot be told apart on recall over these 10 questions (difference {100 * diff.mean:.1f} points "
        f"[{100 * diff.low:.1f}, {100 * diff.high:.1f}])."
    )
    assert not any("highest" in line for line in verdict(s))


def test_among_three_the_best_is_called_only_against_every_other():
    qs = _on_doc(10)
    bm = _scored_benchmark(qs, {A: _A, B: _B, C: _D})
    s = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5)), ("C", _chunking(C, 6))], benchmark=bm,
                  questions=qs)
    # B is ahead of A on every question, but C's scores straddle B's: B and C cannot be told apart.
    assert s.paired("iou").leaders == ("B", "C") and s.best("iou") is None and s.leaders("iou") == ["B", "C"]
    assert verdict(s)[0].startswith("B and C cannot be told apart on IoU over these 10 questions (difference ")
    two = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5))], benchmark=bm, questions=qs)
    assert two.best("iou") == "B"


def test_the_intervals_are_the_same_on_every_run():
    qs = _on_doc(10)
    runs = [summarize(DOC, [("A", _chunking(A, 4)), ("C", _chunking(C, 5))],
                      benchmark=_scored_benchmark(qs, {A: _A, C: _C}), questions=qs) for _ in range(2)]
    assert runs[0].to_json() == runs[1].to_json() and runs[0].to_csv() == runs[1].to_csv()
    assert [r.intervals for r in runs[0].rows] == [r.intervals for r in runs[1].rows]


def test_the_json_and_csv_carry_the_retrieval_intervals():
    qs = _on_doc(10)
    s = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5)), ("C", C)],
                  benchmark=_scored_benchmark(qs, {A: _A, B: _B}), questions=qs)
    data = s.to_json()
    ivl = s.row("B").interval("iou")
    assert data["rows"][1]["intervals"]["iou"] == {"mean": ivl.mean, "low": ivl.low, "high": ivl.high, "n": 10,
                                                   "level": 0.95}
    assert data["rows"][1]["values"]["iou"] == ivl.mean and data["rows"][2]["intervals"] == {}  # C: not benchmarked
    assert data["paired"]["iou"]["leaders"] == ["B"] and data["paired"]["iou"]["questions"] == 10
    assert data["paired"]["iou"]["differences"]["A"] == s.paired("iou").differences["A"].to_json()
    assert SUMMARY_CSV_COLUMNS[-12:] == tuple(f"{m}_{p}" for m in GROUPS["retrieval"]
                                             for p in ("ci_low", "ci_high", "questions"))
    rows = list(csv.DictReader(s.to_csv().splitlines()))
    assert (float(rows[1]["iou_ci_low"]), float(rows[1]["iou_ci_high"]), rows[1]["iou_questions"]) == (
        ivl.low, ivl.high, "10")
    assert (rows[2]["iou"], rows[2]["iou_ci_low"], rows[2]["iou_questions"]) == ("", "", "")


def test_means_without_per_question_scores_are_never_called():
    bm = _benchmark((A, {"recall": 0.8, "precision": 0.1, "iou": 0.068, "precision_omega": 0.2}),
                    (B, {"recall": 0.6, "precision": 0.1, "iou": 0.061, "precision_omega": 0.2}))  # means only
    s = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5))], benchmark=bm, questions=QS)
    assert s.row("A").interval("recall") is None and s.row("A").cell("recall") == "80.0%"
    assert s.best("recall") is None and s.paired("recall").known is False
    assert verdict(s)[1] == "A and B cannot be told apart on recall: no per-question scores to pair (80.0% for A vs 60.0% for B)."


def test_one_question_has_no_interval_to_call_a_difference_on():
    qs = _on_doc(1)
    s = summarize(DOC, [("A", _chunking(A, 4)), ("B", _chunking(B, 5))],
                  benchmark=_scored_benchmark(qs, {A: [0.2], B: [0.9]}), questions=qs)
    assert s.row("B").cell("iou") == "90.0% [0.0, 100.0]"  # one score: the metric's whole range
    assert s.best("iou") is None
    assert verdict(s)[0] == (
        "B and A cannot be told apart on IoU on this one question (difference 70.0 points, no interval from one question)."
    )


def test_a_saved_session_reopens_to_the_same_intervals_and_verdict():
    from backend.lab.session import SavedBenchmark, opened_state, state_to_save
    from backend.report.session import DocRef, Session, parse_session, session_to_json

    qs = _on_doc(10)
    bm = _scored_benchmark(qs, {A: _A, C: _C})
    tagged = [("A", _chunking(A, 4)), ("C", _chunking(C, 5))]
    before = summarize(DOC, tagged, benchmark=bm, questions=qs, question_set_name="Import")
    state, notes = state_to_save(SavedBenchmark(bm, ("A", "C"), "Import", qs), None)
    assert notes == ()
    text = session_to_json(Session.make(DocRef.of(DOC), [("A", A), ("C", C)], {}, {}, state))
    opened = opened_state(parse_session(text).state, text_length=len(TEXT)).benchmark
    after = summarize(DOC, tagged, benchmark=opened.benchmark, questions=opened.qset, question_set_name="Import")
    assert after.to_json() == before.to_json() and verdict(after) == verdict(before)
    assert after.row("C").cell("recall") == before.row("C").cell("recall") and after.row("C").interval("recall").n == 10


def test_a_tie_of_three_states_the_best_ones_difference_to_each():
    s = Summary("d", "id", (_row("A", recall=0.5), _row("B", recall=0.5), _row("C", recall=0.501)))
    p = s.paired("recall")
    assert p.leaders == ("C", "A", "B") and s.leaders("recall") == ["A", "B", "C"]
    assert verdict(s)[0] == (
        "C, A and B cannot be told apart on recall over these 10 questions (differences from C: A 0.1 points "
        f"[{100 * p.differences['A'].low:.1f}, {100 * p.differences['A'].high:.1f}], B 0.1 points "
        f"[{100 * p.differences['B'].low:.1f}, {100 * p.differences['B'].high:.1f}])."
    )
