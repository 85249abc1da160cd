"""backend/figures: the shared trace helpers and the Meta-Chunking page's figures (data in, figure out, no Streamlit)."""

from __future__ import annotations

import math

import numpy as np

from backend.chunkers.meta.algorithms import MarginStep, boundaries_at, boundary_candidates, theta_curve
from backend.chunkers.meta.results import PPLScores
from backend.text.document import Document
from backend.figures.charts import PREVIEW_CHARS, preview
from backend.figures.ppl import chunk_curve, drops_histogram, margin_chart, values_chart
from backend.figures.traces import BOUNDARY_LINES_MAX, RUG_FRACTION, boundary_segments, finite, segments
from tests.support.fake_scores import fake_token_scores

DOC = Document.from_text("A <b>cat</b> sat. It was warm. Dogs & cats bark. Rain fell. We left. Night came. All slept.")
VALUES = [3.0, 1.0, 1.25, 0.75, 2.5, 2.0, 2.25]  # reference drops: sentence 1 → 2.0, 3 → 1.75, 5 → 0.5


def test_preview_is_one_escaped_line_of_at_most_preview_chars() -> None:
    assert [preview("a <b>x</b>\n\n  & y"), preview("word " * 40)] == [
        "a &lt;b&gt;x&lt;/b&gt; &amp; y",
        "word " * 15 + "word…",
    ]
    assert len(preview("word " * 40)) == PREVIEW_CHARS


def test_finite_and_segments_pin_the_one_trace_encoding() -> None:
    assert finite([1, math.nan, 2.5, math.inf, -math.inf]) == [1.0, None, 2.5, None, None]
    assert segments([(0, 1), (2, 2)], [(5, 6), (7, 8)]) == ([0, 1, None, 2, 2, None], [5, 6, None, 7, 8, None])
    assert segments([], []) == ([], [])


def test_values_chart_draws_the_backends_boundaries_escaped() -> None:
    scores = PPLScores.build(DOC, fake_token_scores(DOC.text), "m", "M")
    cuts = boundaries_at(boundary_candidates(VALUES), 0.6, "reference")
    fig = values_chart(scores, VALUES, cuts, "mean NLL", revision="r")
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["boundary minimum"].x) == [1, 3]
    assert list(by_name["minimum, drop below θ"].x) == [5]
    assert [x for x in by_name["boundary (after the minimum)"].x if x is not None] == [1.5, 1.5, 3.5, 3.5]
    assert list(by_name["θ above a minimum (kept off)"].y[:2]) == [2.0, 2.6]  # from the value up by θ
    line = by_name["mean NLL"]
    assert line.customdata[0][0] == "A &lt;b&gt;cat&lt;/b&gt; sat." and "<b>" not in str(line.customdata)


def test_drops_histogram_and_theta_curve_follow_the_backend() -> None:
    candidates = boundary_candidates(VALUES)
    hist = drops_histogram(candidates, boundaries_at(candidates, 0.6, "reference"))
    assert {t.name: sorted(t.x) for t in hist.data} == {"no cut": [0.5], "boundary": [1.75, 2.0]}
    curve = theta_curve(candidates, "reference", len(VALUES), 30, 0.0, 2.0, 5)
    fig = chunk_curve(curve, 1.0, "cl100k tokens")
    assert list(fig.data[0].y) == [4, 4, 3, 3, 3, 2] and list(fig.data[1].y) == [7.5, 7.5, 10.0, 10.0, 10.0, 15.0]


def test_margin_chart_marks_the_splits() -> None:
    steps = [MarginStep(1, 0.2, 0.0, True, 0), MarginStep(2, -0.1, 0.0, False, 1), MarginStep(3, 0.3, 0.0, True, 1)]
    fig = margin_chart(DOC, steps)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["starts a chunk"].x) == [1, 3]
    assert by_name["margin"].customdata[1][0] == "Dogs &amp; cats bark."


def test_boundaries_beyond_the_line_limit_become_ticks_at_the_foot_of_the_axis() -> None:
    assert boundary_segments([1, 2], 0.0, 10.0) == ([1, 1, None, 2, 2, None], [0.0, 10.0, None, 0.0, 10.0, None])
    many = list(range(BOUNDARY_LINES_MAX + 1))
    _, ys = boundary_segments(many, 0.0, 10.0)
    assert set(y for y in ys if y is not None) == {0.0, 10.0 * RUG_FRACTION}


def test_values_chart_draws_230_boundaries_as_ticks() -> None:
    # 461 sentences valued 3, 1, 3, 1, …: every odd sentence is a minimum with a drop of 2, so 230 cuts.
    doc = Document.from_text(" ".join(f"Sentence number {i} ends here." for i in range(461)))
    scores = PPLScores.build(doc, fake_token_scores(doc.text), "m", "M")
    values = [3.0 if i % 2 == 0 else 1.0 for i in range(461)]
    cuts = boundaries_at(boundary_candidates(values), 0.6, "reference")
    assert len(cuts.kept) == 230
    fig = values_chart(scores, values, cuts, "mean NLL")
    assert len(fig.data) == 6 and fig.layout.shapes == ()  # still one trace of boundaries, no shapes
    marks = next(t for t in fig.data if t.name == "boundary (after the minimum)")
    lo, hi = fig.layout.yaxis.range
    assert [x for x in marks.x if x is not None][:4] == [1.5, 1.5, 3.5, 3.5]
    assert set(y for y in marks.y if y is not None) == {lo, lo + (hi - lo) * RUG_FRACTION}
    assert marks.line.dash == "solid"


def test_curve_chart_draws_230_boundaries_as_ticks_and_60_as_lines() -> None:
    from backend.curves import Curve
    from backend.figures.curves import curve_chart

    units = tuple((2 * i, 2 * i + 1) for i in range(461))
    values = np.array([3.0 if i % 2 == 0 else 1.0 for i in range(461)])
    for count, full in ((230, False), (BOUNDARY_LINES_MAX, True)):
        curve = Curve(units, values, "sentence", "mean token NLL", "sentence", boundaries=tuple(range(1, 2 * count, 2)))
        fig = curve_chart(curve, "x " * 461, "#2563eb", "A")
        marks = next(t for t in fig.data if t.name == "chunk boundary")
        lo, hi = fig.layout.yaxis.range
        assert len([x for x in marks.x if x is not None]) == 2 * count and fig.layout.shapes == ()
        assert set(y for y in marks.y if y is not None) == ({lo, hi} if full else {lo, lo + (hi - lo) * RUG_FRACTION})
