"""The Quality page's Plotly figures: BC along the document, CS against K, the stickiness graphs (arc diagrams).

Pure builders (no Streamlit) of :class:`~backend.metrics.report.QualityData`: every number
comes from :mod:`backend.metrics.formulas`, so a figure draws exactly what the table and the
CLI report. Document text is untrusted: every chunk preview in a hover label is HTML-escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from backend.metrics.formulas import boundary_clarity, cs_curve, stickiness_edges, structural_entropy
from backend.metrics.report import QualityData

__all__ = ["bc_figure", "cs_k_figure", "arc_diagram", "stickiness_figure", "head_preview"]

PREVIEW_CHARS = 70


def _flat(text: str) -> str:
    """``text`` on one line (runs of whitespace as one space)."""
    return " ".join(text.split())


def head_preview(text: str, n: int = PREVIEW_CHARS) -> str:
    """The first ``n`` characters of a chunk on one line, escaped for a Plotly hover label."""
    flat = _flat(text[: n * 3])
    return html.escape(flat if len(flat) <= n else flat[: n - 1] + "…", quote=False)


def _tail(text: str, n: int = PREVIEW_CHARS) -> str:
    """The last ``n`` characters of a chunk on one line, escaped."""
    flat = _flat(text[-n * 3 :])
    return html.escape(flat if len(flat) <= n else "…" + flat[-(n - 1) :], quote=False)


def bc_figure(scored: Sequence[QualityData], colors: Sequence[str], *, bc_mode: str = "reference") -> go.Figure:
    """BC of every boundary along the document, one line per configuration.

    x is the character offset where chunk i+1 starts; the hover shows the end of chunk i
    and the start of chunk i+1.
    """
    fig = go.Figure()
    for d, color in zip(scored, colors):
        if d.table is None or d.n < 2:
            continue
        bc = boundary_clarity(d.table, bc_mode)
        chunks = d.chunking.chunks
        x = [chunks[i + 1].start for i in range(d.n - 1)]
        custom = [[i, _tail(chunks[i].text), head_preview(chunks[i + 1].text)] for i in range(d.n - 1)]
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
    scored: Sequence[QualityData], colors: Sequence[str], ks: Sequence[float], K: float, *, rule: str = "paper",
    delta: int = 0,
) -> go.Figure:
    """CS against K per configuration (MoC Table 4, live): complete graph solid, incomplete dashed."""
    fig = go.Figure()
    for d, color in zip(scored, colors):
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


def arc_diagram(
    n: int,
    edges: Sequence[tuple[int, int]],
    color: str,
    *,
    customdata: Sequence[Sequence[object]],
    hovertemplate: str,
    title: str,
    meta: dict | None = None,
    highlight: Sequence[int] = (),
    highlight_color: str = "#dc2626",
) -> go.Figure:
    """Nodes ``0 … n-1`` on a line, sized by degree, and one half-ellipse arc per edge.

    An edge ``(i, j)`` rises when ``i < j`` and falls otherwise (see :func:`_arc`). The first
    trace is the arcs, the second the nodes (``customdata`` per node, for ``hovertemplate``).
    With ``highlight`` nodes, two more traces follow: the arcs touching them and the
    highlighted nodes, in ``highlight_color``. ``fig.layout.meta["edges"]`` is the number of
    arcs drawn (``meta`` adds to it).

    Args:
        n: Number of nodes.
        edges: ``(i, j)`` node pairs.
        color: The nodes' and arcs' colour.
        customdata: One row per node for the hover.
        hovertemplate: The nodes' hover (``%{x}`` is the node index).
        title: The figure's title.
        meta: More entries of ``fig.layout.meta``.
        highlight: Nodes drawn in ``highlight_color`` with the arcs that touch them.
        highlight_color: Their colour.
    """
    degree = np.zeros(n, dtype=np.int64)
    for i, j in edges:
        degree[i] += 1
        degree[j] += 1
    points = 16 if len(edges) <= 1500 else 6  # thousands of arcs stay one light trace
    marked = set(int(v) for v in highlight)
    plain = [(i, j) for i, j in edges if i not in marked and j not in marked] if marked else list(edges)
    touched = [(i, j) for i, j in edges if i in marked or j in marked] if marked else []

    def arcs(pairs: Sequence[tuple[int, int]]) -> tuple[list[float | None], list[float | None]]:
        xs: list[float | None] = []
        ys: list[float | None] = []
        for i, j in pairs:
            x, y = _arc(i, j, points)
            xs.extend(x.tolist() + [None])
            ys.extend(y.tolist() + [None])
        return xs, ys

    fig = go.Figure()
    xs, ys = arcs(plain)
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, mode="lines", line={"color": color, "width": 0.8}, opacity=0.45, hoverinfo="skip",
            showlegend=False, name="edges",
        )
    )
    peak = max(int(degree.max()) if n else 0, 1)
    sizes = (6 + 18 * np.sqrt(degree / peak)).tolist()
    fig.add_trace(
        go.Scatter(
            x=list(range(n)),
            y=[0.0] * n,
            mode="markers",
            marker={"size": sizes, "color": color, "line": {"color": "white", "width": 1}},
            customdata=[list(row) for row in customdata],
            hovertemplate=hovertemplate,
            showlegend=False,
            name="chunks",
        )
    )
    if marked:
        xs, ys = arcs(touched)
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, mode="lines", line={"color": highlight_color, "width": 1.2}, opacity=0.8,
                hoverinfo="skip", showlegend=False, name="highlighted edges",
            )
        )
        nodes = sorted(v for v in marked if 0 <= v < n)
        fig.add_trace(
            go.Scatter(
                x=nodes, y=[0.0] * len(nodes), mode="markers",
                marker={"size": [sizes[v] for v in nodes], "color": highlight_color,
                        "line": {"color": "white", "width": 1}},
                customdata=[list(customdata[v]) for v in nodes], hovertemplate=hovertemplate,
                showlegend=False, name="highlighted",
            )
        )
    span = max(n - 1, 1) / 2
    fig.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={"text": title, "font": {"size": 13}},
        xaxis={"visible": False, "range": [-1, max(n, 1)]},
        yaxis={"visible": False, "range": [-span - 0.5, span + 0.5]},
        plot_bgcolor="#ffffff",
        meta={"edges": len(edges), **(meta or {})},
    )
    return fig


def stickiness_figure(
    data: QualityData, K: float, color: str, *, rule: str = "paper", graph: str = "complete", delta: int = 0
) -> go.Figure:
    """A chunking's stickiness graph as an arc diagram (:func:`arc_diagram`).

    Nodes are the chunks in document order on a line, sized by degree; each kept ordered
    edge (d = chunk i, q = chunk j) is an arc, above the line when d comes first and below
    when it comes after. The hover of a node shows its degree and the start of its text.
    ``fig.layout.meta["edges"]`` is the number of arcs drawn (= kept edges).
    """
    if data.table is None:
        raise ValueError("the stickiness graph needs the configuration's pair table")
    n = data.n
    edges = stickiness_edges(data.table, K, rule=rule, graph=graph, delta=delta)
    degree = np.zeros(n, dtype=np.int64)
    for i, j in edges:
        degree[i] += 1
        degree[j] += 1
    chunks = data.chunking.chunks
    return arc_diagram(
        n, edges, color,
        customdata=[[int(degree[k]), c.tokens, head_preview(c.text)] for k, c in enumerate(chunks)],
        hovertemplate="chunk %{x} · degree %{customdata[0]} · %{customdata[1]} tokens<br>"
        "<i>%{customdata[2]}</i><extra></extra>",
        title=f"{data.tag} · {len(edges):,} edges · CS {structural_entropy(edges, n):.3f}",
        meta={"graph": graph, "K": K, "rule": rule},
    )
