"""How long the model work behind a result took, computed now or read from the output cache.

Every model output the cache stores carries the seconds it took to compute
(:data:`SECONDS_FIELD` in the entry's JSON part), so a result read back from the cache can
still say what it cost: a PPL chunking read in 27 ms stands on 8 minutes of scoring.

The functions that compute or read model outputs (document scores, embeddings, pair
scores, margins, chat replies) report to the :func:`model_time_ledger` open in the current
thread, if any; :meth:`backend.chunkers.base.Chunker.chunk_with` opens one around each
chunking and keeps the result as :attr:`backend.chunking.Chunking.model_time`. A
:mod:`contextvars` variable, so two threads chunking at once never mix their times.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from backend.chunking import ModelTime

__all__ = [
    "SECONDS_FIELD",
    "ModelTimeLedger",
    "model_time_ledger",
    "record_cached",
    "record_computed",
    "stored_seconds",
    "timed",
]

SECONDS_FIELD = "model_seconds"  # the JSON field of a cache entry holding its compute time

T = TypeVar("T")


@dataclass
class ModelTimeLedger:
    """What one run's model work added up to so far (see :func:`model_time_ledger`)."""

    seconds: float = 0.0
    computed_s: float = 0.0
    computed: int = 0
    cached: int = 0
    unknown: int = 0

    def result(self) -> ModelTime:
        """The frozen total."""
        return ModelTime(self.seconds, self.computed_s, self.computed, self.cached, self.unknown)


_CURRENT: contextvars.ContextVar[ModelTimeLedger | None] = contextvars.ContextVar("model_time_ledger", default=None)


@contextlib.contextmanager
def model_time_ledger() -> Iterator[ModelTimeLedger]:
    """Collect the model time reported in this thread until the block ends (nested blocks each see their own)."""
    ledger = ModelTimeLedger()
    token = _CURRENT.set(ledger)
    try:
        yield ledger
    finally:
        _CURRENT.reset(token)


def record_computed(seconds: float, outputs: int = 1, *, earlier: float = 0.0) -> None:
    """Report ``outputs`` model outputs computed now in ``seconds`` (plus ``earlier`` seconds of a resumed pass)."""
    ledger = _CURRENT.get()
    if ledger is not None:
        ledger.seconds += seconds + earlier
        ledger.computed_s += seconds
        ledger.computed += outputs


def stored_seconds(value: Mapping[str, Any]) -> float | None:
    """The compute seconds a cache entry carries; None for an entry stored before they were recorded."""
    seconds = value.get(SECONDS_FIELD)
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0:
        return float(seconds)
    return None


def record_cached(value: Mapping[str, Any]) -> None:
    """Report one model output read from the cache, with the seconds its entry recorded (unknown if none)."""
    ledger = _CURRENT.get()
    if ledger is None:
        return
    ledger.cached += 1
    seconds = stored_seconds(value)
    if seconds is None:
        ledger.unknown += 1
    else:
        ledger.seconds += seconds


def timed(compute: Callable[[], Mapping[str, Any]]) -> Callable[[], dict[str, Any]]:
    """``compute`` that adds its own wall time to its value (:data:`SECONDS_FIELD`) and reports it as computed.

    A value that already carries seconds (work resumed from a checkpoint) keeps them and adds this pass's.
    """

    def run() -> dict[str, Any]:
        started = time.perf_counter()
        value = dict(compute())
        seconds = time.perf_counter() - started
        earlier = stored_seconds(value) or 0.0
        record_computed(seconds, earlier=earlier)
        value[SECONDS_FIELD] = earlier + seconds
        return value

    return run
