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

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig
from backend.curves import Curve
from backend.errors import ChunkLabError, NotCached, one_line
from backend.text.document import Document
from components.cached import specs
from backend.figures.curves import curve_chart
from components.keys import PageKeys
from components.lm_runs import SessionModels
from components.ppl import partial_curve
from components.views import config_title, grid

__all__ = ["cached_curve", "curves_section", "partial_curve_preview"]


@st.cache_data(max_entries=64, show_spinner=False)
def cached_curve(
    _doc: Document, doc_id: str, config: ChunkerConfig, models_key: str, _context: ModelContext | None
) -> Curve | None:
    """``config``'s curve of the document, cached per (document id, configuration, models).

    Pass a cache-only context for a model-backed chunker: a miss raises ``NotCached`` (an
    exception is never cached, so a later call tries again).
    """
    return make_chunker(config.name, config.params_dict, config.tokenizer).curve(_doc, _context)


def _curve(doc: Document, config: ChunkerConfig, spec: dict[str, Any], lm: SessionModels | None) -> Curve | None:
    """The configuration's curve without a model call (raises ``NotCached`` when it needs the model)."""
    if not spec.get("needs"):
        return cached_curve(doc, doc.id, config, "", None)
    if lm is None:
        raise NotCached("no model for this configuration yet")
    if lm.error:
        raise ChunkLabError(lm.error)
    context = lm.cache_only()
    if context is None:
        raise NotCached(f"{lm.name} has not run on this document yet")
    return cached_curve(doc, doc.id, config, lm.models_key, context)


def partial_curve_preview(
    doc: Document, lm: SessionModels, configs: Sequence[ChunkerConfig], keys: PageKeys
) -> Callable[[Any], None] | None:
    """The preview for :func:`~components.lm_runs.pending_runs_panel` while a first scoring pass runs, or None.

    When a pending configuration has a curve and needs the language model, the panel draws
    the per-sentence curve of the part of the document already scored
    (:func:`components.ppl.partial_curve`) under its bar, growing as the job goes on.
    """
    by_name = {s["name"]: s for s in specs()}
    if not any(by_name.get(c.name, {}).get("has_curve") and "lm" in by_name[c.name].get("needs", ()) for c in configs):
        return None
    return lambda job: partial_curve(doc, job, lm.identity, lm.name, key=keys("partial_curve"))


def curves_section(
    doc: Document,
    results: Sequence[tuple[dict[str, Any], Any, str | None]],
    lm: SessionModels | None,
    color: Callable[[int], str],
    keys: PageKeys,
    per_row: int = 2,
) -> None:
    """A "Curves" section: one chart per configuration whose chunker has a curve; nothing when none has.

    Args:
        doc: The document.
        results: ``(entry, chunking or None, error or None)`` per configuration (a chunking
            that is None with no error waits for a model run).
        lm: The session's models (None when no configuration needs one).
        color: The configuration's colour from its uid.
        keys: The page's session-state keys (chart keys are ``keys(f"curve_{uid}")``).
        per_row: Charts side by side.
    """
    by_name = {s["name"]: s for s in specs()}
    rows = [r for r in results if by_name.get(r[0].config.name, {}).get("has_curve")]
    if not rows:
        return
    head, switch = st.columns([5, 1], vertical_alignment="bottom")
    head.subheader("Curves", anchor=False)
    if not switch.toggle("Show curves", value=True, key=keys("show_curves"), persist_state="session"):
        return
    st.caption(
        "What each chunker cut on: its value at every unit, the threshold it compared with, and dotted lines "
        "where its chunks end. Hover a point for its text; drag to zoom, double-click to reset."
    )
    for col, (entry, chunking, error) in grid(rows, per_row):
        with col:
            uid, config = entry.uid, entry.config
            config_title(entry, color(uid))
            if error:
                st.caption(f"No curve: {error}")
                continue
            if chunking is None:
                st.caption("Waiting for the model run…")
                continue
            try:
                curve = _curve(doc, config, by_name[config.name], lm)
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

