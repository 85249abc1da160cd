"""The retrieval lab's Plotly figures: the benchmark's bars and heat maps, coverage strips, prefilter histograms.

Each builder takes backend results (a :class:`~backend.retrieval.evaluate.Benchmark`, score
matrices, chunkings) and returns a ``plotly.graph_objects.Figure``; pages hand them to
``st.plotly_chart`` and offer :func:`backend.figures.export.figure_html` as a download. Question text is untrusted:
it reaches Plotly's HTML-like hover labels only through :func:`_hover`.
"""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from backend.chunking import Chunking
from backend.errors import ParameterError
from backend.retrieval.evaluate import METRIC_LABELS, METRICS, Benchmark
from backend.retrieval.metrics import agreement_matrices

__all__ = [
    "metric_bars",
    "question_heatmap",
    "agreement_heatmaps",
    "coverage_strip",
    "similarity_histogram",
]

_HOVER_CHARS = 120


def _hover(text: str, n: int = _HOVER_CHARS) -> str:
    """Text on one line, shortened, escaped for Plotly's HTML-like hover labels."""
    flat = " ".join(text[: n * 2].split())
    return html.escape(flat if len(flat) <= n else flat[: n - 1] + "…", quote=False)


def metric_bars(benchmark: Benchmark, tags: Sequence[str], colors: Sequence[str]) -> go.Figure:
    """Grouped bars: each metric's mean (in %) per configuration, the standard deviation as error bars.

    Args:
        benchmark: The benchmark.
        tags: One label per configuration, in the order of ``benchmark.results``.
        colors: One colour per configuration.
    """
    fig = go.Figure()
    labels = [METRIC_LABELS[m] for m in METRICS]
    for tag, color, r in zip(tags, colors, benchmark.results):
        s = r.summary
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[100 * getattr(s, f"{m}_mean") for m in METRICS],
                error_y={"type": "data", "array": [100 * getattr(s, f"{m}_std") for m in METRICS], "visible": True},
                name=f"{tag} · {html.escape(r.config.name, quote=False)}",
                marker={"color": color},
                hovertemplate=f"{tag}: %{{x}} %{{y:.1f}}%<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=340,
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        yaxis={"title": {"text": "mean over questions (%)"}, "rangemode": "tozero"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig


def question_heatmap(matrix: np.ndarray, questions: Sequence[str], tags: Sequence[str], metric: str) -> go.Figure:
    """Questions × configurations, one cell per question's ``metric`` (in %).

    Args:
        matrix: ``Benchmark.matrix(metric)``: shape (questions, configurations), fractions.
        questions: The question texts (hover labels), in row order.
        tags: Column labels.
        metric: One of :data:`~backend.retrieval.evaluate.METRICS` (the colour bar's title).

    Raises:
        ParameterError: a matrix whose shape does not match the labels.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape != (len(questions), len(tags)):
        raise ParameterError(f"matrix shape {matrix.shape} does not match {len(questions)} questions × {len(tags)} configurations")
    hover = [[_hover(q)] * len(tags) for q in questions]
    fig = go.Figure(
        go.Heatmap(
            z=100 * matrix,
            x=list(tags),
            y=[f"Q{i + 1}" for i in range(len(questions))],
            customdata=hover,
            zmin=0,
            zmax=100,
            colorscale="Viridis",
            colorbar={"title": {"text": f"{METRIC_LABELS.get(metric, metric)} %"}},
            hovertemplate="%{y} · %{x}: %{z:.1f}%<br>%{customdata}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(260, min(1200, 22 * len(questions) + 80)),
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        yaxis={"autorange": "reversed", "title": {"text": "question"}},
        xaxis={"title": {"text": "configuration"}, "side": "top"},
    )
    return fig


def _square_heatmap(matrix: np.ndarray, tags: Sequence[str], title: str) -> go.Figure:
    """A configuration × configuration heat map of values in 0..1, each cell labelled."""
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(matrix, dtype=np.float64),
            x=list(tags),
            y=list(tags),
            zmin=0,
            zmax=1,
            colorscale="Blues",
            text=[[f"{v:.2f}" for v in row] for row in np.asarray(matrix)],
            texttemplate="%{text}",
            colorbar={"title": {"text": title}},
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(260, 60 * len(tags) + 100),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={"text": title, "font": {"size": 13}},
        yaxis={"autorange": "reversed"},
    )
    return fig


def agreement_heatmaps(
    chunkings: Sequence[Chunking], tags: Sequence[str], tolerance: int
) -> tuple[go.Figure, go.Figure, np.ndarray, np.ndarray]:
    """Configuration × configuration agreement on one document.

    Returns:
        ``(boundary figure, overlap figure, boundary IoU matrix, span-overlap matrix)``: the
        IoU of the boundary sets (boundaries within ``tolerance`` characters match) and the
        span-overlap similarity (see :func:`backend.retrieval.metrics.agreement_matrices`).

    Raises:
        ParameterError: chunkings of different documents, a negative tolerance.
    """
    bounds, overlap = agreement_matrices(chunkings, tolerance)
    return (
        _square_heatmap(bounds, tags, f"boundary IoU (±{tolerance} chars)"),
        _square_heatmap(overlap, tags, "span-overlap similarity"),
        bounds,
        overlap,
    )


def coverage_strip(rows: np.ndarray, excerpts: np.ndarray, tags: Sequence[str], length: int) -> go.Figure:
    """A strip along the document: one row per configuration coloured by how often each stretch was retrieved.

    The last row is the excerpts (where the answers are), so a configuration that
    retrieves off the answers shows at once.

    Args:
        rows: Per configuration, questions per stretch (see
            :func:`backend.retrieval.evaluate.coverage_rows`).
        excerpts: Excerpts per stretch.
        tags: Row labels of ``rows``.
        length: The corpus length in characters (the x axis).
    """
    bins = rows.shape[1] if rows.size else len(excerpts)
    edges = np.linspace(0, length, bins + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    z = np.vstack([rows, excerpts[None, :]]) if rows.size else excerpts[None, :]
    labels = [*tags, "excerpts"]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=centers,
            y=labels,
            colorscale="YlOrRd",
            zmin=0,
            colorbar={"title": {"text": "questions"}},
            hovertemplate="%{y} · around character %{x:,.0f}: %{z:.2f} questions<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(200, 42 * len(labels) + 90),
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis={"title": {"text": "character offset"}, "range": [0, length]},
        yaxis={"autorange": "reversed"},
    )
    return fig


def similarity_histogram(values: Sequence[float], threshold: float, title: str, keep: str) -> go.Figure:
    """The report's prefilter histogram: ``values`` with the threshold as a dashed line.

    Args:
        values: Cosine similarities.
        threshold: Where the filter cuts.
        title: The x axis title.
        keep: ``"below"`` (duplicates: pairs above the line drop) or ``"above"`` (excerpts:
            questions below the line drop), for the line's label.
    """
    fig = go.Figure(
        go.Histogram(
            x=list(values), xbins={"start": -1.0, "end": 1.0, "size": 0.05}, marker={"color": "#64748b"},
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    fig.add_vline(
        x=threshold, line={"color": "#dc2626", "dash": "dash", "width": 2},
        annotation_text=f"{threshold:.2f} (keep {keep})", annotation_position="top",
    )
    fig.update_layout(
        height=260,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": {"text": title}, "range": [-0.2, 1.0]},
        yaxis={"title": {"text": "count"}},
        bargap=0.05,
    )
    return fig
