"""A tuning run's wall-clock budget and the seconds per trial it measures as it goes.

The budget is checked around each trial: the search stops when not even the cheapest family's
trial fits in what is left, and a trial whose family is expected to cost more than is left is
skipped unscored, so ``used_seconds`` never passes the budget by more than one trial's
misestimate (and a scripted clock in the tests proves it stays within). The expected cost of a
family's trial is its measured mean (the first trial of a family measures it); before that, a
model-backed family's planned estimate, else the mean of the families measured. A model-backed
family is planned only when its first trial, at a rate measured on this machine, fits the budget
(:func:`plan_model_families`); otherwise it is left out with that estimate in words.

A ``bc`` run scores every trial's boundaries with the language model (:func:`plan_bc`): each trial
scores a seeded sample of at most :attr:`BcPlan.boundaries` boundaries, as many as fit a share of
the budget (:data:`BC_TRIALS` trials) at the rate measured here; its expected cost is every
family's prior, and the plan says when the budget affords only a few trials.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from backend.progress import format_seconds
from backend.tune.types import LeftOut

__all__ = ["BC_BOUNDARIES", "BC_MIN_BOUNDARIES", "BC_TRIALS", "PASS_FAMILIES", "BcPlan", "Budget", "plan_bc", "FamilyPlan", "model_trial_seconds", "model_left_out_reason",
           "plan_model_families"]


@dataclass
class Budget:
    """Seconds allowed, seconds used (from ``clock``), and each family's measured seconds per trial.

    Args:
        seconds: The budget.
        clock: Monotonic seconds (a test scripts it).
        already_used: Seconds an earlier, interrupted run of the same study spent (a resume counts them).
    """

    seconds: float
    clock: Callable[[], float] = time.monotonic
    already_used: float = 0.0
    priors: dict[str, float] = field(default_factory=dict)
    _start: float | None = None
    _per_family: dict[str, list[float]] = field(default_factory=dict)

    def start(self) -> None:
        """Start counting (the run's planning counts too)."""
        self._start = self.clock()

    @property
    def used(self) -> float:
        """Seconds used so far (an earlier run's included)."""
        if self._start is None:
            return self.already_used
        return self.already_used + max(0.0, self.clock() - self._start)

    @property
    def left(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.seconds - self.used)

    def record(self, family: str, seconds: float) -> None:
        """A trial of ``family`` took ``seconds``."""
        self._per_family.setdefault(family, []).append(float(seconds))

    def rate(self, family: str) -> float | None:
        """``family``'s mean seconds per trial so far (None: none measured)."""
        values = self._per_family.get(family)
        return sum(values) / len(values) if values else None

    def rates(self) -> dict[str, float]:
        """Every measured family's mean seconds per trial."""
        return {f: sum(v) / len(v) for f, v in self._per_family.items() if v}

    def expected(self, family: str) -> float:
        """What the next trial of ``family`` is expected to cost: its measured mean; before any, the estimate
        it was planned with (a model-backed family), else the mean of the families measured (0 before any)."""
        measured = self.rate(family)
        if measured is not None:
            return measured
        if family in self.priors:
            return self.priors[family]
        rates = self.rates()
        return sum(rates.values()) / len(rates) if rates else 0.0

    def cheapest(self, families: Sequence[str]) -> float:
        """The least a next trial can cost: the cheapest family's :meth:`expected` (0 without families)."""
        return min((self.expected(f) for f in families), default=0.0)

    def fits(self, expected: float) -> bool:
        """Whether a trial expected to cost ``expected`` seconds fits in what is left."""
        return expected <= self.left and self.left > 0


def model_trial_seconds(tokens: int, tokens_per_s: float | None) -> float | None:
    """One trial of a model-backed family: a scoring pass over ``tokens`` at the rate measured here (None: no rate)."""
    if not tokens_per_s or tokens_per_s <= 0:
        return None
    return tokens / tokens_per_s


def model_left_out_reason(seconds: float, tokens_per_s: float, left: float) -> str:
    """``"one trial needs about 3 min at 410 tokens/s measured here; the budget left is 1 min"`` (the family is
    the :class:`~backend.tune.types.LeftOut`'s own field: ``ppl: one trial needs …`` as shown)."""
    return (f"one trial needs {format_seconds(seconds)} at {tokens_per_s:,.0f} tokens/s measured here; "
            f"the budget left is {format_seconds(left)}")


PASS_FAMILIES = ("ppl", "ppl_overlap", "ppl_combined")  # a first trial is one scoring pass, then cached cuts


@dataclass(frozen=True)
class FamilyPlan:
    """Which families a run searches, those left out by their cost, and the first-trial estimates it planned with."""

    kept: tuple[str, ...]
    left_out: tuple[LeftOut, ...]
    priors: dict[str, float]  # family -> estimated seconds of its first trial (model-backed families)


def plan_model_families(families: Sequence[str], needs: Callable[[str], Sequence[str]], tokens: int,
                        tokens_per_s: float | None, left: float, *, named: bool = False) -> FamilyPlan:
    """Keep the families that need no language model, and the model-backed ones whose first trial fits ``left``.

    A PPL family (:data:`PASS_FAMILIES`) costs one scoring pass over ``tokens`` on its first trial
    (the scores are cached after it: the next θ costs milliseconds); at ``tokens_per_s`` measured
    on this machine it is kept only when that pass fits what is left. Another family that needs
    the language model (margin sampling: a model call per sentence, every trial) has no estimate
    here, nor has a PPL family before a rate was measured: it is left out, unless the user
    ``named`` the families (then its first trial measures it).
    """
    kept: list[str] = []
    out: list[LeftOut] = []
    priors: dict[str, float] = {}
    seconds = model_trial_seconds(tokens, tokens_per_s)
    for f in families:
        if "lm" not in needs(f):
            kept.append(f)
        elif f in PASS_FAMILIES and seconds is not None and tokens_per_s:
            if seconds > left:
                out.append(LeftOut(f, model_left_out_reason(seconds, tokens_per_s, left)))
            else:
                kept.append(f)
                priors[f] = seconds
        elif named:
            kept.append(f)
        else:
            what = ("the language model's scoring rate is not measured on this machine yet" if f in PASS_FAMILIES
                    else "its cost (a language-model call per sentence, every trial) has no measured estimate here")
            out.append(LeftOut(f, f"{what}; name it in the families to try it anyway"))
    return FamilyPlan(tuple(kept), tuple(out), priors)


BC_BOUNDARIES = 60  # boundaries per trial at most (and without a measured rate): BC's interval about ±0.01
BC_MIN_BOUNDARIES = 8  # fewer and the interval over boundaries says little
BC_TRIALS = 12  # the trials a bc run plans its sample size for
BC_TOKENS_PER_BOUNDARY = 3  # chunk tokens scored per boundary: the next chunk alone, then after the previous one
FEW_TRIALS = 4  # a budget affording fewer bc trials than this: the plan says so


@dataclass(frozen=True)
class BcPlan:
    """How a ``bc`` run spends the language model: boundaries per trial, the expected seconds of one trial.

    Attributes:
        boundaries: Boundaries scored per trial (a seeded sample per corpus; every one when the chunking has fewer).
        trial_seconds: Expected seconds of a trial's scoring at the measured rate (None: no rate measured).
        tokens_per_s: The measured rate (None: not measured on this machine).
        note: What the plan says (one line; "" when the budget affords enough trials).
    """

    boundaries: int
    trial_seconds: float | None
    tokens_per_s: float | None
    note: str = ""

    def to_json(self) -> dict[str, object]:
        """``{"boundaries", "trial_seconds", "tokens_per_s", "note"}`` (what ``plan.json``'s ``bc`` holds)."""
        return {"boundaries": self.boundaries, "trial_seconds": self.trial_seconds, "tokens_per_s": self.tokens_per_s,
                "note": self.note}


def plan_bc(chunk_tokens: float, tokens_per_s: float | None, left: float) -> BcPlan:
    """Boundaries per ``bc`` trial so that about :data:`BC_TRIALS` trials fit ``left`` seconds at ``tokens_per_s``.

    One boundary costs about :data:`BC_TOKENS_PER_BOUNDARY` × ``chunk_tokens`` model tokens (the
    baseline's chunk size stands for a trial's). The sample is at most :data:`BC_BOUNDARIES` and at
    least :data:`BC_MIN_BOUNDARIES`; without a measured rate it is :data:`BC_BOUNDARIES` and the first
    trial measures the cost. Cached boundaries (a rerun, a repeated configuration) cost nothing.
    """
    per_boundary = BC_TOKENS_PER_BOUNDARY * max(1.0, float(chunk_tokens))
    if not tokens_per_s or tokens_per_s <= 0:
        return BcPlan(BC_BOUNDARIES, None, None,
                      "the language model's scoring rate is not measured here: the first trial measures a bc trial's cost")
    fit = int(left / BC_TRIALS * tokens_per_s / per_boundary)
    n = max(BC_MIN_BOUNDARIES, min(BC_BOUNDARIES, fit))
    seconds = n * per_boundary / tokens_per_s
    affords = int(left // seconds) if seconds > 0 else BC_TRIALS
    note = ""
    if affords < FEW_TRIALS:
        note = (f"the budget affords only about {affords} bc trial{'s' if affords != 1 else ''} "
                f"({n} boundaries each, about {format_seconds(seconds)} at {tokens_per_s:,.0f} tokens/s measured here)")
    return BcPlan(n, seconds, float(tokens_per_s), note)
