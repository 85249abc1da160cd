"""Helpers shared by the figures: non-finite values as gaps, and many line segments as one trace.

A figure draws every series as one trace with ``None`` separators, so a 1,000-sentence
document is a handful of Plotly objects, not thousands.
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["BOUNDARY_LINES_MAX", "RUG_FRACTION", "boundary_segments", "finite", "segments"]

BOUNDARY_LINES_MAX = 60  # more boundaries than this are drawn as ticks at the foot of the axis, not full lines
RUG_FRACTION = 0.06  # a tick's height, as a fraction of the y range


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


def boundary_segments(xs: Sequence[float], y0: float, y1: float) -> tuple[list[float | None], list[float | None]]:
    """Vertical boundary marks at ``xs`` over the y range ``[y0, y1]``, as one trace's x and y.

    Up to :data:`BOUNDARY_LINES_MAX` boundaries each get a full-height line; beyond that
    (230 boundaries would be a wall of lines hiding the curve) each gets a short tick,
    :data:`RUG_FRACTION` of the range tall, at the foot of the axis.
    """
    top = y1 if len(xs) <= BOUNDARY_LINES_MAX else y0 + (y1 - y0) * RUG_FRACTION
    return segments([(x, x) for x in xs], [(y0, top)] * len(xs))
