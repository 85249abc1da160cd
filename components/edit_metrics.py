"""The Edit page's live metrics panel: an edited copy against its base (statistics, BC/CS/DS, retrieval).

Everything shown comes from :mod:`backend.lab.edit_metrics` (what ``python -m backend edit``
prints): the statistics at once; BC, CS and DS planned for ``[base, edited]`` in the Quality
page's store, their job started by itself when it is small (an edit's few pairs) or on a click
with its cost; the retrieval re-evaluation on the session's question set behind a button.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.chunking import Chunking, ConfigEntry
from backend.errors import ChunkLabError, one_line
from backend.figures.markdown import md_text
from backend.lab.edit_metrics import edit_stats, plan_edit_quality, plan_edit_retrieval, retrieval_changes
from backend.lab.quality import fold_scoring, quality_settings
from backend.lab.settings import QUESTION_SOURCES
from backend.metrics.report import model_needs
from backend.text.document import Document
from components.keys import EDIT, EMB_CHOICE, QSET, QUALITY_THROUGHPUT
from components.lm_runs import model_job_panel, session_models
from components.quality import estimates_preview, quality_store, session_throughput
from components.settings import get, section_values

__all__ = ["edit_metrics_panel"]

QUALITY_JOB = EDIT("m_quality_job")
RETRIEVAL_JOB = EDIT("m_retrieval_job")


def edit_metrics_panel(
    doc: Document,
    base_entry: ConfigEntry | None,
    base: Chunking,
    edited_entry: ConfigEntry,
    edited: Chunking,
) -> None:
    """Draw the change of every metric from the base to the edited copy ("BC 0.91 → 0.89, IoU 6.1% → 6.4%").

    Args:
        doc: The document.
        base_entry: The base's configuration entry when the session lists it (its letter), else None.
        base: The base's chunking.
        edited_entry: The edited copy's entry (its current configuration).
        edited: The edited copy's chunking (the current edits).
    """
    stats = edit_stats(doc, base, edited)
    st.markdown(f"**{md_text(stats.summary)}**")
    st.dataframe(pd.DataFrame(list(stats.rows)), key=EDIT("m_stats"), hide_index=True)
    _quality(doc, base_entry, base, edited_entry, edited)
    _retrieval(doc, base_entry, base, edited_entry)


def _quality(
    doc: Document, base_entry: ConfigEntry | None, base: Chunking, edited_entry: ConfigEntry, edited: Chunking
) -> None:
    """BC, CS and DS of the base and the copy, with the job for the pairs the edits changed."""
    metrics = list(get("quality", "metrics") or [])
    if not metrics:
        st.caption("No quality metric picked: pick BC, CS or DS on the Quality page.")
        return
    models = session_models()
    if model_needs(metrics).scorer and models.error:
        st.error(models.error, icon=":material/error:")
        return
    store = quality_store(doc)
    settings = quality_settings(section_values("quality"))
    try:
        quality = plan_edit_quality(
            doc, base_entry, base, edited_entry, edited, models, metrics=metrics, window=get("quality", "window"),
            store=store, settings=settings, graph=get("quality", "graph"), throughput=session_throughput(),
        )
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return
    store.update(quality.plan.found)
    st.markdown(md_text(quality.line))
    st.caption(md_text(quality.note))
    if quality.job is None:
        st.session_state.pop(QUALITY_JOB, None)  # a finished job whose scores the cache now answers
        return
    job = model_job_panel(
        QUALITY_JOB, quality.job, run_label=quality.plan.run_label, run_key=EDIT("m_quality_run"),
        cancel_key=EDIT("m_quality_cancel"), auto=quality.auto, what="Scoring the edit",
        confirm=None if quality.auto else quality.plan.confirm_label, confirm_key=EDIT("m_quality_confirm"),
        preview=estimates_preview(quality.plan, settings, doc.source, EDIT("m_estimates")),  # ≈ with intervals
    )
    if job is None:
        return
    st.session_state[QUALITY_THROUGHPUT] = fold_scoring(quality.plan, job.result, store)
    st.session_state.pop(QUALITY_JOB, None)
    st.rerun()


def _retrieval(doc: Document, base_entry: ConfigEntry | None, base: Chunking, edited_entry: ConfigEntry) -> None:
    """The retrieval metrics of the base and the copy on the session's question set (a button: it is heavier)."""
    name = QUESTION_SOURCES[0]
    try:
        retrieval = plan_edit_retrieval(
            doc, base_entry, base, edited_entry, st.session_state.get(QSET), session_models(), qset_name=name,
            embedder=st.session_state.get(EMB_CHOICE) or None, retrieve=int(get("benchmark", "retrieve")),
            auto=bool(get("benchmark", "auto")), cross_corpus=bool(get("benchmark", "cross")),
        )
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return
    if retrieval.job is None:
        st.caption(md_text(retrieval.message))
        return
    job = model_job_panel(
        RETRIEVAL_JOB, retrieval.job, run_label=retrieval.label, run_key=EDIT("m_retrieval_run"),
        cancel_key=EDIT("m_retrieval_cancel"), auto=False, what="The re-evaluation",
    )
    if job is not None:
        st.markdown(md_text(retrieval_changes(job.result.benchmark, retrieval.qset_name)))
