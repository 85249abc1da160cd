"""The Tune page's backend: a request checked in one line, planned as the job the CLI runs too."""

from __future__ import annotations

import pytest

from backend.errors import InputError, ParameterError
from backend.lab.models import SessionModels
from backend.lab.tune import TuneRequest, check_request, plan_tune, session_available
from backend.progress import Progress
from backend.tune.result import read_result
from backend.tune.types import TuneResult


def _request(tmp_path, **changes):
    fields = dict(sources=("sample:narrative",), questions="sample:narrative", out=str(tmp_path / "out"),
                  families=("recursive", "recursive"), trials=2)
    fields.update(changes)
    return TuneRequest(**fields)


def test_a_request_is_normalised(tmp_path):
    checked = check_request(_request(tmp_path, objective="IoU", baseline="recursive chunk_size=256"))
    assert checked.families == ("recursive",) and checked.objective == "iou"
    assert checked.baseline == "recursive chunk_overlap=0 chunk_size=256"  # the chunker's own spec
    assert check_request(_request(tmp_path)).baseline_spec == "recursive chunk_size=200 chunk_overlap=0"


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"sources": ()}, ParameterError, "choose a document"),
        ({"sources": ("/no/such/file.txt",)}, InputError, "no such file or folder"),
        ({"families": ("manual",)}, ParameterError, "manual cannot be tuned"),
        ({"engine": "spark"}, ParameterError, "engine 'spark' is not available for tuning"),
        ({"engine": "ray"}, ParameterError, "a single document tunes with --engine local"),
        ({"workers": 2}, ParameterError, "--workers sets the Ray tasks run at once: it needs --engine ray"),
        ({"address": "10.0.0.1:6379"}, ParameterError, "--address joins a Ray cluster: it needs --engine ray"),
        ({"trials": 0}, ParameterError, "trials (0) must be at least 1"),
        ({"out": " "}, ParameterError, "output folder"),
        ({"baseline": "recursive chunk_size=100 chunk_overlap=300"}, ParameterError, "chunk_overlap"),
        ({"questions": "sample:narrative", "corpora": "x"}, ParameterError, "--corpora is not used"),
        ({"questions_per_document": 0}, ParameterError, "questions per document (0) must be between 1 and 200"),
        ({"questions_per_document": 201}, ParameterError, "questions per document (201) must be between 1 and 200"),
        ({"questions_per_document": 2.5}, ParameterError, "questions per document (2.5) must be a whole number"),
        ({"questions_per_document": "many"}, ParameterError, "must be a whole number"),
    ],
)
def test_a_bad_request_is_one_line(tmp_path, changes, error, message):
    with pytest.raises(error) as e:
        check_request(_request(tmp_path, **changes))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_plan_is_signed_by_its_request_and_runs_the_tuner(tmp_path):
    plan = plan_tune(_request(tmp_path), None)
    assert plan.signature == plan_tune(_request(tmp_path), None).signature
    assert plan.signature != plan_tune(_request(tmp_path, seed=1), None).signature
    assert not plan.needs_lm and plan.meta["out"] == str(tmp_path / "out")
    result = plan.run(Progress())
    assert isinstance(result, TuneResult) and len(result.trials) == 2
    assert read_result(tmp_path / "out").to_json() == result.to_json()


def test_the_session_allows_the_language_model_only_when_its_models_loaded():
    assert session_available(None) == {"embedder"}
    assert session_available(SessionModels("SmolLM2", "abc")) == {"lm", "embedder"}
    assert session_available(SessionModels("SmolLM2", None, error="the model failed to load")) == {"embedder"}


def test_the_count_of_generated_questions_is_checked_and_kept(tmp_path):
    checked = check_request(_request(tmp_path, questions="generate:model-free", questions_per_document="40"))
    assert checked.questions_per_document == 40
    assert check_request(_request(tmp_path)).questions_per_document == 15
