"""The Tune page's widgets: the live trials of a running tuning job, the answer of a finished one, "Use this".

Everything shown is computed in :mod:`backend.lab.tune_view` (the view of a run's output folder) and
:mod:`backend.report.tuning` (the sentences, the report section); these functions only draw it. The
session's tuning result (:data:`components.keys.TUNE_RESULT`) is what the Summary shows and a saved
session keeps.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from backend.chunking import ChunkerConfig
from backend.errors import ChunkLabError, one_line
from backend.figures.markdown import md_text
from backend.figures.tune import PARETO_AXES
from backend.jobs import Job
from backend.lab.tune_view import TuneView, tune_view
from backend.report.tuning import rests_on, tuning_lines
from backend.tune.types import TuneProgress
from components.keys import TUNE, TUNE_JOB, TUNE_RESULT
from components.pipeline import pipeline_panel, snippet_models
from components.state import add_configuration

__all__ = ["live_panel", "result_panel", "trials_panel", "tune_summary_section", "use_pick"]

_PLOT = {"displaylogo": False}
_NUMBER = st.column_config.NumberColumn
_GO_COMPARE = TUNE("go_compare")
_USED = TUNE("used")  # the pick's spec last added to Compare (the page says it was added)


def _pareto(view: TuneView, key: str) -> None:
    axis = st.segmented_control("Pareto front against", list(PARETO_AXES), default="mean_tokens", required=True,
                                key=TUNE(f"{key}_axis"), format_func=PARETO_AXES.get,
                                help="Each point a trial (complete: full colour, pruned: faint); the dotted step "
                                     "line joins the trials no other beats at lower cost.")
    st.plotly_chart(view.pareto(axis), key=TUNE(f"{key}_pareto"), config=_PLOT)


def _left_out(view: TuneView) -> None:
    """The families the plan left out, each with why and what would include it (plain words)."""
    left = view.left_out_sentences()
    if left:
        with st.expander(f"Families not searched ({len(left)})"):
            st.markdown("\n".join(f"- {md_text(line)}" for line in left))


def _table(view: TuneView, key: str) -> None:
    frame = view.trial_table()
    if frame.empty:
        st.caption("No trial has ended yet.")
        return
    unit = "%" if view.objective != "bc" else ""
    st.dataframe(
        frame, key=TUNE(f"{key}_table"), hide_index=True,
        column_order=("number", "configuration", "state", "objective", "interval", "questions", "chunks",
                      "mean_tokens", "index_cost", "seconds", "reason"),
        column_config={
            "number": _NUMBER("#"), "configuration": st.column_config.TextColumn("Configuration", width="medium"),
            "state": st.column_config.TextColumn("State"),
            "objective": _NUMBER(f"Objective{' (%)' if unit else ''}", format="%.3g",
                                 help="The mean on the tuning questions it was scored on"),
            "interval": st.column_config.TextColumn("Interval", help="Its 95% interval over those questions"),
            "questions": _NUMBER("Questions"), "chunks": _NUMBER("Chunks"),
            "mean_tokens": _NUMBER("Mean tokens", format="%.1f"), "index_cost": _NUMBER("Index cost"),
            "seconds": _NUMBER("Seconds", format="%.2f"),
            "reason": st.column_config.TextColumn("Why pruned or failed"),
        },
    )


def trials_panel(view: TuneView, key: str, *, caption: bool = True) -> None:
    """The trials so far: what they rest on (unless ``caption`` is False: said above), the budget used and left,
    the Pareto front, the θ curves, the table."""
    if caption:
        st.caption(md_text(view.caption()))
    st.caption(md_text(view.budget_line()))
    if view.result is None:  # the answer's panel lists them itself
        _left_out(view)
    budget = view.budget()
    if budget is not None:
        st.plotly_chart(budget, key=TUNE(f"{key}_budget"), config=_PLOT)
    _pareto(view, key)
    theta = view.theta()
    if theta is not None:
        st.markdown("**θ against the objective (PPL families)**")
        st.plotly_chart(theta, key=TUNE(f"{key}_theta"), config=_PLOT)
    _table(view, key)


@st.fragment(run_every=2.0)
def live_panel(job_key: str) -> None:
    """Under a running tuning job's bar: its trials so far, read from its output folder every two seconds."""
    job: Job | None = st.session_state.get(job_key)
    if job is None or not job.running:
        return
    # The budget's own count when the run has published it (its clock starts after the questions are made).
    used = job.partial.used_seconds if isinstance(job.partial, TuneProgress) else time.perf_counter() - job.started
    try:
        view = tune_view(job.meta["out"], elapsed=used)
    except ChunkLabError as e:
        st.caption(one_line(str(e)))
        return
    trials_panel(view, "live")


