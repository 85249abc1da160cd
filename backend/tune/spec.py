"""A tuning run's knobs as the user writes them: objective, second objective, constraints and budget.

The CLI and the Tune page pass the same strings (``--objective iou``, ``--constraint 'mean_tokens<=400'``,
``--budget 10m``) through these functions, so both refuse a bad value with the same one-line
:class:`~backend.errors.ParameterError`, naming the value.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from backend.chunking import duration_text
from backend.errors import ParameterError
from backend.tune.types import OBJECTIVES

__all__ = [
    "OBJECTIVES",
    "SECONDARY",
    "CONSTRAINT_METRICS",
    "OPERATORS",
    "MAX_BUDGET_S",
    "Constraint",
    "check_objective",
    "check_secondary",
    "parse_constraint",
    "parse_budget",
    "format_seconds",
]

# The second objectives (minimised) that make a run two-objective: chunk length, chunk count, tokens indexed.
SECONDARY = ("mean_tokens", "chunks", "index_cost")
# What a constraint may bound: a configuration's chunk statistics over the document(s).
CONSTRAINT_METRICS = ("mean_tokens", "max_tokens", "chunks", "index_cost")
# The comparisons a constraint may use, longest first so "<=" is not read as "<".
OPERATORS: Mapping[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9),
    "<": operator.lt,
    ">": operator.gt,
}
MAX_BUDGET_S = 24 * 3600.0  # a day: longer is a typo, not a plan

_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|<|>)\s*(\S+)\s*$")
_DURATION = re.compile(
    r"^(?:(?P<h>\d+(?:\.\d+)?)\s*h(?:ours?)?)?\s*"
    r"(?:(?P<m>\d+(?:\.\d+)?)\s*m(?:in(?:utes?)?)?)?\s*"
    r"(?:(?P<s>\d+(?:\.\d+)?)\s*s(?:ec(?:onds?)?)?)?$",
    re.IGNORECASE,
)


def check_objective(name: str) -> str:
    """``name`` if it is an objective a run maximises (:data:`OBJECTIVES`).

    Raises:
        ParameterError: ``unknown objective 'foo'; choose one of iou, recall, …``.
    """
    value = str(name).strip()
    if value not in OBJECTIVES:
        raise ParameterError(f"unknown objective {value!r}; choose one of {', '.join(OBJECTIVES)}")
    return value


def check_secondary(name: str | None) -> str | None:
    """``name`` if it is a second objective (:data:`SECONDARY`, minimised); None (or blank) for none.

    Raises:
        ParameterError: ``unknown secondary objective 'foo'; choose one of mean_tokens, chunks, index_cost``.
    """
    if name is None or not str(name).strip():
        return None
    value = str(name).strip()
    if value not in SECONDARY:
        raise ParameterError(f"unknown secondary objective {value!r}; choose one of {', '.join(SECONDARY)}")
    return value


@dataclass(frozen=True)
class Constraint:
    """A bound every recommended configuration must meet, e.g. ``mean_tokens<=400``.

    Attributes:
        metric: One of :data:`CONSTRAINT_METRICS`.
        op: One of :data:`OPERATORS` (``<=``, ``<``, ``>=``, ``>``, ``==``).
        value: The bound.
        text: The constraint as written back (``mean_tokens<=400``); :func:`parse_constraint` reads it again.
    """

    metric: str
    op: str
    value: float
    text: str

    def holds(self, stats: Mapping[str, float]) -> bool:
        """Whether ``stats[metric]`` meets the bound (a configuration's chunk statistics).

        Raises:
            KeyError: ``stats`` has no value for the metric.
        """
        return bool(OPERATORS[self.op](float(stats[self.metric]), self.value))


def parse_constraint(text: str) -> Constraint:
    """The :class:`Constraint` a string such as ``mean_tokens<=400`` or ``chunks >= 10`` states.

    Raises:
        ParameterError: (one line, naming the string) not ``METRIC OP NUMBER``, an unknown metric or a bad number.
    """
    raw = str(text)
    match = _CONSTRAINT.match(raw)
    if match is None:
        raise ParameterError(
            f"constraint {raw.strip()!r} is not METRIC OP NUMBER: use e.g. mean_tokens<=400 "
            f"(operators {', '.join(sorted(OPERATORS, key=len))})"
        )
    metric, op, number = match.groups()
    if metric not in CONSTRAINT_METRICS:
        raise ParameterError(
            f"unknown metric {metric!r} in constraint {raw.strip()!r}; choose one of {', '.join(CONSTRAINT_METRICS)}"
        )
    try:
        value = float(number)
    except ValueError as e:
        raise ParameterError(f"constraint {raw.strip()!r}: {number!r} is not a number") from e
    if not math.isfinite(value):
        raise ParameterError(f"constraint {raw.strip()!r}: {number!r} is not a finite number")
    return Constraint(metric, op, value, f"{metric}{op}{value:g}")


def parse_budget(text: str) -> float:
    """A run's time budget in seconds: ``90s``, ``10m``, ``1h``, ``1h30m``, ``2.5m``, or a plain number of seconds.

    Raises:
        ParameterError: (one line, naming the string) not a duration, not above 0, or over 24 hours.
    """
    raw = str(text).strip()
    seconds: float | None = None
    try:
        seconds = float(raw)
    except ValueError:
        match = _DURATION.match(raw)
        if match is not None and raw and any(match.groupdict().values()):
            parts = match.groupdict()
            seconds = sum(float(parts[k] or 0) * f for k, f in (("h", 3600.0), ("m", 60.0), ("s", 1.0)))
    if seconds is None or not math.isfinite(seconds):
        raise ParameterError(f"budget {raw!r} is not a duration: use 90s, 10m or 1h")
    if seconds <= 0:
        raise ParameterError(f"budget {raw!r} must be more than 0 seconds")
    if seconds > MAX_BUDGET_S:
        raise ParameterError(f"budget {raw!r} is over 24 h: use at most 24h")
    return seconds


def format_seconds(seconds: float) -> str:
    """A budget or a time used, as a person reads it: ``45 s``, ``4 min 10 s``, ``1 h 5 min`` (under 1 s: ``27 ms``).

    :func:`backend.chunking.duration_text` (the chunkings' time), with whole seconds under a minute.
    """
    if seconds < 1:
        return duration_text(max(float(seconds), 0.0))
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else duration_text(whole)
