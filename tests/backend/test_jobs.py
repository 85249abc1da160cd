"""Background jobs (``backend.jobs``): result, one-line failure, cancel, the progress of a part."""

from __future__ import annotations

import threading

from backend.errors import ModelError
from backend.jobs import Job, start_job


def test_a_job_returns_its_result_and_meta():
    job = start_job("adding", lambda progress: (progress(1, 2), 1 + 1)[1], doc_id="d1")
    assert job.wait(10)
    assert (job.state, job.result, job.error, job.meta, job.fraction) == ("done", 2, None, {"doc_id": "d1"}, 0.5)


def test_a_failed_job_keeps_a_one_line_message():
    def fails(progress):
        raise ModelError("the model\ncannot load")

    def crashes(progress):
        raise KeyError("x")

    jobs = [start_job("failing", fails), start_job("crashing", crashes)]
    assert all(j.wait(10) for j in jobs)
    assert [(j.state, j.error, j.result) for j in jobs] == [
        ("failed", "the model cannot load", None),
        ("failed", "KeyError: 'x'", None),
    ]


def test_cancel_stops_the_job_at_its_next_progress_report():
    started, release = threading.Event(), threading.Event()

    def work(progress):
        started.set()
        release.wait(10)
        progress(1, 2)  # raises Cancelled here
        return "not reached"

    job = start_job("waiting", work)
    started.wait(10)
    job.cancel()
    release.set()
    assert job.wait(10)
    assert (job.state, job.result, job.error) == ("cancelled", None, None)


def test_a_finished_job_can_be_built_without_a_thread():
    job = Job("from the cache", {"signature": 1}, state="done", fraction=1.0, result=[1])
    assert job.wait() and not job.running


def test_a_part_of_the_jobs_progress_moves_its_share_of_the_bar():
    def work(progress):
        part = progress.part(1, 4, "configuration")
        part.set_unit("pairs")
        part(5, 10)
        return "done"

    job = start_job("parts", work)
    assert job.wait(10)
    assert (job.fraction, job.label) == (0.375, "configuration 2 of 4 · 5 / 10 pairs")
