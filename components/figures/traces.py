"""Helpers shared by the figures: non-finite values as gaps, and many line segments as one trace.

A figure draws every series as one trace with ``None`` separators, so a 1,000-sentence
document is a handful of Plotly objects, not thousands.
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["finite", "segments"]


def finite(values: Sequence[float]) -> list[float | None]:
    """``values`` as floats, with ``None`` (a gap in a Plotly line) for nan and infinities."""
    return [float(v) if math.isfinite(v) else None for v in values]


def segments(
    xs: Sequence[tuple[float, float]], ys: Sequence[tuple[float, float]]
) -> tuple[list[float | None], list[float | None]]:
    """Many line segments ``(x0, x1), (y0, y1)`` as one trace's x and y, ``None`` between segments."""
    x: list[float | None] = []
    y: list[float | None] = []
    for (x0, x1), (y0, y1) in zip(xs, ys):
        x += [x0, x1, None]
        y += [y0, y1, None]
    return x, y
