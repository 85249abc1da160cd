"""Cheap before dear: a trial is first scored on a seeded third of the tuning questions, then on the rest.

:class:`IntervalPruner` is an Optuna pruner (:class:`optuna.pruners.BasePruner`). A trial reports
its mean objective on the subset at step 0 (:data:`STEP`) and keeps the subset's interval in its
user attributes (:data:`SUBSET_ATTR`: ``[mean, low, high]``). It is pruned when that interval's
upper end is below the incumbent's lower end on the same subset: the incumbent being the complete
trial with the best mean on all the tuning questions so far. That is successive halving's rule
(drop what is already clearly worse on a cheap share of the work) through Optuna's pruner
interface, with the intervals doing what rung sizes do there: a trial is dropped only when the
subset already tells it apart. Survivors are scored on the rest of the tuning questions.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

__all__ = ["STEP", "SUBSET_ATTR", "IntervalPruner", "subset_interval", "incumbent"]

STEP = 0  # the step a trial reports its subset mean at
SUBSET_ATTR = "subset_interval"  # user attribute: [mean, low, high] on the subset


def subset_interval(trial: FrozenTrial) -> tuple[float, float, float] | None:
    """A trial's ``(mean, low, high)`` on the subset (None: it reported none)."""
    raw: Any = trial.user_attrs.get(SUBSET_ATTR)
    if not raw or len(raw) != 3:
        return None
    return float(raw[0]), float(raw[1]), float(raw[2])


def incumbent(study: optuna.Study, exclude: int | None = None) -> FrozenTrial | None:
    """The complete trial with the highest value that reported a subset interval (None: none yet)."""
    best: FrozenTrial | None = None
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.number == exclude or t.value is None or subset_interval(t) is None:
            continue
        if best is None or t.value > best.value:  # type: ignore[operator]
            best = t
    return best


class IntervalPruner(optuna.pruners.BasePruner):
    """Prune a trial whose subset interval lies wholly below the incumbent's (see the module docstring)."""

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        """Whether ``trial`` (which reported at :data:`STEP`) is told apart from, and below, the incumbent."""
        if STEP not in trial.intermediate_values:
            return False
        mine = subset_interval(trial)
        best = incumbent(study, exclude=trial.number)
        if mine is None or best is None:
            return False
        theirs = subset_interval(best)
        return theirs is not None and mine[2] < theirs[1]

    def reason(self, study: optuna.Study, trial: FrozenTrial) -> str:
        """Why :meth:`prune` dropped ``trial``, one line (the two intervals, in percent)."""
        mine, best = subset_interval(trial), incumbent(study, exclude=trial.number)
        if mine is None or best is None:
            return ""
        theirs = subset_interval(best)
        if theirs is None:
            return ""
        return (f"below trial {best.number} on the first third of the tuning questions: "
                f"[{mine[1]:.1%}, {mine[2]:.1%}] against [{theirs[1]:.1%}, {theirs[2]:.1%}]")
