"""Plotly figures of a routed retriever's routing (MoG, MoGG): chosen levels, oracle agreement, the router's training.

Each builder takes a :class:`~backend.retrieval.multi.retrievers.Routing` (or its
:class:`~backend.retrieval.multi.level_router.TrainReport`) and returns a ``go.Figure``; the
Benchmark page draws them for each routed configuration. :func:`level_choice_bars` is MoG's
Figure 4 ("averaged weights of different granularity levels on different QA datasets") with
corpora in place of datasets, beside how often each level was actually chosen.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from backend.errors import ParameterError
from backend.figures.charts import config_color, legend_with_title
from backend.retrieval.multi.level_router import TrainReport
from backend.retrieval.multi.retrievers import Routing

__all__ = ["level_choice_bars", "oracle_confusion_heatmap", "training_curve"]


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def level_choice_bars(routing: Routing, corpus_of: Sequence[str]) -> go.Figure:
    """Per corpus, how often each level was chosen (left) and the mean router weight per level (right).

    Args:
        routing: The configuration's routing.
        corpus_of: The corpus id of each question, in the order of ``routing.chosen``.

    Raises:
        ParameterError: ``corpus_of`` is not one corpus id per question.
    """
    chosen = np.asarray(routing.chosen, dtype=np.int64)
    weights = np.asarray(routing.weights, dtype=np.float64)
    if len(corpus_of) != chosen.size:
        raise ParameterError(f"corpus_of has {len(corpus_of)} entries for {chosen.size} questions")
    names = list(routing.level_names)
    levels = len(names)
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=("questions choosing each level", "mean router weight per level"),
    )
    corpora = list(dict.fromkeys(corpus_of))
    where = np.asarray(corpus_of, dtype=object)
    top = 1
    for i, cid in enumerate(corpora):
        mine = where == cid
        counts = np.bincount(chosen[mine] - 1, minlength=levels)[:levels] if mine.any() else np.zeros(levels, int)
        mean_w = weights[mine].mean(axis=0) if mine.any() and weights.size else np.zeros(levels)
        top = max(top, int(counts.max(initial=0)))
        color = config_color(i)
        name = _esc(cid)
        fig.add_trace(
            go.Bar(x=names, y=counts.tolist(), name=name, legendgroup=name, marker={"color": color},
                   hovertemplate=f"{name} · %{{x}}: %{{y}} question(s)<extra></extra>"),
            row=1, col=1,
        )
        fig.add_trace(
            go.Bar(x=names, y=mean_w.tolist(), name=name, legendgroup=name, showlegend=False,
                   marker={"color": color}, hovertemplate=f"{name} · %{{x}}: mean weight %{{y:.3f}}<extra></extra>"),
            row=1, col=2,
        )
    fig.update_layout(
        barmode="group",
        height=360,
        margin={"l": 10, "r": 10, "t": 70, "b": 30},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.12, "x": 0, "title": {"text": "corpus "}},
    )
    fig.update_annotations(font_size=13)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(title_text="questions", rangemode="tozero", dtick=max(1, math.ceil(top / 6)),
                     automargin=True, row=1, col=1)
    fig.update_yaxes(title_text="weight", rangemode="tozero", automargin=True, row=1, col=2)
    return fig


def oracle_confusion_heatmap(routing: Routing) -> go.Figure:
    """Questions by oracle level (rows) and chosen level (columns), counts in the cells.

    The diagonal is where the router chose the level whose top-1 entry best matched the
    answer; questions without an oracle level (no level's top-1 touches the answer) are not
    counted (see :meth:`~backend.retrieval.multi.retrievers.Routing.confusion`).
    """
    matrix = np.asarray(routing.confusion(), dtype=np.int64)
    names = list(routing.level_names)
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            x=names,
            y=names,
            zmin=0,
            colorscale="Blues",
            text=[[str(v) for v in row] for row in matrix.tolist()],
            texttemplate="%{text}",
            colorbar={"title": {"text": "questions"}},
            hovertemplate="oracle %{y}, chosen %{x}: %{z} question(s)<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(260, 48 * len(names) + 110),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={"text": "oracle level × chosen level", "font": {"size": 13}},
        xaxis={"title": {"text": "chosen level"}, "side": "bottom", "automargin": True},
        yaxis={"title": {"text": "oracle level"}, "autorange": "reversed", "automargin": True},
    )
    return fig


def training_curve(training: TrainReport) -> go.Figure:
    """The router's train and validation loss (eq. 3, summed over levels) per epoch; validation only with a split."""
    fig = go.Figure()
    lines = (("train", training.train_loss, "solid", "#2563eb"), ("validation", training.val_loss, "dash", "#d97706"))
    for name, losses, dash, color in lines:
        if not losses:
            continue
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(losses) + 1)), y=list(losses), mode="lines", name=name,
                line={"dash": dash, "color": color}, hovertemplate=f"{name} · epoch %{{x}}: %{{y:.4f}}<extra></extra>",
            )
        )
    fig.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        xaxis={"title": {"text": "epoch"}, "automargin": True},
        yaxis={"title": {"text": "BCE loss"}, "rangemode": "tozero", "automargin": True},
        legend=legend_with_title("router training (all usable questions)", font_size=10),
    )
    return fig
