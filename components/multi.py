"""The Retrieval page's panel explaining a multi-granularity retriever's live answer (``mog``, ``mogg``, ``freechunker``).

:func:`retriever_panel`: the router weights (with each level's top-1 IoU once an answer is
marked), the level ladder, MoGG's graph behind a toggle with a ``t_graph`` slider, FreeChunker's
runs. The numbers come from the backend (:mod:`backend.retrieval.multi`,
:func:`backend.retrieval.live.level_top1`); the figures and the runs' HTML from
:mod:`backend.figures.multi` and :mod:`backend.figures.retrieval_html`. Document text is escaped
there before it reaches markup.
"""

from __future__ import annotations

from typing import Sequence

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.multi import degree_histogram, ladder_figure, ladder_parts, picks_graph_figure, weights_figure
from backend.figures.retrieval_html import runs_html
from backend.figures.text import esc, tag_badge_html
from backend.retrieval.live import level_top1
from backend.retrieval.multi.retrievers import LiveRetrieval
from components.keys import PageKeys

__all__ = ["retriever_panel"]


def _graph_view(live: LiveRetrieval, color: str, keys: PageKeys, uid: int) -> None:
    """MoGG's node graph around the emitted neighbourhoods, with a threshold slider and the degrees."""
    graph = live.index.graph
    if graph is None:
        return
    built = float(graph.t_graph)
    key = keys(f"tgraph_{uid}")
    held = st.session_state.get(key)
    if held is not None and not built <= held <= 1.0:  # a new search built the graph at another threshold
        st.session_state[key] = built
    if built < 1.0:
        t = st.slider(
            "t_graph", min_value=built, max_value=1.0, value=built, step=0.01, key=key,
            help="Raise the edge threshold to see which edges remain (no rebuild: the top-k_graph choices stay). "
            "Lowering it below the built value needs a new configuration.",
        )
    else:
        t = built
    try:
        shown = graph.with_threshold(t)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return
    st.caption(
        f"{len(shown.edges):,} edges at t_graph ≥ {t:.2f} (built at {built:g}: {len(graph.edges):,} edges) · "
        "the levels and picks above were built with the configuration's t_graph."
    )
    st.plotly_chart(picks_graph_figure(live, shown, color), key=keys(f"arcs_{uid}"), config={"displaylogo": False})
    st.plotly_chart(degree_histogram(shown.degrees().tolist(), color), key=keys(f"degrees_{uid}"),
                    config={"displaylogo": False})


def retriever_panel(tag: str, label: str, color: str, live: LiveRetrieval, marks: Sequence[tuple[int, int]],
                    keys: PageKeys, uid: int) -> None:
    """A retriever's live answer explained: weights, the ladder, the graph (MoGG) or the runs (FreeChunker).

    Draws an expander; its charts have the keys ``<prefix>_weights_<uid>``, ``<prefix>_ladder_<uid>``
    (and MoGG's ``<prefix>_graph_<uid>`` toggle, ``<prefix>_tgraph_<uid>`` slider,
    ``<prefix>_arcs_<uid>`` and ``<prefix>_degrees_<uid>``).

    Args:
        tag: The configuration's tag.
        label: Its label.
        color: Its colour.
        live: Its answer to the query.
        marks: The marked answer now (the top-1 IoU bars follow it without a new search).
        keys: The page's keys.
        uid: The configuration's uid (widget keys).
    """
    sel, index = live.selection, live.index
    names = [lv.name for lv in index.levels]
    with st.expander(f"{tag} · {label}: levels and routing", icon=":material/stacks:"):
        st.html(f"{tag_badge_html(tag, color)}<b>{esc(label)}</b>")
        built = "reused" if index.reused else f"built in {index.seconds:.1f} s, {index.texts_embedded:,} texts embedded"
        st.caption(
            f"{len(index.units.chunks):,} units · {len(names)} levels ({', '.join(names)}) · index {built}"
        )
        if sel.level is not None and sel.weights is not None:
            sims = level_top1(live, marks)
            st.markdown(f"**Router** · chosen level: **{names[sel.level - 1]}**")
            st.plotly_chart(weights_figure(names, sel.weights, sel.level, None if sims is None else sims.tolist()),
                            key=keys(f"weights_{uid}"), config={"displaylogo": False})
            if sims is None:
                st.caption("Mark the true answer to see each level's top-1 IoU beside its weight.")
        if live.note:
            st.caption(f"Router: {live.note}.")
        st.markdown("**Level ladder**")
        rungs, outlines = ladder_parts(live)
        st.caption(
            "Each row is a level along the document: its candidates shaded by similarity to the query (darker: "
            + ("closer); the picks outlined in red on the chosen level." if sel.level is not None else
               "closer); the assembled runs outlined in red across the rows.")
        )
        st.plotly_chart(ladder_figure(rungs, outlines, len(index.doc.text)), key=keys(f"ladder_{uid}"),
                        config={"displaylogo": False})
        if index.graph is not None and st.toggle("Show the node graph", key=keys(f"graph_{uid}"),
                                                 help="MoGG's nodes and similarity edges; the emitted "
                                                 "neighbourhoods' nodes in red."):
            _graph_view(live, color, keys, uid)
        if sel.level is None:
            st.markdown("**Assembled runs**")
            with st.container(height=360, border=True, key=keys(f"runs_{uid}")):
                st.html(runs_html(index.doc.text, sel.picks, color))
