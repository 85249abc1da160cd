"""The Corpus page's widgets: where the corpus is, the live rows of a running job, and the results of a run.

Everything shown is computed in :mod:`backend.lab.corpus` (the view of an output folder) and
:mod:`backend.report.corpus` (the verdict and the report); these functions only draw it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.corpus import DISTRIBUTION_KINDS
from backend.figures.markdown import md_text
from backend.jobs import Job
from backend.lab.corpus import CorpusView, check_corpus_path, corpus_view, open_in_compare, save_upload
from backend.report.corpus import corpus_report_html
from components.keys import CORPUS, CORPUS_JOB, SUMMARY
from components.state import replace_configurations, set_document

__all__ = ["aggregate_frame", "corpus_source", "corpus_summary_section", "finished_view", "live_rows", "results_panel"]

_PLOT = {"displaylogo": False}
_UPLOADED = CORPUS("uploaded")  # the path the last uploaded zip was saved to


def corpus_source() -> Path | None:
    """The corpus picked: an uploaded zip (kept under the data folder) or a folder or zip on the server; None yet.

    A bad upload or path shows its one-line error and gives None.
    """
    upload, server = st.tabs(["Upload a zip", "A path on the server"])
    with upload:
        file = st.file_uploader("A .zip of documents", type=["zip"], key=CORPUS("upload"),
                                help="Every document in it that Chunk Lab reads (PDF, DOCX, HTML, Markdown, text); "
                                     "other files are listed as skipped.")
    with server:
        raw = st.text_input("Folder or .zip", key=CORPUS("path"), placeholder="/data/manuals",
                            help="Read recursively; hidden files and folders are left out.")
    if raw.strip():
        try:
            return check_corpus_path(raw)
        except ChunkLabError as e:
            st.error(one_line(str(e)), icon=":material/error:")
            return None
    if file is not None:
        try:
            path = save_upload(file.getvalue(), file.name)
        except ChunkLabError as e:
            st.error(one_line(str(e)), icon=":material/error:")
            return None
        st.session_state[_UPLOADED] = str(path)
        return path
    return None


def aggregate_frame(view: CorpusView) -> pd.DataFrame:
    """The aggregate table as a frame (one line per configuration and metric)."""
    return pd.DataFrame(view.table_rows())


_NUMBER = st.column_config.NumberColumn


def _table(view: CorpusView, key: str) -> None:
    frame = aggregate_frame(view)
    if frame.empty:
        st.caption("No document has rows yet.")
        return
    st.dataframe(
        frame, key=key, hide_index=True,
        column_order=("tag", "metric", "documents", "mean", "ci_low", "ci_high", "std", "min", "median", "max",
                      "configuration"),
        column_config={
            "metric": st.column_config.TextColumn("Metric"), "tag": st.column_config.TextColumn("", width="small"),
            "configuration": st.column_config.TextColumn("Configuration", width="medium"),
            "documents": _NUMBER("Documents", help="How many documents the mean stands on"),
            "mean": _NUMBER("Mean", format="%.4g"),
            "ci_low": _NUMBER("95% low", format="%.4g", help="The 95% interval of the mean over the documents"),
            "ci_high": _NUMBER("95% high", format="%.4g", help="The 95% interval of the mean over the documents"),
            "std": _NUMBER("Std", format="%.4g"), "min": _NUMBER("Min", format="%.4g"),
            "median": _NUMBER("Median", format="%.4g"), "max": _NUMBER("Max", format="%.4g"),
        },
    )


def live_rows(job: Job) -> None:
    """Under a running corpus job's bar: the rows written so far and their aggregate table (read from its folder)."""
    try:
        view = corpus_view(job.meta["out"], job.meta["configs"])
    except ChunkLabError as e:
        st.caption(one_line(str(e)))
        return
    st.caption(f"So far: {md_text(view.caption())}")
    _table(view, CORPUS("live_table"))


def _open_in_compare(view: CorpusView, name: str) -> None:
    """A button's callback: load ``name`` and the run's configurations, then go to Compare."""
    try:
        doc, configs = open_in_compare(view, name)
    except ChunkLabError as e:
        st.session_state[CORPUS("open_error")] = one_line(str(e))
        return
    set_document(doc)
    replace_configurations(configs)
    st.session_state[CORPUS("go_compare")] = True


