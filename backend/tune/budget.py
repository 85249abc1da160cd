"""A tuning run's wall-clock budget and the seconds per trial it measures as it goes.

The budget is checked before each trial: a trial starts only when what it is expected to cost
fits in what is left, so ``used_seconds`` never passes the budget by more than one trial's
misestimate (and a scripted clock in the tests proves it stays within). The expected cost of a
family's trial is its measured mean (the first trial of a family measures it); before any
trial of a family ran, the mean of the others stands in. A model-backed family is planned only
when one trial of it, at a rate measured on this machine, fits the whole budget
(:func:`model_trial_seconds`); otherwise it is left out with that estimate in words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from backend.progress import format_seconds
from backend.tune.types import LeftOut

__all__ = ["Budget", "model_trial_seconds", "model_left_out_reason", "plan_model_families"]


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

    def expected(self, families: tuple[str, ...] | list[str]) -> float:
        """What the next trial is expected to cost: the dearest mean of the families it may pick (0 before any)."""
        rates = self.rates()
        if not rates:
            return 0.0
        stand_in = sum(rates.values()) / len(rates)
        return max(rates.get(f, stand_in) for f in families) if families else stand_in

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


def plan_model_families(families: Sequence[str], needs: Callable[[str], Sequence[str]], tokens: int,
                        tokens_per_s: float | None, left: float) -> tuple[tuple[str, ...], tuple[LeftOut, ...]]:
    """Keep the families that need no language model, and those whose first trial fits ``left`` seconds.

    A family that needs the language model (``"lm" in needs(family)``) costs one scoring pass over
    ``tokens`` on its first trial (the scores are cached after it: the next θ costs milliseconds). At
    ``tokens_per_s`` measured on this machine it is kept only when that pass fits what is left;
    without a measured rate it is kept (its first trial measures it).
    """
    kept: list[str] = []
    out: list[LeftOut] = []
    seconds = model_trial_seconds(tokens, tokens_per_s)
    for f in families:
        if "lm" in needs(f) and seconds is not None and tokens_per_s and seconds > left:
            out.append(LeftOut(f, model_left_out_reason(seconds, tokens_per_s, left)))
        else:
            kept.append(f)
    return tuple(kept), tuple(out)
