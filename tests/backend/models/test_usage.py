"""What the pages say of the language model a job loads and uses in its own thread (backend/models/usage.py)."""

from __future__ import annotations

import threading

import pytest

from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.models import usage
from backend.models.types import ModelInfo
from backend.models.usage import lm_status, model_use, model_uses
from tests.support.quality import LengthScorer

SMOL = ModelInfo("SmolLM2", "bundled", "lm", 135_000_000, "cpu", "float32", "fp-smol")


@pytest.fixture
def nothing_loaded(monkeypatch):
    """No language model loaded in this process (whatever other tests loaded)."""
    monkeypatch.setattr(usage, "loaded_lm", lambda _spec=None: None)


@pytest.mark.usefixtures("nothing_loaded")
def test_a_job_loading_then_using_the_default_is_said_not_not_loaded():
    assert lm_status(None).line == "LM: not loaded"
    with model_use("SmolLM2", None, default=True, loading=True) as use:
        assert lm_status(None).line == "LM: SmolLM2 (default) · loading for a job"
        use.loaded(SMOL)
        assert lm_status(None).line == "LM: SmolLM2 (default) · in use by a job"
        other = ModelInfo("other", "x", "lm", 0, "cpu", "float32", "fp-other")
        assert lm_status(other).line == "LM: other"  # a session that chose another model: not its model
        with model_use("other", "fp-other", default=False, loading=False):
            assert lm_status(other).line == "LM: other · in use by a job"
            assert lm_status(None).line == "LM: SmolLM2 (default) · in use by a job"
    assert model_uses() == () and lm_status(None).line == "LM: not loaded"


def test_a_job_plan_holds_its_use_while_it_runs_and_ends_it_however_it_ends():
    scorer = LengthScorer()
    running, release = threading.Event(), threading.Event()

    def body(_scorer, _progress):
        running.set()
        if not release.wait(10):
            raise TimeoutError("not released")
        return "scored"

    job = JobPlan("Scoring", ("sig",), body, models=SessionModels.of(scorer)).start()
    assert running.wait(10)
    assert lm_status(scorer.info).line == "LM: length-scorer · in use by a job"
    release.set()
    assert job.wait(10) and job.result == "scored"
    assert lm_status(scorer.info).line == "LM: length-scorer"

    def failing(_scorer, _progress):
        raise ValueError("broken")

    failed = JobPlan("Scoring", ("sig",), failing, models=SessionModels.of(scorer)).start()
    assert failed.wait(10) and failed.state == "failed"
    assert model_uses() == ()


def test_is_loaded_never_waits_for_a_model_being_loaded():
    from backend.models import lm

    answers: list = []
    with lm._load_lock:  # a job's thread is loading a model (the lock is held for the whole load)
        asking = threading.Thread(target=lambda: answers.append(lm.loaded_lm(None)))
        asking.start()
        asking.join(5)
        assert not asking.is_alive()
    assert len(answers) == 1
