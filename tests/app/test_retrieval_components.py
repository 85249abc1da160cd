"""components/retrieval.py on hand-built inputs: the document view, excerpt marking, scores, tables and figures."""

from __future__ import annotations

import io
import re
import zipfile

import numpy as np
import pytest

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.text.document import Document
from backend.errors import InputError, ParameterError
from backend.retrieval.evaluate import Benchmark, ConfigResult, MetricSummary, QuestionResult, RetrievedChunk
from backend.retrieval.questions import Question, QuestionSet, Reference, parse_questions_csv, read_corpus_text
from backend.retrieval.store import Hit
from components.retrieval import (
    Layer,
    add_questions,
    agreement_heatmaps,
    corpora_from_files,
    coverage_rows,
    coverage_strip,
    find_excerpts,
    highlight_html,
    hits_frame,
    live_scores,
    md_text,
    metric_bars,
    question_heatmap,
    question_set_zip,
    scores_frame,
    similarity_histogram,
    split_excerpts,
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


def test_hits_frame_is_plain_text_previews() -> None:
    text = "<b>one</b>\n\ntwo three"
    frame = hits_frame([_hit(1, 0, 10), _hit(2, 12, 21)], text)
    assert list(frame["rank"]) == [1, 2] and list(frame["start"]) == [0, 12]
    assert list(frame["text"]) == ["<b>one</b>", "two three"]


# --- marking and scoring ----------------------------------------------------------------------------


def test_excerpts_are_found_exactly_or_ignoring_whitespace() -> None:
    text = "Alpha beta.\nGamma   delta epsilon.\n\nZeta eta."
    assert split_excerpts("one\n---\n\ntwo\n  ---  \n\n") == ["one", "two"]
    assert find_excerpts(text, "Alpha beta.") == [(0, 11)]
    assert find_excerpts(text, "beta. Gamma delta") == [(6, 25)]
    assert find_excerpts(text, "Zeta eta.\n---\ndelta  epsilon") == [(36, 45), (20, 33)]
    with pytest.raises(ParameterError, match="excerpt 2 'omega' is not in the document"):
        find_excerpts(text, "Zeta\n---\nomega")
    with pytest.raises(ParameterError, match="paste"):
        find_excerpts(text, "  \n---\n")


def test_live_scores_are_the_reports_metrics() -> None:
    text = "x" * 40
    chunkings = {"A": _chunking([(0, 10), (10, 20), (20, 30), (30, 40)], text)}
    hits = {"A": [_hit(1, 10, 20), _hit(2, 20, 30)]}
    # Two marks that overlap are one answer (their union), not counted twice.
    s = live_scores(hits, chunkings, [(15, 22), (20, 25)])["A"]
    assert (s.recall, s.precision, s.iou) == (1.0, 0.5, 0.5)
    # Precision-Ω: chunks 10-20 and 20-30 meet the answer; |answer| / |their union| = 10 / 20.
    assert s.precision_omega == 0.5
    s = live_scores({"A": [_hit(1, 0, 10), _hit(2, 20, 30)]}, chunkings, [(15, 25)])["A"]
    assert (s.recall, s.precision, s.iou) == (0.5, 0.25, 5 / 25)
    frame = scores_frame({"A": s}, {"A": 1.5})
    assert frame.loc["A", "recall"] == 50.0 and frame.loc["A", "cp"] == 1.5
    assert list(scores_frame({"A": s}).columns) == ["recall", "precision", "precision_omega", "iou"]


# --- question sets -----------------------------------------------------------------------------------


def test_saved_questions_export_and_import_in_the_chroma_format() -> None:
    doc = Document.from_text("First line.\nSecond <b>line</b>.\n", source="my notes.md")
    qset = add_questions(None, doc, "What is second?", [(12, 30), (12, 18)])
    (q,) = qset.questions
    assert q.corpus_id == "my_notes" and q.references == (Reference("Second <b>line</b>", 12, 30),)
    other = Document.from_text("Another text.", source="my notes.txt")
    qset = add_questions(qset, other, "Which text?", [(0, 7)])
    assert [q.corpus_id for q in qset.questions] == ["my_notes", f"my_notes-{other.id[:8]}"]
    with pytest.raises(ParameterError, match="mark"):
        add_questions(qset, doc, "No marks?", [])
    with zipfile.ZipFile(io.BytesIO(question_set_zip(qset))) as z:
        names = sorted(z.namelist())
        csv_text = z.read("questions.csv")
        corpora = {n.split("/")[1].rsplit(".", 1)[0]: read_corpus_text(z.read(n)) for n in names if n.startswith("corpora/")}
    assert names == ["corpora/my_notes-" + other.id[:8] + ".md", "corpora/my_notes.md", "questions.csv"]
    assert parse_questions_csv(csv_text, corpora) == qset


def test_uploaded_corpora_need_md_or_txt_and_distinct_ids() -> None:
    corpora, suffixes = corpora_from_files([("a.md", b"A\r\ntext"), ("b.txt", b"B")])
    assert corpora == {"a": "A\ntext", "b": "B"} and suffixes == {"a": ".md", "b": ".txt"}
    with pytest.raises(InputError, match="notes.pdf"):
        corpora_from_files([("notes.pdf", b"%PDF")])
    with pytest.raises(InputError, match="two corpus files are named a"):
        corpora_from_files([("a.md", b"x"), ("a.txt", b"y")])


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
    bm, _ = _benchmark()
    table = summary_frame(bm, ["A", "B"])
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
