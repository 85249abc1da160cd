"""Curves: the Streamlit section that shows what each chunker cut on (its values, threshold and chunk ends).

Any registered chunker that overrides ``Chunker.curve`` (spec ``"has_curve": true``) gets a
curve on the Compare page with no page code: :func:`curves_section` finds them in the
registry and :func:`backend.figures.curves.curve_chart` draws any
:class:`~backend.curves.Curve`. A model-backed chunker's curve is read from the output cache
only (the same cache-only context as its chunking): a miss says "waiting for the model run"
and never calls a model.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import streamlit as st

from backend.chunking import ChunkerConfig
from backend.curves import Curve
from backend.errors import ChunkLabError, NotCached, one_line
from backend.figures.curves import curve_chart
from backend.lab.compare import Column
from backend.lab.curves import cached_curve_of, grows_while_scored, has_curve
from backend.lab.models import SessionModels
from backend.text.document import Document
from components.keys import PageKeys
from components.ppl import partial_curve
from components.settings import prepare, spec
from components.views import config_title, grid

__all__ = ["curves_section", "partial_curve_preview"]


@st.cache_data(max_entries=64, show_spinner=False)
def _curve(_doc: Document, doc_id: str, config: ChunkerConfig, models_key: str, _models: SessionModels | None) -> Curve | None:
    """:func:`backend.lab.curves.cached_curve_of`, cached per (document id, configuration, models).

    A miss raises ``NotCached`` (an exception is never cached, so a later call tries again).
    """
    return cached_curve_of(_doc, config, _models)


def partial_curve_preview(
    doc: Document, lm: SessionModels, configs: Sequence[ChunkerConfig], keys: PageKeys
) -> Callable[[Any], None] | None:
    """The preview for :func:`~components.lm_runs.pending_runs_panel` while a first scoring pass runs, or None.

    When a pending configuration has a curve and needs the language model, the panel draws
    the per-sentence curve of the part of the document already scored
    (:func:`components.ppl.partial_curve`) under its bar, growing as the job goes on.
    """
    if not grows_while_scored(configs):
        return None
    return lambda job: partial_curve(doc, job, lm.identity, lm.name, key=keys("partial_curve"))


def curves_section(
    doc: Document,
    columns: Sequence[Column],
    lm: SessionModels | None,
    color: Callable[[int], str],
    keys: PageKeys,
    per_row: int = 2,
) -> None:
    """A "Curves" section: one chart per configuration whose chunker has a curve; nothing when none has.

    Args:
        doc: The document.
        columns: The page's configurations with their chunkings (or why there is none).
        lm: The session's models (None when no configuration needs one).
        color: The configuration's colour from its uid.
        keys: The page's session-state keys (chart keys are ``keys(f"curve_{uid}")``).
        per_row: Charts side by side.
    """
    rows = [c for c in columns if has_curve(c.entry.config)]
    if not rows:
        return
    head, switch = st.columns([5, 1], vertical_alignment="bottom")
    head.subheader("Curves", anchor=False)
    show = spec("compare", "show_curves")
    if not switch.toggle("Show curves", key=prepare("compare", "show_curves"), persist_state="session", help=show.help):
        return
    st.caption(
        "What each chunker cut on: its value at every unit, the threshold it compared with, and dotted lines "
        "where its chunks end. Hover a point for its text; drag to zoom, double-click to reset."
    )
    for col, column in grid(rows, per_row):
        with col:
            entry = column.entry
            uid, config = entry.uid, entry.config
            config_title(entry, color(uid))
            if column.error:
                st.caption(f"No curve: {column.error}")
                continue
            if column.chunking is None:
                st.caption("Waiting for the model run…")
                continue
            try:
                curve = _curve(doc, doc.id, config, lm.models_key if lm is not None else "", lm)
            except NotCached:
                st.caption("Waiting for the model run…")
                continue
            except ChunkLabError as e:
                st.caption(f"No curve: {one_line(str(e))}")
                continue
            if curve is None or not len(curve):
                st.caption("No curve: the document has too few units.")
                continue
            st.plotly_chart(
                curve_chart(curve, doc.text, color(uid), f"{entry.tag} · {config.label}", f"{doc.id}:{uid}"),
                key=keys(f"curve_{uid}"),
                config={"displaylogo": False},
            )

