"""The Benchmark page's routing section: how a routed retriever (MoG, MoGG) weighed its levels, question by question.

:func:`routing_panel` draws one routed configuration's figures
(:mod:`backend.figures.routing`) with the captions that say what they count;
:func:`oracle_note` and :func:`training_note` are those captions, pure functions so they are
tested without a page run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import streamlit as st

from backend.figures.export import figure_html
from backend.figures.routing import level_choice_bars, oracle_confusion_heatmap, training_curve
from components.keys import PageKeys
from components.retrieval import md_text

if TYPE_CHECKING:
    from backend.retrieval.evaluate import ConfigResult
    from backend.retrieval.multi.retrievers import Routing
    from backend.retrieval.multi.level_router import TrainReport

__all__ = ["oracle_note", "training_note", "routing_panel"]

_PLOT = {"displaylogo": False}
_ROUTER_NOTES = {
    "cv": "each question routed by a router cross-fitted on the other folds (5 folds) of this set",
    "uniform": "equal weights (the finest level wins the tie)",
    "oracle": "each question's own soft label (an upper bound)",
}


def oracle_note(routing: Routing) -> str:
    """The confusion matrix's caption: agreement on the questions with an oracle level, and how many had none."""
    oracle = np.asarray(routing.oracle)
    chosen = np.asarray(routing.chosen)
    n = int(oracle.size)
    has = oracle > 0
    none = n - int(has.sum())
    if not has.any():
        return f"None of the {n} questions has an oracle level: no level's top-1 entry touches any answer."
    agree = int((oracle[has] == chosen[has]).sum())
    return (
        f"The router chose the oracle level (the level whose top-1 entry best matches the answer) for "
        f"**{agree} of {int(has.sum())}** questions. {none} of {n} question(s) had no oracle level "
        f"(no level's top-1 entry touches the answer) and are not counted."
    )


def training_note(training: TrainReport, level_names: Sequence[str]) -> str:
    """The training curve's caption: questions used and dropped, the validation split, the label histogram."""
    hist = " · ".join(f"{md_text(name)}: {count}" for name, count in zip(level_names, training.label_histogram))
    return (
        f"Trained on **{training.questions}** usable question(s) ({training.validation} held out for the "
        f"validation loss); **{training.dropped}** dropped (no level's top-1 entry touches the answer). "
        f"Best label per level: {hist}. {training.epochs} epochs, {training.seconds:.1f} s. This router, fitted on "
        "every usable question, is the one a saved router would be; the table's scores come from the cross-fitted ones."
    )


def _router_note(routing: Routing) -> str:
    kind = routing.router.split(":", 1)[0]
    if kind == "level":
        return f"weight 1 on {routing.router} only (MoG's selection without a router)"
    return _ROUTER_NOTES.get(kind, "weights from a trained router file")


def routing_panel(keys: PageKeys, tag: str, result: ConfigResult, corpus_of: Sequence[str]) -> None:
    """One routed configuration's chosen levels, oracle matrix and (``router=cv``) training curve.

    Args:
        keys: The page's keys (charts ``routing_levels``, ``routing_confusion``, ``routing_training``).
        tag: The configuration's tag.
        result: Its benchmark row (``result.routing`` must be set).
        corpus_of: Each question's corpus id, in question order.
    """
    routing = result.routing
    if routing is None:
        return
    st.caption(f"{md_text(tag)} · router={md_text(routing.router)}: {md_text(_router_note(routing))}.")
    st.caption(
        "Left: how many questions chose each level, per corpus; right: the router's mean weight per level "
        "(MoG's Figure 4, corpora for datasets). Below: the chosen level against the oracle level."
    )
    levels = level_choice_bars(routing, corpus_of)
    st.plotly_chart(levels, key=keys("routing_levels"), config=_PLOT)
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(oracle_confusion_heatmap(routing), key=keys("routing_confusion"), config=_PLOT)
        st.caption(oracle_note(routing))
    with c2:
        training = routing.training
        if training is not None:
            st.plotly_chart(training_curve(training), key=keys("routing_training"), config=_PLOT)
            st.caption(training_note(training, routing.level_names))
        elif routing.router == "cv":
            st.caption(
                "No training curve: fewer than 2 questions have a usable label (a level whose top-1 entry touches "
                "the answer), so no router could be trained and every question got the uniform weight 0.5."
            )
        else:
            st.caption(f"No training curve: router={md_text(routing.router)} trains nothing on this set.")
    st.download_button(
        "Levels chart (HTML)", lambda f=levels: figure_html(f), file_name=f"routing_levels_{tag}.html",
        mime="text/html", key=keys("dl_routing_levels"), icon=":material/download:", on_click="ignore",
    )
