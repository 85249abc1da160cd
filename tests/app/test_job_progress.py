"""The job progress widget (``components.models.job_progress``) says when a job waits for another run's model."""

from __future__ import annotations

import threading
import time

from streamlit.testing.v1 import AppTest

from backend.jobs import start_job
from backend.progress import QUEUED, acquired


def _script() -> None:
    from components.models import job_progress

    job_progress("job", "cancel")


def _until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def _bar_text(at: AppTest) -> str:
    (bar,) = at.get("progress")
    return bar.proto.text


def test_the_bar_says_queued_while_another_run_holds_the_model_then_counts() -> None:
    model_lock, counted, finish = threading.Lock(), threading.Event(), threading.Event()

    def work(progress):
        with acquired(model_lock, progress):  # as the scorer does around its forward passes
            progress.set_unit("tokens")
            progress(0, 4152)
            progress(1234, 4152)
            counted.set()
            finish.wait(10)
        return "scored"

    model_lock.acquire()  # another session's run has the model
    held = True
    job = start_job("Scoring", work)
    try:
        _until(lambda: job.label == QUEUED)
        at = AppTest.from_function(_script, default_timeout=30)
        at.session_state["job"] = job
        at.run()
        assert not at.exception
        assert _bar_text(at).startswith(f"Scoring: {QUEUED} · ")
        model_lock.release()
        held = False
        assert counted.wait(10)
        at.run()
        assert _bar_text(at).startswith("Scoring: 1,234 / 4,152 tokens · ETA ")
    finally:
        finish.set()
        if held:
            model_lock.release()
    assert job.wait(10) and job.result == "scored"


def _sidebar_then_a_job() -> None:
    import streamlit as st

    from components.models import job_progress, sidebar_models

    sidebar_models()
    start = st.session_state.pop("start", None)
    if start is not None:  # as a page's run button does: the job starts after the sidebar is drawn
        st.session_state["job"] = start()
    job_progress("job", "cancel")


def test_the_sidebar_says_the_language_model_is_in_use_while_a_job_runs_it() -> None:
    from backend.lab.jobs import JobPlan
    from backend.lab.models import SessionModels
    from components.keys import LM_INFO
    from tests.support.quality import LengthScorer

    scorer = LengthScorer()
    running, release = threading.Event(), threading.Event()

    def body(_scorer, progress):
        progress.set_unit("pairs")
        progress(1, 4)
        running.set()
        release.wait(10)
        return "scored"

    def start():
        job = JobPlan("Scoring", ("sig",), body, models=SessionModels.of(scorer)).start()
        assert running.wait(10)
        return job

    at = AppTest.from_function(_sidebar_then_a_job, default_timeout=30)
    at.session_state[LM_INFO] = scorer.info  # the session's language model
    at.run()
    assert "LM: length-scorer" in [t.value for t in at.text]
    at.session_state["start"] = start
    try:
        at.run()  # the sidebar drawn before the job started is redrawn by the job's progress, not left stale
        assert not at.exception
        assert "LM: length-scorer · in use by a job" in [t.value for t in at.text]
        job = at.session_state["job"]
    finally:
        release.set()
    assert job.wait(10)
    del at.session_state["job"]  # a page folds an ended job and drops it (job_progress would redraw the page)
    at.run()
    assert "LM: length-scorer" in [t.value for t in at.text]
