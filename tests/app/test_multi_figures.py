"""The retriever figures (backend/figures/multi.py) and HTML views (backend/figures/retrieval_html.py) on hand-built inputs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from backend.retrieval.multi.graph import Graph
from backend.retrieval.multi.select import Pick
from backend.figures.multi import (
    PICK_COLOR,
    Outline,
    Rung,
    degree_histogram,
    graph_figure,
    ladder_figure,
    weights_figure,
)
from backend.figures.quality import arc_diagram
from backend.figures.retrieval_html import answer_html, runs_html
from backend.retrieval.retriever.levels import LevelAnswer


def test_ladder_has_one_row_per_level_a_rectangle_per_candidate_range_and_outlines_per_pick() -> None:
    rungs = [
        Rung("L1", ((((0, 10),), 0.9), (((30, 40),), 0.5))),
        Rung("L2", ((((0, 20),), 0.7),)),
        Rung("2 hops", ((((0, 10), (50, 60)), 0.6),)),  # one candidate of two stretches
    ]
    outlines = [Outline(((0, 20),), 1, 1), Outline(((50, 60), (70, 80)), 2, None)]
    fig = ladder_figure(rungs, outlines, 100)
    assert fig.layout.meta == {"rows": 3, "candidates": 5, "picks": 3}
    assert len(fig.layout.shapes) == 5 + 3
    assert list(fig.layout.yaxis.ticktext) == ["L1", "L2", "2 hops"]
    picks = fig.layout.shapes[5:]
    assert all(s.line.color == PICK_COLOR for s in picks)
    assert (picks[0].y0, picks[0].y1) == (0.55, 1.45)  # on row L2
    assert picks[1].y0 < 0 and picks[1].y1 > 2  # across every row
    fills = [s.fillcolor for s in fig.layout.shapes[:2]]
    assert fills[0] != fills[1]  # shaded by similarity
    assert len(fig.data[0].x) == 4  # one hover point per candidate


def test_weights_chart_marks_the_chosen_level_and_adds_the_iou_series() -> None:
    fig = weights_figure(["L1", "L2", "L3"], [0.1, 0.7, 0.2], 2)
    assert len(fig.data) == 1 and fig.layout.meta["chosen"] == 2
    colors = list(fig.data[0].marker.color)
    assert colors[1] != colors[0] == colors[2]
    assert list(fig.data[0].text) == ["", "chosen", ""]
    fig = weights_figure(["L1", "L2", "L3"], [0.1, 0.7, 0.2], 2, [0.0, 0.4, 0.9])
    assert len(fig.data) == 2 and list(fig.data[1].y) == [0.0, 0.4, 0.9]


def _graph() -> Graph:
    return Graph(6, ((0, 1, 0.9), (0, 3, 0.6), (2, 5, 0.7), (4, 5, 0.55)), "cosine", 3, 0.5)


def test_graph_figure_draws_the_graphs_edges_and_the_highlighted_nodes() -> None:
    g = _graph()
    texts = [f"node <b>{i}</b>" for i in range(6)]
    fig = graph_figure(g, texts, [0, 1], "#2563eb")
    assert fig.layout.meta["edges"] == len(g.edges) == 4
    arcs = sum(1 for t in (fig.data[0], fig.data[2]) for x in t.x if x is None)
    assert arcs == 4  # plain arcs + those touching the highlighted nodes
    assert list(fig.data[3].x) == [0, 1] and fig.data[3].marker.color == PICK_COLOR
    assert "<b>" not in " ".join(str(r[1]) for r in fig.data[1].customdata)
    raised = g.with_threshold(0.65)
    assert graph_figure(raised, texts, [], "#2563eb").layout.meta["edges"] == len(raised.edges) == 2
    hist = degree_histogram(g.degrees().tolist(), "#2563eb")
    assert list(hist.data[0].y) == np.bincount(g.degrees()).tolist() and hist.layout.meta["nodes"] == 6


def test_arc_diagram_without_highlight_is_two_traces() -> None:
    fig = arc_diagram(3, [(0, 2), (2, 1)], "#000", customdata=[[0]] * 3, hovertemplate="%{x}", title="t")
    assert len(fig.data) == 2 and fig.layout.meta["edges"] == 2
    assert sum(1 for x in fig.data[0].x if x is None) == 2


def _live(picks, level):
    levels = [SimpleNamespace(name="L1"), SimpleNamespace(name="L2")]
    return SimpleNamespace(selection=SimpleNamespace(picks=tuple(picks), level=level),
                           index=SimpleNamespace(levels=levels))


def picks_html(live, text: str) -> str:
    """A retriever's top-k table, as the Retrieval page draws it."""
    return answer_html(LevelAnswer(live).table(), text)


def test_picks_table_joins_stretches_with_an_ellipsis_and_escapes_text() -> None:
    text = "<b>alpha</b> beta gamma delta epsilon"
    live = _live([Pick("d", 2, 0, ((0, 12), (24, 29)), 7, 0.8, (0, 2))], 2)
    html = picks_html(live, text)
    assert 'class="rt-hits rt-picks"' in html and "<b>alpha" not in html and "&lt;b&gt;alpha" in html
    assert '<span class="cl-gap">…</span> delta' in html and "L2" in html and "<br>2 stretches" in html
    free = _live([Pick("d", 2, 1, ((13, 23),), 4, 0.5, (1, 2))], None)
    assert "run of 2 units" in picks_html(free, text)


def test_runs_are_highlighted_in_order_with_the_gaps_marked() -> None:
    text = "a" * 10 + "B" * 10 + "c" * 10 + "D" * 10
    picks = [Pick("d", 2, 3, ((30, 40),), 2, 0.9, (3,)), Pick("d", 1, 1, ((10, 20),), 2, 0.5, (1,))]
    html = runs_html(text, picks, "#2563eb")
    assert html.index("B" * 10) < html.index("D" * 10)
    assert html.count("… 10 characters …") == 2  # before the first run and between the two
    assert ">#2<" in html and ">#1<" in html
