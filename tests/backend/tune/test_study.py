"""The study in a journal file: named by the request, reopened by the same request, a killed trial retried."""

from __future__ import annotations

from optuna.trial import TrialState

from backend.tune.study import BASELINE_ATTR, CONFIG_ATTR, open_study, recover, study_name


def test_the_name_is_a_digest_of_the_request():
    key = {"documents": ["abc"], "objective": "iou", "seed": 0, "families": ["recursive"]}
    assert study_name(key) == study_name(dict(reversed(list(key.items()))))
    assert study_name(key).startswith("tune-") and len(study_name(key)) == 21
    assert study_name({**key, "seed": 1}) != study_name(key)


def test_a_reopened_study_keeps_its_trials_and_retries_one_a_kill_left_running(tmp_path):
    study = open_study(tmp_path, "tune-x", seed=0, two_objectives=False)
    study.enqueue_trial({"x": 3}, user_attrs={BASELINE_ATTR: "space"})
    t0 = study.ask()
    assert t0.suggest_int("x", 0, 10) == 3 and t0.user_attrs[BASELINE_ATTR] == "space"
    study.tell(t0, 0.5)
    t1 = study.ask()
    x1 = t1.suggest_int("x", 0, 10)
    t1.set_user_attr(CONFIG_ATTR, f"spec {x1}")
    # t1 is left running, as a kill would leave it; the process is gone and the study reopened.
    again = open_study(tmp_path, "tune-x", seed=0, two_objectives=False)
    assert [t.state for t in again.trials] == [TrialState.COMPLETE, TrialState.RUNNING]
    assert recover(again) == [1]
    retry = again.ask()
    assert retry.number == 2 and retry.suggest_int("x", 0, 10) == x1 and retry.user_attrs[CONFIG_ATTR] == f"spec {x1}"
    assert again.trials[1].state == TrialState.FAIL and again.trials[0].value == 0.5


def test_two_objectives_use_nsga2_maximising_then_minimising(tmp_path):
    study = open_study(tmp_path, "tune-y", seed=0, two_objectives=True)
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    assert type(study.sampler).__name__ == "NSGAIISampler"
