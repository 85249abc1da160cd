"""The Retrieval page's views of a multi-granularity retriever's live answer (``mog``, ``mogg``, ``freechunker``).

- :func:`picks_html`: a retriever's top k as the top-k table of a chunker (rank, text, then
  score, level, tokens and span), a pick's separate stretches joined by "…";
- :func:`runs_html`: FreeChunker's assembled runs in the document, the text between runs
  announced by its length;
- :func:`picks_layer` and :func:`picks_texts`: the picks as a layer of the document view
  (several stretches, one rank) and as the texts CP conditions on;
- :func:`retriever_panel`: the per-retriever panel — router weights (with each level's top-1
  IoU once an answer is marked), the level ladder, MoGG's graph behind a toggle with a
  ``t_graph`` slider, FreeChunker's runs.

The numbers come from the backend (:mod:`backend.retrieval.multi`, :func:`backend.retrieval.live.level_top1`);
the figures from :mod:`backend.figures.multi`. Document text is escaped
(:func:`backend.figures.text.esc`) before it reaches markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.retrieval.live import level_top1
from backend.figures.multi import degree_histogram, graph_figure, ladder_figure, ladder_parts, weights_figure
from components.keys import PageKeys
from components.retrieval import Layer
from backend.figures.text import esc, tag_badge_html

if TYPE_CHECKING:
    from backend.retrieval.multi.retrievers import LiveRetrieval
    from backend.retrieval.multi.select import Pick

__all__ = ["pick_level_name", "picks_html", "picks_layer", "picks_texts", "runs_html", "retriever_panel", "RETRIEVER_NOTE"]

PICK_TEXT_CHARS = 300  # characters of each pick shown in its table, over all its stretches
RUNS_MAX_CHARS = 30_000
RETRIEVER_NOTE = (
    "Precision-Ω of a retriever is computed on its finest units (its levels have no single chunking)."
)


def _flat(text: str, n: int) -> str:
    flat = " ".join(text[: n * 2].split())
    return flat if len(flat) <= n else flat[: max(n - 1, 0)] + "…"


def pick_level_name(live: LiveRetrieval, pick: Pick) -> str:
    """Where a pick comes from: MoG(G)'s level name, or a FreeChunker run's length in units."""
    if live.selection.level is None:
        n = len(pick.units)
        return f"run of {n} unit{'s' if n != 1 else ''}"
    return live.index.levels[pick.level - 1].name


def picks_html(live: LiveRetrieval, text: str) -> str:
    """A retriever's top k as an HTML table: rank, its text (stretches joined by "…"), score, level, tokens, span.

    The table has the classes ``rt-hits rt-picks`` (the chunkers' tables' style). Each pick shows
    at most :data:`PICK_TEXT_CHARS` characters, shared among its stretches.
    """
    rows = []
    for rank, p in enumerate(live.selection.picks, 1):
        share = max(PICK_TEXT_CHARS // len(p.ranges), 40)
        pieces = [esc(_flat(text[s:e], share)) for s, e in p.ranges]
        shown = ' <span class="cl-gap">…</span> '.join(pieces)
        where = f"{p.start:,}–{p.end:,}" + (f"<br>{len(p.ranges)} stretches" if len(p.ranges) > 1 else "")
        rows.append(
            f'<tr><td class="rk">{rank}</td><td class="tx">{shown}</td>'
            f'<td class="nm">{p.score:.3f}<br>{esc(pick_level_name(live, p))}<br>{p.tokens:,} tok<br>{where}</td></tr>'
        )
    if not rows:
        rows.append('<tr><td class="rk"></td><td class="tx cl-gap">Nothing scored above 0.</td><td></td></tr>')
    head = "weighted score w · t_rs" if live.selection.level is not None else "best similarity in the run"
    return (
        '<table class="rt-hits rt-picks"><thead><tr><th>#</th><th>Retrieved</th>'
        f'<th title="{esc(head)} · level · tokens · characters">Score</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def picks_layer(tag: str, color: str, live: LiveRetrieval) -> Layer:
    """A retriever's picks as a layer of the document view: a pick of several stretches is several spans of one rank."""
    return Layer(tag, color, tuple((s, e, rank) for rank, p in enumerate(live.selection.picks, 1) for s, e in p.ranges))


def picks_texts(live: LiveRetrieval, text: str) -> list[str]:
    """Each pick's text, its stretches joined by a newline (what CP conditions on), rank 1 first."""
    return ["\n".join(text[s:e] for s, e in p.ranges) for p in live.selection.picks]


def runs_html(text: str, picks: Sequence[Pick], color: str, *, max_chars: int = RUNS_MAX_CHARS) -> str:
    """The picks' stretches in document order, highlighted with their rank, the text between them as "… n characters …".

    Args:
        text: The document text (escaped here).
        picks: FreeChunker's runs (or any picks).
        color: The configuration's colour.
        max_chars: Cap on the characters shown.
    """
    stretches = sorted((s, e, rank) for rank, p in enumerate(picks, 1) for s, e in p.ranges)
    if not stretches:
        return '<div class="rt-doc"><span class="cl-gap">Nothing retrieved.</span></div>'
    out = ['<div class="rt-doc">']
    pos, budget = 0, max_chars
    for s, e, rank in stretches:
        if s > pos:
            out.append(f'<div class="cl-gap">… {s - pos:,} characters …</div>')
        if budget <= 0:
            out.append('<div class="cl-more">… more runs not shown</div>')
            pos = len(text)
            break
        shown = min(e, s + budget)
        budget -= shown - s
        out.append(
            f'<div><span class="rt-rank" style="background:{esc(color)}" title="rank {rank}">#{rank}</span>'
            f'<span style="background:{esc(color)}33">{esc(text[max(s, pos):shown])}</span>'
            + ('<span class="cl-more"> …</span>' if shown < e else "") + "</div>"
        )
        pos = max(pos, e)
    if pos < len(text):
        out.append(f'<div class="cl-gap">… {len(text) - pos:,} characters …</div>')
    out.append("</div>")
    return "".join(out)


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
    nodes = sorted({u for p in live.selection.picks for u in p.units})
    texts = [c.text for c in live.index.units.chunks]
    st.plotly_chart(graph_figure(shown, texts, nodes, color), key=keys(f"arcs_{uid}"), config={"displaylogo": False})
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
