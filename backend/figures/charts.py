"""Plotly figures: the boundary strip and the chunk-size histogram.

Each configuration is one trace whose points are given as arrays, so a chunking with
thousands of chunks is still one object for Plotly to draw (never one shape per chunk).
"""

from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from backend.chunking import Chunking

__all__ = [
    "CHUNK_EDGES",
    "CONFIG_COLORS",
    "config_color",
    "boundary_strip",
    "strip_lanes",
    "size_histogram",
    "CLIP_PERCENTILE",
    "CLIP_HEADROOM",
    "PREVIEW_CHARS",
    "legend_with_title",
    "preview",
]

# One colour per configuration (tag badges, histogram); chunks inside a row alternate CHUNK_EDGES.
CHUNK_EDGES = ("#3b82f6", "#f59e0b")  # alternating chunk colours (the strip here, badges in backend.figures.text)
CONFIG_COLORS = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626")


def legend_with_title(title: str = "", *, font_size: int = 11) -> dict:
    """A horizontal legend above the plot, headed by the figure's title: one box, so they never overlap.

    A figure title and a legend above the plot are placed independently by Plotly; in a narrow
    column the legend wraps onto more rows and climbs into the title. As the legend's own
    heading, the title sits above the entries however many rows they take, and Plotly grows the
    top margin to fit the whole box.

    Args:
        title: The heading, already escaped (empty: none).
        font_size: The entries' size (the heading is 3 points larger).
    """
    legend: dict = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "font": {"size": font_size}}
    if title:
        legend["title"] = {"text": title, "side": "top left", "font": {"size": font_size + 3}}
    return legend


def config_color(n: int) -> str:
    """The colour of configuration ``n`` (a session entry's uid, or a position): the same on every chart and page."""
    return CONFIG_COLORS[n % len(CONFIG_COLORS)]
PREVIEW_CHARS = 80
CLIP_PERCENTILE = 99  # the size histogram's x axis ends at this percentile of the sizes…
CLIP_HEADROOM = 0.10  # …plus this fraction of it, when some chunk is longer
_ROW_SPAN = 0.76  # the part of a row's height its lanes share (the rest separates the rows)


def preview(text: str) -> str:
    """The first :data:`PREVIEW_CHARS` characters of ``text`` on one line, escaped for Plotly's HTML-like hovers.

    Every hover label that shows document text (chunks, sentences, curve units) goes through
    this: a document is untrusted input.
    """
    flat = " ".join(text[: PREVIEW_CHARS * 2].split())
    if len(flat) > PREVIEW_CHARS:
        flat = flat[: PREVIEW_CHARS - 1] + "…"
    return html.escape(flat, quote=False)


def strip_lanes(starts: Sequence[int], ends: Sequence[int]) -> tuple[int, list[int], list[int]]:
    """Lanes and colours that keep every chunk of one row distinguishable on the strip.

    There are ``max(2, depth)`` lanes, ``depth`` being the most chunks covering one character,
    so overlapping chunks never share a lane (50 % overlap: two lanes). Chunk ``j`` goes to lane
    ``j % lanes`` when that lane is free at its start, else to the first free lane (one always
    is: chunks come sorted by start). Its colour is ``j % 2`` (the text view's alternation),
    flipped when it would touch the previous chunk of its lane in the same colour, so two
    abutting bars in a lane never merge into one.

    Args:
        starts: Chunk starts, ascending.
        ends: Chunk ends, same order.

    Returns:
        ``(lanes, lane of each chunk, colour index (0 or 1) of each chunk)``.
    """
    events = sorted([(e, -1) for e in ends] + [(s, 1) for s in starts])  # an end before a start at one offset
    depth = cover = 0
    for _, step in events:
        cover += step
        depth = max(depth, cover)
    n_lanes = max(2, depth)
    last_end: list[int | None] = [None] * n_lanes
    last_colour = [-1] * n_lanes
    lanes: list[int] = []
    colours: list[int] = []
    for j, (start, end) in enumerate(zip(starts, ends)):
        free = [lane for lane in range(n_lanes) if last_end[lane] is None or last_end[lane] <= start]
        lane = j % n_lanes if j % n_lanes in free else free[0]
        colour = j % 2
        if last_end[lane] == start and last_colour[lane] == colour:
            colour = 1 - colour
        last_end[lane], last_colour[lane] = end, colour
        lanes.append(lane)
        colours.append(colour)
    return n_lanes, lanes, colours


def boundary_strip(
    chunkings: Sequence[Chunking],
    tags: Sequence[str],
    doc_length: int,
    window: tuple[int, int] | None = None,
    selected: Sequence[int | None] | None = None,
    revision: str = "",
) -> go.Figure:
    """Every chunk as a bar over character offsets, one row per configuration.

    A row is split into lanes (:func:`strip_lanes`): even chunks in the upper one and odd
    ones in the lower one, more lanes where more chunks overlap, and abutting chunks of a lane
    in alternating colours, so every chunk stays visible at 50 % overlap. Trace ``i`` is row ``i``
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
        n_lanes, lanes, colours = strip_lanes(starts.tolist(), ends.tolist())
        pitch = _ROW_SPAN / n_lanes
        y = (n_rows - 1 - row) + ((n_lanes - 1) / 2 - np.asarray(lanes, dtype=np.float64)) * pitch
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
                width=pitch * 0.92,
                marker={
                    "color": np.where(np.asarray(colours) == 0, CHUNK_EDGES[0], CHUNK_EDGES[1]),
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

    One chunk far longer than the rest would squeeze every other bar into the left edge,
    so the x axis stops at :data:`CLIP_PERCENTILE` of all sizes plus :data:`CLIP_HEADROOM`
    (rounded up) when some chunk lies beyond it; those chunks stay in the histogram (off
    the axis, the user can zoom out) and an annotation at the right edge gives their count
    and the largest size.

    Args:
        chunkings: The chunkings to compare.
        tags: Legend labels (configuration letters), same order; the legend shows even for one chunking.
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
    upper = int(math.ceil(np.percentile(values_all, CLIP_PERCENTILE) * (1 + CLIP_HEADROOM))) if values_all.size else 1
    clipped = hi > upper
    size = max(1.0, ((upper if clipped else hi) - lo + 1) / 40)
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
    xaxis: dict = {"title": {"text": f"chunk size ({unit})"}}
    if clipped:
        beyond = int((values_all > upper).sum())
        xaxis["range"] = [lo - 0.5, upper]
        fig.add_annotation(
            x=1, xref="paper", y=1, yref="paper", xanchor="right", yanchor="top", showarrow=False,
            text=f"{beyond:,} chunk{'s' if beyond != 1 else ''} beyond {upper:,} ▸ max {hi:,} {unit}",
            font={"size": 11, "color": "#b91c1c"}, bgcolor="rgba(255, 255, 255, 0.85)",
        )
    fig.update_layout(
        barmode="overlay",
        height=320,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis=xaxis,
        yaxis={"title": {"text": "chunks"}},
        legend=legend_with_title(),
        showlegend=True,  # one configuration alone (the Summary's small multiples) still names its letter
    )
    return fig