def results_panel(view: CorpusView) -> None:
    """The results of a run: verdict, aggregate table, distributions, disagreements, skipped files, a click into Compare."""
    st.caption(md_text(view.caption()))
    st.markdown("**Verdict**")
    st.markdown("\n".join(f"- {md_text(line)}" for line in view.verdict) or "No document has rows yet.")
    st.download_button(
        "Download the report (HTML)", lambda: corpus_report_html(view.results), file_name="corpus_report.html",
        mime="text/html", key=CORPUS("dl_report"), icon=":material/download:", on_click="ignore",
        help="One file (opens offline): the verdict, this table, the distributions and the disagreements",
    )
    st.markdown("**Per configuration**")
    _table(view, CORPUS("table"))
    if not view.metrics:
        return
    labels = {m: view.metric_label(m) for m in view.metrics}
    c1, c2 = st.columns([3, 1])
    metric = c1.selectbox("Metric", list(view.metrics), key=CORPUS("metric"), format_func=labels.get)
    kind = c2.segmented_control("Plot", list(DISTRIBUTION_KINDS), default="box", required=True, key=CORPUS("kind"))
    st.plotly_chart(view.distribution(metric, kind), key=CORPUS("distribution"), config=_PLOT)
    st.markdown(f"**Where the configurations disagree most on {md_text(labels[metric])}**")
    found = view.disagreements(metric)
    if found:
        st.dataframe(
            pd.DataFrame(found), key=CORPUS("disagreements"), hide_index=True,
            column_config={"doc": st.column_config.TextColumn("Document"),
                           "spread": _NUMBER("Spread", format="%.4g"),
                           "scaled_spread": _NUMBER("Spread / corpus std", format="%.2f"),
                           "best": st.column_config.TextColumn("Best here"),
                           "worst": st.column_config.TextColumn("Worst here")},
        )
    else:
        st.caption("No document has values from two configurations or more yet.")
    st.markdown("**Open a document in Compare**")
    names = view.document_names()
    with st.container(horizontal=True, vertical_alignment="bottom"):
        name = st.selectbox("Document", names, key=CORPUS("open_doc"),
                            index=names.index(found[0]["doc"]) if found and found[0]["doc"] in names else 0,
                            help="Loads it as the current document, with this run's configurations")
        st.button("Open in Compare", key=CORPUS("open"), icon=":material/compare:",
                  on_click=_open_in_compare, args=(view, name))
    error = st.session_state.pop(CORPUS("open_error"), None)
    if error:
        st.error(error, icon=":material/error:")
    if st.session_state.pop(CORPUS("go_compare"), False):
        st.switch_page("pages/compare.py")
    if view.results.skipped or view.errors:
        with st.expander(f"Skipped files ({len(view.results.skipped)}) and configuration errors ({len(view.errors)})"):
            if view.results.skipped:
                st.dataframe(pd.DataFrame(list(view.results.skipped)), key=CORPUS("skipped"), hide_index=True,
                             column_config={"doc": "File", "error": "Why it was skipped"})
            if view.errors:
                st.dataframe(pd.DataFrame(list(view.errors)), key=CORPUS("errors"), hide_index=True)


def finished_view(job: Job) -> CorpusView | None:
    """The view of a job's output folder (after it ended, however it ended); None with a one-line error."""
    try:
        return corpus_view(job.meta["out"], job.meta["configs"])
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return None


def corpus_summary_section() -> None:
    """The Summary page's section on the session's last corpus run: its verdict and report (nothing without one)."""
    job = st.session_state.get(CORPUS_JOB)
    if job is None or job.running:
        if job is not None:
            st.subheader("Corpus run", anchor=False)
            st.caption("A corpus run is in progress on the Corpus page; its verdict shows here once it ends.")
        return
    st.subheader("Corpus run", anchor=False)
    view = finished_view(job)
    if view is None:
        return
    st.caption(md_text(view.caption()))
    st.markdown("\n".join(f"- {md_text(line)}" for line in view.verdict) or "No document has rows yet.")
    st.download_button(
        "Download the corpus report (HTML)", lambda: corpus_report_html(view.results), file_name="corpus_report.html",
        mime="text/html", key=SUMMARY("corpus_report"), icon=":material/download:", on_click="ignore",
        help="The Corpus page's report: verdict, table per configuration, distributions, disagreements",
    )
