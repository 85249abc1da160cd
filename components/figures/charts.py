"""Plotly figures: the boundary strip and the chunk-size histogram.

Each configuration is one trace whose points are given as arrays, so a chunking with
thousands of chunks is still one object for Plotly to draw (never one shape per chunk).
"""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from backend.chunking import Chunking
from components.render import CHUNK_EDGES

__all__ = ["CONFIG_COLORS", "boundary_strip", "size_histogram", "PREVIEW_CHARS", "preview"]

# One colour per configuration (tag badges, histogram); chunks inside a row alternate CHUNK_EDGES.
CONFIG_COLORS = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626")
PREVIEW_CHARS = 80
_LANE = 0.19  # even chunks sit above the row centre, odd ones below, so overlaps stay visible


def preview(text: str) -> str:
    """The first :data:`PREVIEW_CHARS` characters of ``text`` on one line, escaped for Plotly's HTML-like hovers.

    Every hover label that shows document text (chunks, sentences, curve units) goes through
    this: a document is untrusted input.
    """
    flat = " ".join(text[: PREVIEW_CHARS * 2].split())
    if len(flat) > PREVIEW_CHARS:
        flat = flat[: PREVIEW_CHARS - 1] + "…"
    return html.escape(flat, quote=False)


def boundary_strip(
    chunkings: Sequence[Chunking],
    tags: Sequence[str],
    doc_length: int,
    window: tuple[int, int] | None = None,
    selected: Sequence[int | None] | None = None,
    revision: str = "",
) -> go.Figure:
    """Every chunk as a bar over character offsets, one row per configuration.

    Even chunks sit in the upper half of a row and odd ones in the lower half, in
    alternating colours, so overlapping neighbours stay visible. Trace ``i`` is row ``i``
    and point ``j`` of it is chunk ``j``; each point's ``customdata`` is ``[tag, index,
    start, end, tokens, preview]``, which is how selection events map back to chunks.

    Args:
        chunkings: One chunking per row, top to bottom.
        tags: Short row labels (``A``, ``B``…), same order.
        doc_length: Length of the document text (the x range).
        window: The character window shown in the side-by-side view, drawn as a band.
        selected: Per row, a chunk index to outline (or ``None``).
        revision: Identifies the chunkings (document id and configurations); the user's
            zoom is kept while it stays the same.
    """
    n_rows = len(chunkings)
    fig = go.Figure()
    for row, (ch, tag) in enumerate(zip(chunkings, tags)):
        m = len(ch.chunks)
        starts = np.fromiter((c.start for c in ch.chunks), dtype=np.int64, count=m)
        ends = np.fromiter((c.end for c in ch.chunks), dtype=np.int64, count=m)
        tokens = np.fromiter((c.tokens for c in ch.chunks), dtype=np.int64, count=m)
        parity = np.arange(m) % 2
        y = (n_rows - 1 - row) + np.where(parity == 0, _LANE, -_LANE)
        line_w = np.zeros(m)
        sel = selected[row] if selected is not None and row < len(selected) else None
        if sel is not None and 0 <= sel < m:
            line_w[sel] = 2.5
        custom = np.empty((m, 6), dtype=object)
        custom[:, 0] = tag
        custom[:, 1] = np.arange(m)
        custom[:, 2] = starts
        custom[:, 3] = ends
        custom[:, 4] = tokens
        custom[:, 5] = [preview(c.text) for c in ch.chunks]
        fig.add_trace(
            go.Bar(
                orientation="h",
                base=starts,
                x=np.maximum(ends - starts, 1),
                y=y,
                width=2 * _LANE * 0.92,
                marker={
                    "color": np.where(parity == 0, CHUNK_EDGES[0], CHUNK_EDGES[1]),
                    "line": {"width": line_w, "color": "#dc2626"},
                },
                customdata=custom,
                name=tag,
                hovertemplate=(
                    "<b>%{customdata[0]}</b> · chunk %{customdata[1]} · %{customdata[4]} tokens<br>"
                    "chars %{customdata[2]:,}–%{customdata[3]:,}<br><i>%{customdata[5]}</i><extra></extra>"
                ),
                showlegend=False,
            )
        )
    if window is not None:
        fig.add_vrect(
            x0=window[0],
            x1=window[1],
            fillcolor="rgba(220, 38, 38, 0.10)",
            line={"color": "#dc2626", "width": 1.5, "dash": "dot"},
            layer="above",
        )
    fig.update_layout(
        height=70 + 52 * max(n_rows, 1),
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        barmode="overlay",
        bargap=0,
        hovermode="closest",
        uirevision=revision,
        clickmode="event+select",
        dragmode="zoom",
        plot_bgcolor="#f8fafc",
        xaxis={"title": {"text": "character offset"}, "range": [0, max(doc_length, 1)], "tickformat": ",d"},
        yaxis={
            "tickvals": [n_rows - 1 - i for i in range(n_rows)],
            "ticktext": list(tags),
            "range": [-0.5, n_rows - 0.5],
            "fixedrange": True,
            "showgrid": False,
            "zeroline": False,
        },
    )
    return fig


def size_histogram(chunkings: Sequence[Chunking], tags: Sequence[str], colors: Sequence[str], unit: str) -> go.Figure:
    """Overlaid histograms of chunk sizes, one per configuration.

    Args:
        chunkings: The chunkings to compare.
        tags: Legend labels, same order.
        colors: One colour per chunking.
        unit: ``"tokens"`` (each chunking's own tokenizer) or ``"characters"``.
    """
    series = []
    for ch in chunkings:
        if unit == "characters":
            series.append(np.fromiter((c.end - c.start for c in ch.chunks), dtype=np.int64, count=len(ch.chunks)))
        else:
            series.append(np.asarray(ch.token_counts, dtype=np.int64))
    # One set of bins for every trace, so overlaid bars compare like with like.
    values_all = np.concatenate(series) if series else np.zeros(0, dtype=np.int64)
    lo = int(values_all.min()) if values_all.size else 0
    hi = int(values_all.max()) if values_all.size else 1
    size = max(1.0, (hi - lo + 1) / 40)
    bins = {"start": lo - 0.5, "end": hi + size, "size": size}
    fig = go.Figure()
    for values, ch, tag, color in zip(series, chunkings, tags, colors):
        fig.add_trace(
            go.Histogram(
                x=values,
                name=f"{tag} · {ch.config.name}",
                marker={"color": color},
                opacity=0.6,
                xbins=bins,
                hovertemplate=f"{tag}: %{{x}} {unit}<br>%{{y}} chunks<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="overlay",
        height=320,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis={"title": {"text": f"chunk size ({unit})"}},
        yaxis={"title": {"text": "chunks"}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig
