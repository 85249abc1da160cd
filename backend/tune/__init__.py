"""Tuning: search the chunkers' declared parameter ranges for the best chunking of a document and its questions.

See :mod:`backend.tune.types` for what a run returns, and ``docs/tune.md``.
"""

from backend.tune.types import OBJECTIVES, Comparison, Interval, LeftOut, TrialRow, TuneProgress, TuneResult

__all__ = ["OBJECTIVES", "Comparison", "Interval", "LeftOut", "TrialRow", "TuneProgress", "TuneResult"]
