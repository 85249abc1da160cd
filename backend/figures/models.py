"""The Models page's figure: mean NLL per sentence of a scored document."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from backend.models.scoring import SentenceScore

__all__ = ["sentence_nll_chart"]


def sentence_nll_chart(scores: list[SentenceScore]) -> go.Figure:
    """Mean NLL per sentence as a line, with each sentence's start in the hover label."""
    def preview(text: str) -> str:
        flat = " ".join(text[:160].split())
        return html.escape(flat[:79] + "…" if len(flat) > 80 else flat, quote=False)

    fig = go.Figure(
        go.Scatter(
            x=[s.index for s in scores],
            y=[s.nll_mean for s in scores],
            mode="lines+markers",
            marker={"size": 4},
            line={"width": 1.5, "color": "#2563eb"},
            customdata=[[s.tokens, s.ppl, preview(s.text)] for s in scores],
            hovertemplate="sentence %{x}<br>mean NLL %{y:.2f} · PPL %{customdata[1]:.1f}"
            " · %{customdata[0]} tokens<br>%{customdata[2]}<extra></extra>",
        )
    )
    fig.update_layout(
        height=260,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis_title="sentence",
        yaxis_title="mean NLL (nats)",
    )
    return fig
