"""The Quality page's Plotly figures: BC along the document, CS against K, the stickiness graphs.

Pure builders (no Streamlit) of :class:`~backend.metrics.report.QualityData`: every number
comes from :mod:`backend.metrics.quality`, so a figure draws exactly what the table and the
CLI report. Document text is untrusted: every chunk preview in a hover label is HTML-escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from backend.metrics.quality import boundary_clarity, cs_curve, stickiness_edges, structural_entropy
from backend.metrics.report import QualityData

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["bc_figure", "cs_k_figure", "stickiness_figure"]

PREVIEW_CHARS = 70


def _flat(text: str) -> str:
    """``text`` on one line (runs of whitespace as one space)."""
    return " ".join(text.split())


def _head(text: str, n: int = PREVIEW_CHARS) -> str:
    """The first ``n`` characters of a chunk on one line, escaped for a Plotly hover label."""
    flat = _flat(text[: n * 3])
    return html.escape(flat if len(flat) <= n else flat[: n - 1] + "…", quote=False)


def _tail(text: str, n: int = PREVIEW_CHARS) -> str:
    """The last ``n`` characters of a chunk on one line, escaped."""
    flat = _flat(text[-n * 3 :])
    return html.escape(flat if len(flat) <= n else "…" + flat[-(n - 1) :], quote=False)


def bc_figure(datas: Sequence[QualityData], colors: Sequence[str], *, bc_mode: str = "reference") -> go.Figure:
    """BC of every boundary along the document, one line per configuration.

    x is the character offset where chunk i+1 starts; the hover shows the end of chunk i
    and the start of chunk i+1.
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    for d, color in zip(datas, colors):
        if d.table is None or d.n < 2:
            continue
        bc = boundary_clarity(d.table, bc_mode)
        chunks = d.chunking.chunks
        x = [chunks[i + 1].start for i in range(d.n - 1)]
        custom = [[i, _tail(chunks[i].text), _head(chunks[i + 1].text)] for i in range(d.n - 1)]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[v if math.isfinite(v) else None for v in bc],
                mode="lines+markers",
                name=f"{d.tag} · {d.config.name}",
                line={"color": color, "width": 1.5},
                marker={"size": 6},
                customdata=custom,
                hovertemplate=(
                    f"<b>{d.tag}</b> · boundary %{{customdata[0]}} · char %{{x:,}}<br>BC %{{y:.4f}}<br>"
                    "<i>…%{customdata[1]}</i><br><b>│</b> <i>%{customdata[2]}</i><extra></extra>"
                ),
            )
        )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        hovermode="closest",
        xaxis={"title": {"text": "boundary (character offset)"}, "tickformat": ",d"},
        yaxis={"title": {"text": "BC" + (" (NLL ratio)" if bc_mode == "reference" else " (PPL ratio)")}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig


def cs_k_figure(
    datas: Sequence[QualityData], colors: Sequence[str], ks: Sequence[float], K: float, *, rule: str = "paper",
    delta: int = 0,
) -> go.Figure:
    """CS against K per configuration (MoC Table 4, live): complete graph solid, incomplete dashed."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for d, color in zip(datas, colors):
        if d.table is None or not d.table.complete:
            continue
        complete, incomplete = cs_curve(d.table, ks, rule=rule, delta=delta)
        for graph, ys, dash in (("complete", complete, "solid"), ("incomplete", incomplete, "dash")):
            fig.add_trace(
                go.Scatter(
                    x=list(ks), y=ys, mode="lines", name=f"{d.tag} {graph}", line={"color": color, "dash": dash},
                    hovertemplate=f"{d.tag} · {graph}<br>K %{{x:.2f}} · CS %{{y:.3f}}<extra></extra>",
                )
            )
    fig.add_vline(x=K, line={"color": "#dc2626", "width": 1, "dash": "dot"})
    fig.update_layout(
        height=280,
        margin={"l": 10, "r": 10, "t": 10, "b": 40},
        xaxis={"title": {"text": "K"}},
        yaxis={"title": {"text": "CS (bits)"}, "rangemode": "tozero"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return fig


def _arc(i: int, j: int, points: int) -> tuple[np.ndarray, np.ndarray]:
    """A half-ellipse from node i to node j: above the line when i < j (d before q), below otherwise."""
    t = np.linspace(0.0, math.pi, points)
    centre, radius = (i + j) / 2, abs(j - i) / 2
    x = centre - radius * np.cos(t) * (1 if j > i else -1)
    y = np.sin(t) * radius * (1 if j > i else -1)
    return x, y


def stickiness_figure(
    data: QualityData, K: float, color: str, *, rule: str = "paper", graph: str = "complete", delta: int = 0
) -> go.Figure:
    """A chunking's stickiness graph as an arc diagram.

    Nodes are the chunks in document order on a line, sized by degree; each kept ordered
    edge (d = chunk i, q = chunk j) is an arc, above the line when d comes first and below
    when it comes after. The hover of a node shows its degree and the start of its text.
    ``fig.layout.meta["edges"]`` is the number of arcs drawn (= kept edges).
    """
    import plotly.graph_objects as go

    if data.table is None:
        raise ValueError("the stickiness graph needs the configuration's pair table")
    n = data.n
    edges = stickiness_edges(data.table, K, rule=rule, graph=graph, delta=delta)
    degree = np.zeros(n, dtype=np.int64)
    for i, j in edges:
        degree[i] += 1
        degree[j] += 1
    points = 16 if len(edges) <= 1500 else 6  # thousands of arcs stay one light trace
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i, j in edges:
        x, y = _arc(i, j, points)
        xs.extend(x.tolist() + [None])
        ys.extend(y.tolist() + [None])
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, mode="lines", line={"color": color, "width": 0.8}, opacity=0.45, hoverinfo="skip",
            showlegend=False, name="edges",
        )
    )
    chunks = data.chunking.chunks
    peak = max(int(degree.max()) if n else 0, 1)
    fig.add_trace(
        go.Scatter(
            x=list(range(n)),
            y=[0.0] * n,
            mode="markers",
            marker={
                "size": (6 + 18 * np.sqrt(degree / peak)).tolist(),
                "color": color,
                "line": {"color": "white", "width": 1},
            },
            customdata=[[int(degree[k]), c.tokens, _head(c.text)] for k, c in enumerate(chunks)],
            hovertemplate="chunk %{x} · degree %{customdata[0]} · %{customdata[1]} tokens<br>"
            "<i>%{customdata[2]}</i><extra></extra>",
            showlegend=False,
            name="chunks",
        )
    )
    span = max(n - 1, 1) / 2
    fig.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={
            "text": f"{data.tag} · {len(edges):,} edges · CS {structural_entropy(edges, n):.3f}",
            "font": {"size": 13},
        },
        xaxis={"visible": False, "range": [-1, max(n, 1)]},
        yaxis={"visible": False, "range": [-span - 0.5, span + 0.5]},
        plot_bgcolor="#ffffff",
        meta={"edges": len(edges), "graph": graph, "K": K, "rule": rule},
    )
    return fig
