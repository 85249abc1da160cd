"""The Meta-Chunking page's figures: per-sentence values with θ, the drops, the θ curve, the margins.

Each takes what the backend computed (:mod:`backend.chunkers.meta.algorithms`'s candidates,
:class:`~backend.chunkers.meta.algorithms.Boundaries` and
:class:`~backend.chunkers.meta.algorithms.ThetaCurve`; margin sampling's steps) and draws it: no
rule is decided here. Every series is one trace (see :mod:`backend.figures.traces`).
Sentence text reaches a hover label only through :func:`backend.figures.charts.preview` (escaped, shortened).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from backend.chunkers.meta.algorithms import Boundaries, Candidate, MarginStep, ThetaCurve
from backend.chunkers.meta.results import PPLScores
from backend.text.document import Document
from backend.figures.charts import preview
from backend.figures.traces import BOUNDARY_LINES_MAX, boundary_segments, finite, segments

__all__ = ["values_chart", "drops_histogram", "chunk_curve", "margin_chart"]

_BOUNDARY = "#dc2626"
_LINE = "#2563eb"
_MUTED = "#94a3b8"
_BAR_WIDTH = 0.28  # half-width of the tick on top of a θ bar, in sentences


def values_chart(
    scores: PPLScores,
    values: Sequence[float],
    boundaries: Boundaries,
    value_name: str,
    revision: str = "",
) -> go.Figure:
    """The per-sentence values with minima, boundaries and θ drawn on the drops.

    - the line: one point per sentence (hover: the sentence, escaped and shortened, its
      value and its token count);
    - each drawn minimum gets a bar from its value up by θ with a tick at the top: under the
      reference rule it is a boundary when the *higher* neighbour reaches the tick, under the
      paper rule when *both* neighbours pass it;
    - minima that are boundaries: red triangles, with a dotted red line after them (the
      sentence at a minimum is the last of its chunk; beyond
      :data:`~backend.figures.traces.BOUNDARY_LINES_MAX` boundaries, a short tick at the
      foot of the axis instead); the others: hollow grey circles.

    Args:
        scores: The per-sentence scores (hover text and token counts).
        values: The compared value per sentence.
        boundaries: The backend's cuts and drawn minima at θ.
        value_name: The value's axis title.
        revision: Keeps the user's zoom while it stays the same.
    """
    theta, rule = boundaries.threshold, boundaries.rule
    n = len(values)
    y = finite(values)
    kept_set = set(boundaries.kept)
    fig = go.Figure()

    known = [v for v in y if v is not None]
    lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
    pad = (hi - lo) * 0.04 or 0.5
    bx, by = boundary_segments([i + 0.5 for i in sorted(kept_set)], lo - pad, hi + pad)
    ticks = len(kept_set) > BOUNDARY_LINES_MAX
    fig.add_trace(
        go.Scatter(x=bx, y=by, mode="lines", name="boundary (after the minimum)",
                   line={"color": _BOUNDARY, "width": 1.5 if ticks else 1, "dash": "solid" if ticks else "dot"},
                   hoverinfo="skip")
    )

    shown = [c for c in boundaries.drawn if math.isfinite(values[c.index])]
    for is_kept, color, name in ((False, _MUTED, "θ above a minimum (kept off)"), (True, _BOUNDARY, "θ above a boundary")):
        xs, ys = [], []
        for c in shown:
            if (c.index in kept_set) != is_kept:
                continue
            v = float(values[c.index])
            xs += [(c.index, c.index), (c.index - _BAR_WIDTH, c.index + _BAR_WIDTH)]
            ys += [(v, v + theta), (v + theta, v + theta)]
        sx, sy = segments(xs, ys)
        fig.add_trace(go.Scatter(x=sx, y=sy, mode="lines", name=name, line={"color": color, "width": 2},
                                 opacity=0.55 if not is_kept else 0.9, hoverinfo="skip"))

    custom = [[preview(s.text), s.tokens] for s in scores.sentences]
    fig.add_trace(
        go.Scatter(
            x=list(range(n)), y=y, mode="lines+markers", name=value_name, line={"color": _LINE, "width": 1.5},
            marker={"size": 4}, customdata=custom, connectgaps=False,
            hovertemplate=f"sentence %{{x}} · {value_name} %{{y:.3f}} · %{{customdata[1]}} tokens"
            "<br>%{customdata[0]}<extra></extra>",
        )
    )
    op = "≥" if rule == "reference" else ">"
    for is_kept in (False, True):
        sel = [c for c in shown if (c.index in kept_set) == is_kept]
        fig.add_trace(
            go.Scatter(
                x=[c.index for c in sel],
                y=[float(values[c.index]) for c in sel],
                mode="markers",
                name="boundary minimum" if is_kept else "minimum, drop below θ",
                marker=(
                    {"symbol": "triangle-down", "size": 10, "color": _BOUNDARY}
                    if is_kept
                    else {"symbol": "circle-open", "size": 8, "color": _MUTED, "line": {"width": 1.5}}
                ),
                customdata=[c.drop for c in sel],
                hovertemplate=(
                    f"sentence %{{x}} ends a chunk<br>drop %{{customdata:.3f}} {op} θ = {theta:g}<extra></extra>"
                    if is_kept
                    else f"sentence %{{x}}: a minimum<br>drop %{{customdata:.3f}}, not {op} θ = {theta:g}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        height=340,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "sentence"}, "range": [-0.5, max(n - 0.5, 0.5)]},
        yaxis={"title": {"text": value_name}, "range": [lo - pad, hi + pad]},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "font": {"size": 11}},
        hovermode="closest",
        uirevision=revision,
    )
    return fig


def drops_histogram(candidates: Sequence[Candidate], boundaries: Boundaries) -> go.Figure:
    """Histogram of the candidates' finite drops: the boundaries at θ in red, the others grey, θ as a line."""
    cut = set(boundaries.kept)
    finite_drops = [c for c in candidates if math.isfinite(c.drop)]
    drops = np.array([c.drop for c in finite_drops], dtype=np.float64)
    kept = np.array([c.index in cut for c in finite_drops], dtype=bool)
    lo, hi = (float(drops.min()), float(drops.max())) if drops.size else (0.0, 1.0)
    size = max((hi - lo) / 40, 1e-9) if hi > lo else 1.0
    bins = {"start": lo - size / 2, "end": hi + size, "size": size}
    fig = go.Figure()
    for mask, color, name in ((~kept, _MUTED, "no cut"), (kept, _BOUNDARY, "boundary")):
        fig.add_trace(
            go.Histogram(x=drops[mask], xbins=bins, name=name, marker={"color": color}, opacity=0.85,
                         hovertemplate="drop %{x}<br>%{y} sentences<extra>" + name + "</extra>")
        )
    theta = boundaries.threshold
    fig.add_vline(x=theta, line={"color": "#111827", "width": 2, "dash": "dash"},
                  annotation_text=f"θ = {theta:g}", annotation_position="top right")
    fig.update_layout(
        barmode="stack", height=260, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "drop at a candidate sentence"}}, yaxis={"title": {"text": "sentences"}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


def chunk_curve(curve: ThetaCurve, theta: float, unit: str) -> go.Figure:
    """θ → chunk count (left axis) and mean chunk length (right axis), with the current θ; points are clickable."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=curve.thresholds, y=curve.counts, name="chunks", mode="lines+markers",
            line={"color": _LINE, "shape": "hv"}, marker={"size": 3}, customdata=curve.mean_tokens,
            hovertemplate="θ = %{x:.4g}<br>%{y} chunks · ≈ %{customdata:.0f} " + unit + " each<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=curve.thresholds, y=curve.mean_tokens, name=f"mean chunk length ({unit}, ≈)", mode="lines",
            yaxis="y2", line={"color": "#d97706", "shape": "hv", "dash": "dot"}, hoverinfo="skip",
        )
    )
    fig.add_vline(x=theta, line={"color": "#111827", "width": 2, "dash": "dash"})
    fig.update_layout(
        height=260, margin={"l": 10, "r": 10, "t": 30, "b": 10}, clickmode="event+select",
        xaxis={"title": {"text": "θ"}},
        yaxis={"title": {"text": "chunks"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": f"{unit} per chunk"}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                "showgrid": False},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


def margin_chart(doc: Document, steps: Sequence[MarginStep]) -> go.Figure:
    """Margin per sentence (P("1") − P("2")), the adaptive threshold it was compared with, and the splits."""
    text = doc.text
    sentences = doc.sentences
    x = [s.index for s in steps]
    custom = [[preview(text[sentences[s.index].start : sentences[s.index].end]), s.threshold] for s in steps]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=x, y=[s.threshold for s in steps], name="threshold (mean of the last 5 margins)",
                   mode="lines", line={"color": "#d97706", "shape": "hv", "dash": "dash"}, hoverinfo="skip")
    )
    fig.add_trace(
        go.Scatter(
            x=x, y=[s.margin for s in steps], name="margin", mode="lines+markers", line={"color": _LINE, "width": 1.5},
            marker={"size": 4}, customdata=custom,
            hovertemplate="sentence %{x} · margin %{y:.3f} · threshold %{customdata[1]:.3f}"
            "<br>%{customdata[0]}<extra></extra>",
        )
    )
    splits = [s for s in steps if s.split]
    fig.add_trace(
        go.Scatter(
            x=[s.index for s in splits], y=[s.margin for s in splits], name="starts a chunk", mode="markers",
            marker={"symbol": "triangle-up", "size": 10, "color": _BOUNDARY},
            hovertemplate="sentence %{x} starts a chunk (margin ≥ threshold)<extra></extra>",
        )
    )
    fig.add_hline(y=0, line={"color": "#cbd5e1", "width": 1})
    fig.update_layout(
        height=300, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": {"text": "sentence"}}, yaxis={"title": {"text": 'P("1": split) − P("2": keep)'}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig
