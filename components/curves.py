"""Curves: what a chunker cut on (its values, threshold and chunk ends), drawn by one component.

Any registered chunker that overrides ``Chunker.curve`` (spec ``"has_curve": true``) gets a
curve on the Compare page with no page code: :func:`curves_section` finds them in the
registry and :func:`curve_chart` draws any :class:`~backend.curves.Curve` — a horizontal
threshold (semantic), a per-point threshold (margin sampling) or θ bars on local minima
(perplexity chunking). A model-backed chunker's curve is read from the output cache only
(the same cache-only context as its chunking): a miss says "waiting for the model run" and
never calls a model. Unit text reaches a hover label only escaped and shortened.
"""

from __future__ import annotations

import html
import math
from typing import Any, Callable, Sequence

import plotly.graph_objects as go
import streamlit as st

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.curves import Curve
from backend.text.document import Document
from backend.errors import ChunkLabError, NotCached
from components.cached import specs
from components.charts import _preview
from components.documents import one_line
from components.lm_runs import SessionLM, cache_only_context
from components.ppl import _finite, _segments
from components.views import config_title, grid

__all__ = ["curve_chart", "cached_curve", "curves_section"]

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
    - ``boundaries``: dotted vertical lines through the points that end a chunk.

    Args:
        curve: The chunker's curve.
        doc_text: The document text the units index.
        color: The configuration's colour.
        title: The chart title (escaped here).
        revision: Keeps the user's zoom while it stays the same.
    """
    n = len(curve)
    y = _finite(curve.values)
    known = [v for v in y if v is not None]
    if curve.threshold is not None:
        known.append(curve.threshold)
    if curve.threshold_series is not None:
        known += [v for v in _finite(curve.threshold_series) if v is not None]
    if curve.drop_threshold is not None:
        known += [y[i] + curve.drop_threshold for i in curve.candidates if y[i] is not None]
    lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
    pad = (hi - lo) * 0.04 or 0.5
    x_range = [-0.5, max(n - 0.5, 0.5)]
    fig = go.Figure()

    bx, by = _segments([(i, i) for i in curve.boundaries], [(lo - pad, hi + pad)] * len(curve.boundaries))
    fig.add_trace(
        go.Scatter(x=bx, y=by, mode="lines", name="chunk boundary", hoverinfo="skip",
                   line={"color": _BOUNDARY, "width": 1, "dash": "dot"})
    )
    if curve.drop_threshold is not None and curve.candidates:
        theta = curve.drop_threshold
        xs, ys = [], []
        for i in curve.candidates:
            if y[i] is None:
                continue
            xs += [(i, i), (i - _BAR_WIDTH, i + _BAR_WIDTH)]
            ys += [(y[i], y[i] + theta), (y[i] + theta, y[i] + theta)]
        sx, sy = _segments(xs, ys)
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
            go.Scatter(x=list(range(n)), y=_finite(curve.threshold_series), mode="lines",
                       name=html.escape(curve.threshold_label), hoverinfo="skip",
                       line={"color": _THRESHOLD, "width": 1.5, "dash": "dash", "shape": "hv"})
        )
    y_name = html.escape(curve.y_label)
    point = html.escape(curve.point_label)
    fig.add_trace(
        go.Scatter(
            x=list(range(n)), y=y, mode="lines+markers", name=y_name, connectgaps=False,
            line={"color": color, "width": 1.5}, marker={"size": 4},
            customdata=[[_preview(doc_text[s:e])] for s, e in curve.units],
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
        title={"text": html.escape(title), "font": {"size": 14}},
        height=320,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        xaxis={"title": {"text": html.escape(curve.x_label)}, "range": x_range},
        yaxis={"title": {"text": y_name}, "range": [lo - pad, hi + pad]},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "font": {"size": 11}},
        hovermode="closest",
        uirevision=revision,
    )
    return fig


@st.cache_data(max_entries=64, show_spinner=False)
def cached_curve(
    _doc: Document, doc_id: str, config: ChunkerConfig, models_key: str, _context: ModelContext | None
) -> Curve | None:
    """``config``'s curve of the document, cached per (document id, configuration, models).

    Pass a cache-only context for a model-backed chunker: a miss raises ``NotCached`` (an
    exception is never cached, so a later call tries again).
    """
    return make_chunker(config.name, config.params_dict, config.tokenizer).curve(_doc, _context)


def _curve(doc: Document, config: ChunkerConfig, spec: dict[str, Any], lm: SessionLM | None) -> Curve | None:
    """The configuration's curve without a model call (raises ``NotCached`` when it needs the model)."""
    if not spec.get("needs"):
        return cached_curve(doc, doc.id, config, "", None)
    if lm is None:
        raise NotCached("no model for this configuration yet")
    if lm.error:
        raise ChunkLabError(lm.error)
    context = cache_only_context(lm)
    if context is None:
        raise NotCached(f"{lm.name} has not run on this document yet")
    return cached_curve(doc, doc.id, config, lm.models_key, context)


def curves_section(
    doc: Document,
    results: Sequence[tuple[dict[str, Any], Any, str | None]],
    lm: SessionLM | None,
    color: Callable[[int], str],
    prefix: str,
    per_row: int = 2,
) -> None:
    """A "Curves" section: one chart per configuration whose chunker has a curve; nothing when none has.

    Args:
        doc: The document.
        results: ``(entry, chunking or None, error or None)`` per configuration (a chunking
            that is None with no error waits for a model run).
        lm: The session's models (None when no configuration needs one).
        color: The configuration's colour from its uid.
        prefix: The page's session-state prefix (chart keys are ``{prefix}_curve_{uid}``).
        per_row: Charts side by side.
    """
    by_name = {s["name"]: s for s in specs()}
    rows = [r for r in results if by_name.get(r[0]["config"].name, {}).get("has_curve")]
    if not rows:
        return
    head, switch = st.columns([5, 1], vertical_alignment="bottom")
    head.subheader("Curves", anchor=False)
    if not switch.toggle("Show curves", value=True, key=f"{prefix}_show_curves", persist_state="session"):
        return
    st.caption(
        "What each chunker cut on: its value at every unit, the threshold it compared with, and dotted lines "
        "where its chunks end. Hover a point for its text; drag to zoom, double-click to reset."
    )
    for col, (entry, chunking, error) in grid(rows, per_row):
        with col:
            uid, config = entry["uid"], entry["config"]
            config_title(entry, color(uid))
            if error:
                st.caption(f"No curve: {error}")
                continue
            if chunking is None:
                st.caption("Waiting for the model run…")
                continue
            try:
                curve = _curve(doc, config, by_name[config.name], lm)
            except NotCached:
                st.caption("Waiting for the model run…")
                continue
            except ChunkLabError as e:
                st.caption(f"No curve: {one_line(str(e))}")
                continue
            if curve is None or not len(curve):
                st.caption("No curve: the document has too few units.")
                continue
            st.plotly_chart(
                curve_chart(curve, doc.text, color(uid), f"{entry['tag']} · {config.label}", f"{doc.id}:{uid}"),
                key=f"{prefix}_curve_{uid}",
                config={"displaylogo": False},
            )

