"""Figures of the multi-granularity retrievers' live answers: router weights, the level ladder, MoGG's graph.

Pure builders (no Streamlit): data in, ``go.Figure`` out. :func:`ladder_parts` turns a
:class:`~backend.retrieval.multi.retrievers.LiveRetrieval` into the ladder's rows and outlines,
so :func:`ladder_figure` can be tested on hand-built inputs. MoGG's graph is drawn with the
Quality page's arc diagram (:func:`backend.figures.quality.arc_diagram`). Document text
reaches hover labels only escaped (:func:`backend.figures.quality.head_preview`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from backend.figures.quality import arc_diagram, head_preview
from backend.retrieval.multi.graph import Graph
from backend.retrieval.multi.retrievers import LiveRetrieval

__all__ = [
    "Rung",
    "Outline",
    "ladder_parts",
    "ladder_figure",
    "weights_figure",
    "graph_figure",
    "picks_graph_figure",
    "degree_histogram",
    "PICK_COLOR",
]

Range = tuple[int, int]
PICK_COLOR = "#dc2626"  # outlines of what a retriever emitted
_WEIGHT_COLOR = "#94a3b8"
_CHOSEN_COLOR = "#2563eb"
_IOU_COLOR = "#16a34a"
_SCALE = "Blues"


@dataclass(frozen=True)
class Rung:
    """One row of the ladder: a level's name and its candidates as ``(ranges, similarity)``, best first."""

    name: str
    candidates: tuple[tuple[tuple[Range, ...], float], ...]


@dataclass(frozen=True)
class Outline:
    """An emitted pick on the ladder: its ranges, its rank, and its row (None: across every row)."""

    ranges: tuple[Range, ...]
    rank: int
    row: int | None


def ladder_parts(live: LiveRetrieval) -> tuple[list[Rung], list[Outline]]:
    """The ladder of a live answer: each level's candidates, and its picks.

    MoG(G)'s picks sit on the chosen level's row; FreeChunker's assembled runs span every
    row (a run merges entries of several granularities).
    """
    rungs = [
        Rung(level.name, tuple((h.ranges, float(h.similarity)) for _, h in cands))
        for level, cands in zip(live.index.levels, live.candidates)
    ]
    sel = live.selection
    row = None if sel.level is None else sel.level - 1
    outlines = [Outline(p.ranges, rank, row) for rank, p in enumerate(sel.picks, 1)]
    return rungs, outlines


def _shade(similarity: float, low: float, high: float) -> str:
    """A colour of the Blues scale: the weakest candidate shown lightest, the best darkest."""
    t = 0.5 if high <= low else (similarity - low) / (high - low)
    return sample_colorscale(_SCALE, [0.25 + 0.75 * float(np.clip(t, 0.0, 1.0))])[0]


def ladder_figure(rungs: Sequence[Rung], outlines: Sequence[Outline], length: int, *, title: str = "") -> go.Figure:
    """One row per level along the document (x = character offset): candidates shaded, picks outlined.

    Every candidate range is a filled rectangle on its level's row (darker = more similar to
    the query; the hover of its centre gives level, rank and similarity); every pick range an
    unfilled red rectangle on its row, or across all rows when its row is None. Shapes come
    in that order: all candidate rectangles, then all outlines. ``fig.layout.meta`` holds
    ``rows``, ``candidates`` and ``picks`` (rectangles of each).

    Args:
        rungs: The rows, finest level first (drawn at the bottom).
        outlines: The emitted picks.
        length: The document's length in characters.
        title: The figure's title.
    """
    sims = [s for r in rungs for _, s in r.candidates]
    low, high = (min(sims), max(sims)) if sims else (0.0, 1.0)
    shapes: list[dict] = []
    hx: list[float] = []
    hy: list[int] = []
    hover: list[list[object]] = []
    for y, rung in enumerate(rungs):
        for rank, (ranges, sim) in enumerate(rung.candidates, 1):
            fill = _shade(sim, low, high)
            for s, e in ranges:
                shapes.append({
                    "type": "rect", "x0": s, "x1": max(e, s + 1), "y0": y - 0.35, "y1": y + 0.35,
                    "fillcolor": fill, "line": {"width": 0.5, "color": "#ffffff"}, "layer": "below",
                })
            hx.append((ranges[0][0] + ranges[-1][1]) / 2)
            hy.append(y)
            hover.append([rung.name, rank, sim, len(ranges), ranges[0][0], ranges[-1][1]])
    n_candidates = len(shapes)
    top = len(rungs) - 1
    for o in outlines:
        y0, y1 = (-0.45, top + 0.45) if o.row is None else (o.row - 0.45, o.row + 0.45)
        for s, e in o.ranges:
            shapes.append({
                "type": "rect", "x0": s, "x1": max(e, s + 1), "y0": y0, "y1": y1,
                "line": {"color": PICK_COLOR, "width": 2}, "fillcolor": "rgba(0,0,0,0)",
            })
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=hx, y=hy, mode="markers",
        marker={"size": 6, "color": [h[2] for h in hover], "colorscale": _SCALE, "cmin": low, "cmax": high,
                "opacity": 0.01, "showscale": bool(hover),
                "colorbar": {"title": {"text": "similarity"}, "thickness": 10, "len": 0.9}},
        customdata=hover, showlegend=False, name="candidates",
        hovertemplate="%{customdata[0]} · rank %{customdata[1]} · similarity %{customdata[2]:.3f}<br>"
        "%{customdata[3]} range(s), characters %{customdata[4]:,}–%{customdata[5]:,}<extra></extra>",
    ))
    for o in outlines:  # the pick's rank, above its first range
        fig.add_annotation(
            x=o.ranges[0][0], y=(top if o.row is None else o.row) + 0.45, text=f"#{o.rank}", showarrow=False,
            xanchor="left", yanchor="bottom", font={"size": 10, "color": PICK_COLOR},
        )
    fig.update_layout(
        height=90 + 42 * max(len(rungs), 1),
        margin={"l": 10, "r": 10, "t": 30 if title else 10, "b": 30},
        title={"text": title, "font": {"size": 13}} if title else None,
        shapes=shapes,
        xaxis={"range": [0, max(length, 1)], "title": {"text": "character offset"}, "tickformat": ",d",
               "showgrid": False},
        yaxis={"tickvals": list(range(len(rungs))), "ticktext": [r.name for r in rungs],
               "range": [-0.6, max(top, 0) + 0.8], "showgrid": False, "zeroline": False},
        plot_bgcolor="#ffffff",
        meta={"rows": len(rungs), "candidates": n_candidates, "picks": len(shapes) - n_candidates},
    )
    return fig


