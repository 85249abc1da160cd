"""The retrieval lab's views and figures on hand-built inputs: the document view, tables, heat maps, strips.

``backend/figures/retrieval_html.py`` (HTML), ``components/retrieval.py`` (tables) and
``backend/figures/retrieval.py`` (Plotly);
the rules they draw (marking, scoring, question sets, coverage) are tested in
``tests/backend/retrieval``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.retrieval.evaluate import (
    Benchmark,
    ConfigResult,
    MetricSummary,
    QuestionResult,
    RetrievedChunk,
    coverage_rows,
)
from backend.figures.retrieval_html import ANSWER_TEXT_CHARS, Layer, answer_html, highlight_html
from backend.lab.benchmark import benchmark_view
from backend.lab.retrieval import SearchView, scores_view
from backend.retrieval.questions import Question, QuestionSet, Reference
from backend.retrieval.retriever.chunks import ChunkAnswer
from backend.retrieval.store import Hit
from backend.figures.retrieval import (
    agreement_heatmaps,
    coverage_strip,
    metric_bars,
    question_heatmap,
    similarity_histogram,
)
from components.retrieval import (
    COST_COLUMNS,
    SCORE_COLUMNS,
    md_text,
    questions_frame,
    scores_frame,
    summary_column_config,
    summary_frame,
)

_SPAN = re.compile(r"<span([^>]*)>([^<]*)</span>")


def _chunking(spans: list[tuple[int, int]], text: str, name: str = "fixed_token", doc_id: str = "d") -> Chunking:
    chunks = tuple(Chunk(i, s, e, text[s:e], e - s) for i, (s, e) in enumerate(spans))
    return Chunking(ChunkerConfig(name, (("chunk_size", len(spans)),)), chunks, 0.0, doc_id, len(text))


def _hit(rank: int, start: int, end: int) -> Hit:
    return Hit(rank, 0.1 * rank, start, end, rank - 1, end - start)


# --- the document view ---------------------------------------------------------------------------


def test_highlight_colours_each_configuration_stripes_shared_text_and_underlines_the_answer() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    layers = [Layer("A", "#2563eb", ((10, 20, 1),)), Layer("B", "#d97706", ((15, 30, 2),))]
    out = highlight_html(text, layers, [(18, 25)], context=5)
    segments = [(attrs, seg) for attrs, seg in _SPAN.findall(out) if "rt-rank" not in attrs and "cl-more" not in attrs]
    # Only characters 5..35 are shown: the spans widened by the context.
    assert "".join(seg for _, seg in segments) == text[5:35]
    by_text = {seg: attrs for attrs, seg in segments}
    assert "cl-gap" in by_text[text[5:10]] and "cl-gap" in by_text[text[30:35]]
    assert "background:#2563eb40" in by_text[text[10:15]]  # A alone
    for both in (text[15:18], text[18:20]):  # A and B: stripes of both colours
        assert "repeating-linear-gradient" in by_text[both] and "#2563eb55" in by_text[both] and "#d9770655" in by_text[both]
    assert "background:#d9770640" in by_text[text[25:30]]  # B alone
    answered = [seg for attrs, seg in segments if "rt-ans" in attrs]
    assert "".join(answered) == text[18:25]
    # Rank badges where each configuration's chunk starts.
    assert 'title="A: rank 1">A1</span>' in out
    assert 'title="B: rank 2">B2</span>' in out
    assert "characters 5–35" in out


def test_highlight_escapes_document_text_and_tags() -> None:
    text = 'Intro. <script>alert("x")</script> & <b>bold</b> end.'
    out = highlight_html(text, [Layer("<i>A", "#2563eb", ((0, len(text), 1),))], [(7, 35)])
    assert "<script>" not in out and "<b>" not in out and "<i>A" not in out
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in out
    assert "&amp; &lt;b&gt;bold&lt;/b&gt;" in out
    assert "&lt;i&gt;A1" in out


def test_highlight_without_spans_and_beyond_the_cap() -> None:
    assert "Nothing retrieved" in highlight_html("abc", [])
    text = "x" * 1000
    layers = [Layer("A", "#2563eb", ((0, 100, 1), (600, 700, 2)))]
    out = highlight_html(text, layers, context=0, max_chars=150)
    assert "characters 0–100" in out and "characters 600–650" in out
    assert "more retrieved text not shown" not in out
    out = highlight_html(text, layers, context=0, max_chars=100)
    assert "more retrieved text not shown" in out and "600" not in out


def test_a_chunkings_answer_table_wraps_each_chunks_escaped_text_beside_its_numbers() -> None:
    text = "<b>one</b>\n\ntwo three " + "word " * 200
    chunking = _chunking([(0, 10), (12, 1_012)], text)
    out = answer_html(ChunkAnswer(chunking.config, chunking, (_hit(1, 0, 10), _hit(2, 12, 1_012))).table(), text)
    rows = re.findall(
        r'<tr><td class="rk">(\d+)</td><td class="tx">([^<]*)</td><td class="nm">([^<]*)<br>([^<]*)<br>([^<]*)</td></tr>', out
    )
    assert [r[0] for r in rows] == ["1", "2"]
    assert rows[0][1:] == ("&lt;b&gt;one&lt;/b&gt;", "0.100", "10 tok", "0–10")
    assert rows[1][2:] == ("0.200", "1,000 tok", "12–1,012")
    # Long chunks show their first ANSWER_TEXT_CHARS characters (whitespace collapsed), not a few words.
    assert len(rows[1][1]) == ANSWER_TEXT_CHARS and rows[1][1].startswith("two three word") and rows[1][1].endswith("…")
    assert "<b>" not in out


def test_benchmark_summary_columns_have_fixed_widths_that_fit_a_1280_pixel_screen() -> None:
    config = summary_column_config()
    assert list(config) == ["_index", "chunker", "Recall", "Precision", "Precision-Ω", "IoU", "chunks", "mean tokens",
                            "seconds", "retrieved tokens", "texts embedded", "index seconds", "query ms"]
    assert set(SCORE_COLUMNS) | set(COST_COLUMNS) == set(config) - {"_index"}
    # The main column of the wide layout is about 820 pixels wide on a 1280-pixel screen: each view fits.
    for view in (SCORE_COLUMNS, COST_COLUMNS):
        assert sum(config[c]["width"] for c in ("_index", *view)) <= 820


# --- scores and question sets ----------------------------------------------------------------------


def test_scores_frame_is_percent_per_configuration_with_cp_when_given() -> None:
    text = "x" * 40
    chunking = _chunking([(0, 10), (10, 20), (20, 30), (30, 40)], text)
    answer = ChunkAnswer(chunking.config, chunking, (_hit(1, 0, 10), _hit(2, 20, 30)))
    view = SearchView(tags=("A",), answers={"A": answer})
    frame = scores_frame(scores_view(view, [(15, 25)], {"A": 1.5}))
    assert frame.loc["A", "recall"] == 50.0 and frame.loc["A", "cp"] == 1.5
    assert list(scores_frame(scores_view(view, [(15, 25)])).columns) == [
        "recall", "precision", "precision_omega", "iou", "omega_on"]


def test_questions_frame_is_one_plain_row_per_question() -> None:
    corpus = "First line.\nSecond <b>line</b>.\n"
    qset = QuestionSet(
        (Question("What is second?", (Reference(corpus[12:30], 12, 30), Reference(corpus[0:5], 0, 5)), "notes"),),
        {"notes": corpus},
    )
    assert questions_frame(qset).to_dict("records") == [
        {"question": "What is second?", "corpus_id": "notes", "excerpts": 2, "characters": 23,
         "first_excerpt": "Second <b>line</b>"}
    ]


# --- the benchmark's tables and figures ------------------------------------------------------------


def _benchmark() -> tuple[Benchmark, QuestionSet]:
    corpus = "c" * 100
    qset = QuestionSet(
        (
            Question("q1 <b>?", (Reference(corpus[0:10], 0, 10),), "doc"),
            Question("q2", (Reference(corpus[50:60], 50, 60),), "doc"),
        ),
        {"doc": corpus},
    )
    results = []
    for name, scores, retrieved in (
        ("A", [(1.0, 0.5), (0.0, 0.0)], [[(0, 20), (10, 30)], [(20, 40)]]),
        ("B", [(0.5, 0.25), (1.0, 1.0)], [[(90, 100)], [(50, 60)]]),
    ):
        questions = tuple(
            QuestionResult(
                i, "doc", qset.questions[i].question, r, p, 0.9, p,
                tuple(RetrievedChunk("doc", s, e, 0, 0.1) for s, e in retrieved[i]),
            )
            for i, (r, p) in enumerate(scores)
        )
        results.append(
            ConfigResult(ChunkerConfig(name.lower()), MetricSummary.of(questions), {"doc": MetricSummary.of(questions)},
                         questions, 10, 10.0, 0.1, False)
        )
    return Benchmark(tuple(results), "minilm", "fp", 5, 2, ("doc",), 0.2), qset


def test_summary_table_is_mean_plus_minus_population_std_in_percent() -> None:
    bm, qset = _benchmark()
    table = summary_frame(benchmark_view(bm, {"tags": ["A", "B"], "colors": ["#111111", "#222222"], "qset": qset}))
    assert table.loc["A", "Recall"] == "50.0 ± 50.0"
    assert table.loc["B", "Recall"] == "75.0 ± 25.0"
    assert table.loc["B", "Precision"] == "62.5 ± 37.5"
    assert table.loc["A", "Precision-Ω"] == "90.0 ± 0.0"
    fig = metric_bars(bm, ["A", "B"], ["#111111", "#222222"])
    assert list(fig.data[1].y) == pytest.approx([75.0, 62.5, 90.0, 62.5])
    assert list(fig.data[1].error_y.array) == pytest.approx([25.0, 37.5, 0.0, 37.5])


def test_question_heatmap_is_questions_by_configurations() -> None:
    bm, qset = _benchmark()
    fig = question_heatmap(bm.matrix("recall"), [q.question for q in qset.questions], ["A", "B"], "recall")
    (trace,) = fig.data
    assert np.array_equal(np.asarray(trace.z), [[100.0, 50.0], [0.0, 100.0]])
    assert list(trace.y) == ["Q1", "Q2"] and list(trace.x) == ["A", "B"]
    assert trace.customdata[0][0] == "q1 &lt;b&gt;?"  # hover text is escaped
    with pytest.raises(ParameterError):
        question_heatmap(bm.matrix("iou"), ["only one"], ["A", "B"], "iou")


def test_agreement_heatmaps_on_hand_built_chunkings() -> None:
    text = "y" * 100
    a = _chunking([(0, 10), (10, 50), (50, 100)], text)  # boundaries 10, 50
    b = _chunking([(0, 12), (12, 80), (80, 100)], text)  # boundaries 12, 80
    c = _chunking([(0, 10), (10, 50), (50, 100)], text)  # the same spans as a
    fig_b, fig_o, bounds, overlap = agreement_heatmaps([a, b, c], ["A", "B", "C"], tolerance=0)
    assert bounds[0, 1] == 0.0 and bounds[0, 2] == 1.0 and np.all(np.diag(bounds) == 1.0)
    _, _, bounds2, _ = agreement_heatmaps([a, b, c], ["A", "B", "C"], tolerance=2)
    assert bounds2[0, 1] == pytest.approx(1 / 3)  # 10~12 match, 50 and 80 do not: 1 / (2 + 2 - 1)
    assert overlap[0, 2] == 1.0 and 0 < overlap[0, 1] < 1 and overlap[0, 1] == overlap[1, 0]
    assert np.array_equal(np.asarray(fig_b.data[0].z), bounds) and list(fig_o.data[0].x) == ["A", "B", "C"]
    with pytest.raises(ParameterError):
        agreement_heatmaps([a, _chunking([(0, 100)], text, doc_id="other")], ["A", "X"], 0)


def test_coverage_rows_count_questions_per_stretch() -> None:
    bm, qset = _benchmark()
    rows, excerpts = coverage_rows(bm, qset, "doc", bins=10)
    # A: question 1 retrieved 0-20 and 10-30 (one question, counted once), question 2 retrieved 20-40.
    assert rows[0].tolist() == [1, 1, 2, 1, 0, 0, 0, 0, 0, 0]
    assert rows[1].tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert excerpts.tolist() == [1, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    fig = coverage_strip(rows, excerpts, ["A", "B"], 100)
    assert list(fig.data[0].y) == ["A", "B", "excerpts"] and np.asarray(fig.data[0].z).shape == (3, 10)
    with pytest.raises(ParameterError):
        coverage_rows(bm, qset, "missing", bins=10)


def test_similarity_histogram_draws_the_threshold() -> None:
    fig = similarity_histogram([0.1, 0.5, 0.9], 0.7, "similarity", "below")
    assert list(fig.data[0].x) == [0.1, 0.5, 0.9]
    (line,) = fig.layout.shapes
    assert line.x0 == line.x1 == 0.7


def test_md_text_neutralises_markdown() -> None:
    assert md_text("[x](javascript:alert(1)) *b*\n`c`") == r"\[x\]\(javascript\:alert\(1\)\) \*b\* \`c\`"
