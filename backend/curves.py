"""What a chunker cuts on, as one curve: the values it compares, its threshold and where it cut.

A chunker with a curve (``Chunker.curve``) returns a :class:`Curve`: one point per unit
(a sentence, a piece, or the gap after one), the value it compared at that point, the
threshold it compared with — a horizontal line (semantic), a per-point series (margin
sampling's adaptive threshold) or a drop θ on local minima (perplexity chunking) — and the
points where a chunk actually ends. The app draws every curve with one component
(``backend.figures.curves.curve_chart``); the CLI prints :meth:`Curve.to_json`.

The boundaries are read off the chunker's own chunks (:func:`chunk_end_points`), so the
curve shows exactly where the chunker cut, size caps and combination included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = ["Curve", "chunk_end_points"]


def _floats(values: np.ndarray | None) -> list[float | None] | None:
    if values is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


@dataclass(frozen=True, eq=False)
class Curve:
    """The values a chunker compared, point by point, and where it ended chunks.

    Attributes:
        units: ``units[i]`` is the span of point ``i``'s unit (for a gap, the unit before it).
        values: One value per point (``nan``: no value, e.g. a sentence with no scored token).
        x_label: The x axis: what the points are counted in (``sentence``, ``piece``).
        y_label: What the values are (``mean token NLL``, ``cosine distance``…).
        point_label: What one point is, for hovers (``sentence``, ``gap after sentence``).
        boundaries: Indices of the points that end a chunk, ascending.
        threshold: A horizontal threshold line (semantic chunking), or None.
        threshold_label: The threshold's legend entry (how it was set).
        threshold_series: A per-point threshold (margin sampling's adaptive one), or None.
        drop_threshold: θ of a local-minimum rule (perplexity chunking): drawn as bars of
            height θ on each candidate minimum, or None.
        candidates: The points where ``drop_threshold`` applies (local minima), ascending.
    """

    units: tuple[tuple[int, int], ...]
    values: np.ndarray
    x_label: str
    y_label: str
    point_label: str
    boundaries: tuple[int, ...] = ()
    threshold: float | None = None
    threshold_label: str = "threshold"
    threshold_series: np.ndarray | None = None
    drop_threshold: float | None = None
    candidates: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.units)
        if len(self.values) != n:
            raise ValueError(f"{len(self.values)} values for {n} points")
        if self.threshold_series is not None and len(self.threshold_series) != n:
            raise ValueError(f"{len(self.threshold_series)} threshold values for {n} points")
        if any(not 0 <= i < n for i in (*self.boundaries, *self.candidates)):
            raise ValueError(f"a boundary or candidate index is outside 0..{n - 1}")

    def __len__(self) -> int:
        return len(self.units)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (non-finite numbers become ``null``)."""
        threshold = self.threshold if self.threshold is not None and math.isfinite(self.threshold) else None
        return {
            "x_label": self.x_label,
            "y_label": self.y_label,
            "point_label": self.point_label,
            "units": [[int(s), int(e)] for s, e in self.units],
            "values": _floats(self.values),
            "boundaries": [int(i) for i in self.boundaries],
            "threshold": threshold,
            "threshold_label": self.threshold_label,
            "threshold_series": _floats(self.threshold_series),
            "drop_threshold": self.drop_threshold,
            "candidates": [int(i) for i in self.candidates],
        }


def chunk_end_points(units: Sequence[tuple[int, int]], spans: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The points whose unit ends where a chunk ends (the document's last chunk end excluded).

    Args:
        units: The points' unit spans.
        spans: The chunker's chunks, ``(start, end, …)`` each.
    """
    if not spans:
        return ()
    ends = {int(s[1]) for s in spans}
    ends.discard(max(ends))  # the end of the text is no boundary
    return tuple(i for i, (_s, e) in enumerate(units) if e in ends)