def weights_figure(
    level_names: Sequence[str], weights: Sequence[float], chosen: int, similarities: Sequence[float] | None = None
) -> go.Figure:
    """The router's weight per level as bars, the chosen level in blue and labelled; each level's top-1 IoU beside.

    Args:
        level_names: One name per level, finest first.
        weights: The router's weights.
        chosen: The chosen level, 1-based.
        similarities: Each level's top-1 IoU with the marked answer (None: not marked).
    """
    names = list(level_names)
    w = [float(x) for x in weights]
    colors = [_CHOSEN_COLOR if i == chosen - 1 else _WEIGHT_COLOR for i in range(len(w))]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=names, y=w, name="router weight", marker={"color": colors},
        text=["chosen" if i == chosen - 1 else "" for i in range(len(w))], textposition="outside",
        hovertemplate="%{x}<br>weight %{y:.3f}<extra></extra>",
    ))
    if similarities is not None:
        fig.add_trace(go.Bar(
            x=names, y=[float(s) for s in similarities], name="top-1 IoU with the answer",
            marker={"color": _IOU_COLOR}, hovertemplate="%{x}<br>top-1 IoU %{y:.3f}<extra></extra>",
        ))
    peak = max([*w, *(similarities if similarities is not None else []), 1e-9])
    fig.update_layout(
        height=260,
        barmode="group",
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        yaxis={"range": [0, 1.2 * peak], "title": {"text": "weight · IoU"}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        showlegend=True,
        meta={"chosen": int(chosen), "levels": len(w)},
    )
    return fig


def graph_figure(
    graph: Graph, node_texts: Sequence[str], highlight: Sequence[int], color: str, *, title: str = ""
) -> go.Figure:
    """MoGG's node graph as an arc diagram: nodes in document order, one arc per edge, emitted nodes in red.

    Args:
        graph: The graph (possibly raised to a higher threshold).
        node_texts: Each node's text (shown escaped in its hover).
        highlight: The nodes of the emitted neighbourhoods.
        color: The configuration's colour.
        title: The title (default: edges and threshold).
    """
    degree = graph.degrees()
    edges = [(i, j) for i, j, _ in graph.edges]
    return arc_diagram(
        graph.n, edges, color,
        customdata=[[int(degree[k]), head_preview(t)] for k, t in enumerate(node_texts)],
        hovertemplate="node %{x} · degree %{customdata[0]}<br><i>%{customdata[1]}</i><extra></extra>",
        title=title or f"{len(edges):,} edges at t_graph ≥ {graph.t_graph:g}",
        meta={"t_graph": graph.t_graph},
        highlight=highlight,
        highlight_color=PICK_COLOR,
    )


def picks_graph_figure(live: LiveRetrieval, graph: Graph, color: str) -> go.Figure:
    """MoGG's ``graph`` (its live answer's, possibly at a higher threshold) with the nodes its picks cover in red."""
    nodes = sorted({u for p in live.selection.picks for u in p.units})
    return graph_figure(graph, [c.text for c in live.index.units.chunks], nodes, color)


def degree_histogram(degrees: Sequence[int], color: str) -> go.Figure:
    """How many nodes have each degree (0 … the largest)."""
    counts = np.bincount(np.asarray(degrees, dtype=np.int64)) if len(degrees) else np.zeros(1, np.int64)
    fig = go.Figure(go.Bar(
        x=list(range(len(counts))), y=counts.tolist(), marker={"color": color},
        hovertemplate="degree %{x}: %{y} node(s)<extra></extra>",
    ))
    fig.update_layout(
        height=220,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis={"title": {"text": "degree"}, "dtick": 1},
        yaxis={"title": {"text": "nodes"}},
        bargap=0.1,
        meta={"nodes": int(counts.sum())},
    )
    return fig