def use_pick(config: ChunkerConfig) -> None:
    """A button's callback: add ``config`` to Compare's configurations, then go to Compare."""
    add_configuration(config)
    st.session_state[_USED] = config.spec
    st.session_state[_GO_COMPARE] = True


def result_panel(view: TuneView) -> None:
    """A finished (or cancelled) run's answer: verdict, pick with its interval, "Use this" and "Use in your
    pipeline", comparisons, tie, warnings, left-out families, then its trials."""
    result = view.result
    if result is None:
        trials_panel(view, "done")
        return
    st.session_state[TUNE_RESULT] = result
    st.caption(md_text(view.caption()))
    if result.beats_baseline:
        st.success(md_text(view.verdict), icon=":material/check_circle:")
    else:
        st.warning(md_text(view.verdict), icon=":material/balance:")
    st.markdown(md_text(view.pick_line()))
    if view.pick is not None:
        with st.container(horizontal=True, vertical_alignment="center"):
            st.button("Use this", key=TUNE("use"), type="primary", icon=":material/add:", on_click=use_pick,
                      args=(view.pick,), help="Adds the pick to the Compare page's configurations and opens it")
            st.page_link("pages/compare.py", label="Open Compare", icon=":material/compare:")
        lm, embedder = snippet_models(view.pick)
        doc_name = result.documents[0] if len(result.documents) == 1 else "document.pdf"
        pipeline_panel(view.pick, None, doc_name, TUNE("pipe"), tag="pick", lm=lm, embedder=embedder)
    if st.session_state.pop(_GO_COMPARE, False):
        st.switch_page("pages/compare.py")
    rows = view.comparisons()
    if rows:
        st.markdown("**The pick against the runner-up and the baseline** (paired, on the held-out questions)")
        st.dataframe(pd.DataFrame(rows), key=TUNE("comparisons"), hide_index=True, column_config={
            "against": "Against", "configuration": "Configuration", "score": "Its held-out score",
            "difference": "Pick minus it (95% interval)", "verdict": "Verdict",
        })
    tie = view.tied_line()
    if tie:
        st.markdown(md_text(tie))
    for warning in view.warnings:
        st.warning(md_text(warning), icon=":material/warning:")
    _left_out(view)
    st.subheader("Trials", anchor=False)
    trials_panel(view, "done", caption=False)


def tune_summary_section() -> None:
    """The Summary page's Tuning section: the session's tuning answer, what it rests on (nothing without one)."""
    job: Job | None = st.session_state.get(TUNE_JOB)
    result = st.session_state.get(TUNE_RESULT)
    if result is None:
        if job is not None and job.running:
            st.subheader("Tuning", anchor=False)
            st.caption("A tuning run is in progress on the Tune page; its answer shows here once it ends.")
        return
    st.subheader("Tuning", anchor=False)
    st.caption(md_text(rests_on(result)))
    st.markdown("\n".join(f"- {md_text(line)}" for line in tuning_lines(result)))
    st.page_link("pages/tune.py", label="Open the Tune page", icon=":material/tune:")
