"""The interval pruner on real Optuna trials: pruned only when the subset tells a trial apart, below the incumbent."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from backend.tune.pruner import STEP, SUBSET_ATTR, IntervalPruner, incumbent


def _study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize", pruner=IntervalPruner(),
                               sampler=optuna.samplers.RandomSampler(seed=0))


def _reported(study: optuna.Study, mean: float, low: float, high: float) -> optuna.Trial:
    trial = study.ask()
    trial.set_user_attr(SUBSET_ATTR, [mean, low, high])
    trial.report(mean, STEP)
    return trial


def test_the_first_trial_is_never_pruned_and_becomes_the_incumbent():
    study = _study()
    first = _reported(study, 0.10, 0.05, 0.15)
    assert not first.should_prune()  # no incumbent yet
    study.tell(first, 0.12)
    assert incumbent(study).number == first.number


def test_a_trial_wholly_below_the_incumbents_interval_is_pruned_an_overlapping_one_goes_on():
    study = _study()
    best = _reported(study, 0.30, 0.25, 0.35)
    study.tell(best, 0.31)
    weaker = _reported(study, 0.20, 0.10, 0.26)  # overlaps [0.25, 0.35]: not told apart
    assert not weaker.should_prune()
    study.tell(weaker, 0.20)
    clearly_worse = _reported(study, 0.10, 0.05, 0.24)  # its upper end under the incumbent's lower end
    assert clearly_worse.should_prune()
    frozen = study.get_trials(deepcopy=False)[clearly_worse.number]
    assert IntervalPruner().reason(study, frozen) == (
        "below trial 0 on the first third of the tuning questions: [5.0%, 24.0%] against [25.0%, 35.0%]")
    study.tell(clearly_worse, state=TrialState.PRUNED)
    # The incumbent is the best complete trial by its value on all the tuning questions.
    better = _reported(study, 0.50, 0.45, 0.55)
    assert not better.should_prune()
    study.tell(better, 0.52)
    assert incumbent(study).number == better.number
    assert _reported(study, 0.32, 0.26, 0.40).should_prune()  # now below the new incumbent's [0.45, 0.55]


def test_a_trial_that_reported_nothing_is_not_pruned():
    study = _study()
    best = _reported(study, 0.30, 0.25, 0.35)
    study.tell(best, 0.31)
    assert not study.ask().should_prune()
