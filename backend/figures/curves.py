"""Any chunker's curve (:class:`~backend.curves.Curve`) as one Plotly figure: values, threshold, chunk ends.

One builder for every kind of threshold a chunker compares with — a horizontal line
(semantic), a per-point series (margin sampling) or θ bars on local minima (perplexity
chunking) — so a new chunker with a curve needs no figure code. Unit text reaches a hover
label only through :func:`backend.figures.charts.preview` (escaped, shortened).
"""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from backend.curves import Curve
from backend.figures.charts import legend_with_title, preview
from backend.figures.traces import BOUNDARY_LINES_MAX, boundary_segments, finite, segments

__all__ = ["curve_chart"]

_BOUNDARY = "#475569"
_THRESHOLD = "#111827"
_MUTED = "#94a3b8"
_BAR_WIDTH = 0.28  # half-width of the tick on top of a θ bar, in points


def curve_chart(curve: Curve, doc_text: str, color: str, title: str, revision: str = "") -> go.Figure:
    """A curve's values, its threshold and its chunk ends as one Plotly figure.

    - the values: one point per unit, in ``color`` (hover: the point, its value and the
      unit's text, escaped and shortened);
    - ``threshold``: a dashed horizontal line; ``threshold_series``: a dashed step line;
    - ``drop_threshold`` θ: a bar from each candidate minimum up by θ, with a tick on top (a
      minimum ends a chunk when its neighbours rise past the tick, by the chunker's rule);
    - ``boundaries``: dotted vertical lines through the points that end a chunk (beyond
      :data:`~backend.figures.traces.BOUNDARY_LINES_MAX`, short ticks at the foot of the axis).

    Args:
        curve: The chunker's curve.
        doc_text: The document text the units index.
        color: The configuration's colour.
        title: The chart title (escaped here): the legend's heading, so the two never overlap.
        revision: Keeps the user's zoom while it stays the same.
    """
    n = len(curve)
    y = finite(curve.values)
    known = [v for v in y if v is not None]
    if curve.threshold is not None:
        known.append(curve.threshold)
    if curve.threshold_series is not None:
        known += [v for v in finite(curve.threshold_series) if v is not None]
    if curve.drop_threshold is not None:
        known += [y[i] + curve.drop_threshold for i in curve.candidates if y[i] is not None]
    lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
    pad = (hi - lo) * 0.04 or 0.5
    x_range = [-0.5, max(n - 0.5, 0.5)]
    fig = go.Figure()

    bx, by = boundary_segments(list(curve.boundaries), lo - pad, hi + pad)
    ticks = len(curve.boundaries) > BOUNDARY_LINES_MAX
    fig.add_trace(
        go.Scatter(x=bx, y=by, mode="lines", name="chunk boundary", hoverinfo="skip",
                   line={"color": _BOUNDARY, "width": 1.5 if ticks else 1, "dash": "solid" if ticks else "dot"})
    )
    if curve.drop_threshold is not None and curve.candidates:
        theta = curve.drop_threshold
        xs, ys = [], []
        for i in curve.candidates:
            if y[i] is None:
                continue
            xs += [(i, i), (i - _BAR_WIDTH, i + _BAR_WIDTH)]
            ys += [(y[i], y[i] + theta), (y[i] + theta, y[i] + theta)]
        sx, sy = segments(xs, ys)
        fig.add_trace(
            go.Scatter(x=sx, y=sy, mode="lines", name=f"θ = {theta:g} above a minimum", hoverinfo="skip",
                       line={"color": _MUTED, "width": 2})
        )
    if curve.threshold is not None and math.isfinite(curve.threshold):
        fig.add_trace(
            go.Scatter(x=x_range, y=[curve.threshold] * 2, mode="lines", name=html.escape(curve.threshold_label),
                       line={"color": _THRESHOLD, "width": 1.5, "dash": "dash"},
                       hovertemplate=f"{html.escape(curve.threshold_label)}: %{{y:.4g}}<extra></extra>")
        )
    if curve.threshold_series is not None:
        fig.add_trace(
            go.Scatter(x=list(range(n)), y=finite(curve.threshold_series), mode="lines",
                       name=html.escape(curve.threshold_label), hoverinfo="skip",
                       line={"color": _THRESHOLD, "width": 1.5, "dash": "dash", "shape": "hv"})
        )
    y_name = html.escape(curve.y_label)
    point = html.escape(curve.point_label)
    fig.add_trace(
        go.Scatter(
            x=list(range(n)), y=y, mode="lines+markers", name=y_name, connectgaps=False,
            line={"color": color, "width": 1.5}, marker={"size": 4},
            customdata=[[preview(doc_text[s:e])] for s, e in curve.units],
            hovertemplate=f"{point} %{{x}} · {y_name} %{{y:.3f}}<br>%{{customdata[0]}}<extra></extra>",
        )
    )
    ends = [i for i in curve.boundaries if y[i] is not None]
    fig.add_trace(
        go.Scatter(
            x=ends, y=[y[i] for i in ends], mode="markers", name="ends a chunk",
            marker={"symbol": "triangle-down", "size": 9, "color": _BOUNDARY},
            hovertemplate=f"{point} %{{x}} ends a chunk<extra></extra>",
        )
    )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis={"title": {"text": html.escape(curve.x_label)}, "range": x_range},
        yaxis={"title": {"text": y_name}, "range": [lo - pad, hi + pad]},
        legend=legend_with_title(html.escape(title)),
        hovermode="closest",
        uirevision=revision,
    )
    return fig
