"""Figures and tables of a corpus run: one metric's distribution over the documents, per configuration.

The figures take the long table of :func:`backend.corpus.aggregate.metric_values` (one line per
document, configuration and metric), so the Corpus page and the one-file report draw the same
thing. Document names come from the corpus (file names are untrusted input): every one shown in
a hover or an HTML cell is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from backend.figures.charts import config_color, legend_with_title

__all__ = ["DISTRIBUTION_KINDS", "distribution_figure", "tag_color", "html_table"]

DISTRIBUTION_KINDS = ("box", "violin")


def tag_color(tag: str) -> str:
    """A corpus configuration's colour: by its letter's place (A first), as :func:`config_color` colours positions."""
    index = 0
    for ch in tag:
        index = index * 26 + (ord(ch) - ord("A") + 1)
    return config_color(max(index - 1, 0))


def distribution_figure(values: pd.DataFrame, metric: str, label: str, *, kind: str = "box",
                        labels: Mapping[str, str] | None = None) -> go.Figure:
    """The distribution of ``metric`` over the documents: one box (or violin) per configuration, every document a point.

    Args:
        values: :func:`~backend.corpus.aggregate.metric_values` of the rows.
        metric: Which metric (a name of :data:`~backend.corpus.aggregate.AGGREGATE_METRICS`).
        label: The metric's label (the y axis).
        kind: ``box`` or ``violin``.
        labels: Each tag's configuration label (the legend).

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in DISTRIBUTION_KINDS:
        raise ValueError(f"kind must be one of {', '.join(DISTRIBUTION_KINDS)}, got {kind!r}")
    part = values[values["metric"] == metric]
    fig = go.Figure()
    tags = sorted(part["tag"].unique(), key=lambda t: (len(t), t))
    for tag in tags:
        mine = part[part["tag"] == tag].sort_values("doc")
        names = [html.escape(str(d), quote=False) for d in mine["doc"]]
        n = len(mine)
        name = f"{tag} ({n} document{'s' if n != 1 else ''})"
        legend = f"{tag} · {html.escape(labels[tag], quote=False)}" if labels and tag in labels else name
        common: dict[str, Any] = {
            "y": mine["value"].tolist(), "x": [tag] * n, "name": legend, "customdata": names,
            "marker": {"color": tag_color(tag), "size": 5}, "line": {"color": tag_color(tag)},
            "hovertemplate": f"{tag} · %{{customdata}}: %{{y:.4g}}<extra></extra>", "showlegend": True,
        }
        if kind == "box":
            fig.add_trace(go.Box(boxpoints="all", jitter=0.4, pointpos=0, boxmean=True, **common))
        else:
            fig.add_trace(go.Violin(points="all", jitter=0.4, pointpos=0, box={"visible": True},
                                    meanline={"visible": True}, **common))
    docs = part["doc"].nunique()
    title = f"{html.escape(label, quote=False)} over {docs} document{'s' if docs != 1 else ''}, per configuration"
    fig.update_layout(
        yaxis_title=html.escape(label, quote=False), xaxis_title="configuration", height=420,
        margin={"l": 60, "r": 20, "t": 40, "b": 50}, legend=legend_with_title(title),
    )
    return fig


def _cell(value: Any) -> str:
    return html.escape("—" if value is None else str(value), quote=True)


def html_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, element_id: str,
               numeric: Sequence[bool] | None = None, badges: Mapping[int, str] | None = None) -> str:
    """A plain ``<table>``: every header and cell escaped (document names and labels are untrusted).

    Args:
        columns: The headers.
        rows: The cells (already formatted; None reads ``—``).
        element_id: The table's id.
        numeric: Which columns are numbers (right-aligned).
        badges: Column index → ``tag``: that column's cells are configuration letters drawn as coloured badges.
    """
    numeric = numeric or [False] * len(columns)
    head = "".join(f"<th>{_cell(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            if badges and i in badges and value is not None:
                cells.append(f'<td><span class="tag" style="background:{tag_color(str(value))}">{_cell(value)}</span></td>')
            else:
                cells.append(f'<td class="num">{_cell(value)}</td>' if numeric[i] else f"<td>{_cell(value)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table id="{html.escape(element_id, quote=True)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
