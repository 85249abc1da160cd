"""The Benchmark page's routing section: how a routed retriever (MoG, MoGG) weighed its levels, question by question.

:func:`routing_panel` draws one routed configuration's figures (:mod:`backend.figures.routing`)
with the captions :func:`backend.lab.benchmark.routing_view` writes (oracle agreement is computed
once, in the backend: :meth:`backend.retrieval.multi.retrievers.Routing.agreement`).
"""

from __future__ import annotations

import streamlit as st

from backend.figures.export import figure_html
from backend.figures.routing import level_choice_bars, oracle_confusion_heatmap, training_curve
from backend.lab.benchmark import routing_view
from backend.retrieval.evaluate import ConfigResult
from components.keys import PageKeys

__all__ = ["routing_panel"]

_PLOT = {"displaylogo": False}


def routing_panel(keys: PageKeys, tag: str, result: ConfigResult) -> None:
    """One routed configuration's chosen levels, oracle matrix and (``router=cv``) training curve.

    Args:
        keys: The page's keys (charts ``routing_levels``, ``routing_confusion``, ``routing_training``).
        tag: The configuration's tag.
        result: Its benchmark row (``result.routing`` must be set).
    """
    routing = result.routing
    if routing is None:
        return
    view = routing_view(tag, result)
    st.caption(view.caption)
    st.caption(
        "Left: how many questions chose each level, per corpus; right: the router's mean weight per level "
        "(MoG's Figure 4, corpora for datasets). Below: the chosen level against the oracle level."
    )
    levels = level_choice_bars(routing, view.corpus_of)
    st.plotly_chart(levels, key=keys("routing_levels"), config=_PLOT)
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(oracle_confusion_heatmap(routing), key=keys("routing_confusion"), config=_PLOT)
        st.caption(view.oracle_note)
    with c2:
        if routing.training is not None:
            st.plotly_chart(training_curve(routing.training), key=keys("routing_training"), config=_PLOT)
        st.caption(view.training_note)
    st.download_button(
        "Levels chart (HTML)", lambda f=levels: figure_html(f), file_name=f"routing_levels_{tag}.html",
        mime="text/html", key=keys("dl_routing_levels"), icon=":material/download:", on_click="ignore",
    )
