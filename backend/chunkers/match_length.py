"""Match lengths: tune a configuration so its mean chunk length hits a target, for fair comparisons.

Both Meta-Chunking and MoC compare chunkers only at equal mean chunk length. For a target
mean length (tokens of the configuration's tokenizer), :func:`match_length` bisects the
chunker's length parameter (``chunk_size``, a PPL ``threshold`` or a ``target_length``: see
``Chunker.length_parameter``) until the mean chunk length is within ``tolerance`` (±5 % by
default) of the target, and otherwise reports the closest value it reached. Mean length grows
with each of these parameters (not always strictly: a plateau just means several values give
the same chunks). A model-backed chunker is run on its cached model outputs, so only the
first step can cost a model run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from backend.chunkers.base import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.errors import ParameterError
from backend.text.document import Document

__all__ = ["MatchResult", "match_length", "mean_length"]

DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class MatchResult:
    """The outcome of matching one configuration to a target mean length.

    Attributes:
        config: The tuned configuration (the original one when nothing could be tuned).
        chunking: Its chunking.
        target: The target mean length in tokens.
        achieved: The chunking's mean chunk length in tokens.
        within: Whether ``achieved`` is within the tolerance of ``target``.
        parameter: The tuned parameter's name (None: the chunker has no length parameter).
        steps: Chunkings run while searching.
    """

    config: ChunkerConfig
    chunking: Chunking
    target: float
    achieved: float
    within: bool
    parameter: str | None
    steps: int

    @property
    def error(self) -> float:
        """``achieved / target - 1``."""
        return self.achieved / self.target - 1 if self.target else math.inf

    def to_json(self) -> dict:
        """A JSON-ready summary."""
        return {
            "config": self.config.to_json(),
            "target": self.target,
            "achieved": self.achieved,
            "within": self.within,
            "parameter": self.parameter,
            "value": self.config.params_dict.get(self.parameter) if self.parameter else None,
            "steps": self.steps,
        }


def mean_length(chunking: Chunking) -> float:
    """Mean chunk length in tokens (0 for no chunk)."""
    counts = chunking.token_counts
    return sum(counts) / len(counts) if counts else 0.0


def match_length(
    doc: Document,
    config: ChunkerConfig,
    target: float,
    *,
    context: ModelContext | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = 40,
) -> MatchResult:
    """Tune ``config``'s length parameter until its mean chunk length is within ``tolerance`` of ``target``.

    Args:
        doc: The document.
        config: The configuration to tune (its other parameters stay as they are).
        target: Target mean chunk length in tokens (> 0).
        context: Model context for model-backed chunkers.
        tolerance: Relative tolerance (0.05 = ±5 %).
        max_steps: Most chunkings to run.

    Returns:
        The best configuration found; ``within`` says whether it met the tolerance.

    Raises:
        ParameterError: a target or tolerance out of range.
    """
    if not (target > 0 and math.isfinite(target)):
        raise ParameterError(f"target mean length must be a positive number, got {target!r}")
    if not 0 < tolerance < 1:
        raise ParameterError(f"tolerance must be between 0 and 1, got {tolerance!r}")
    base = make_chunker(config.name, config.params_dict, config.tokenizer)
    param = type(base).length_parameter()
    context = context or ModelContext()
    runs: dict[float, tuple[ChunkerConfig, Chunking, float]] = {}

    def run(value: float) -> float:
        if value not in runs:
            params = dict(base.values)
            if param is not None:
                params[param.name] = int(value) if param.type == "int" else float(value)
            chunker = make_chunker(config.name, params, config.tokenizer)
            chunking = chunker.chunk(doc, context)
            runs[value] = (chunker.config, chunking, mean_length(chunking))
        return runs[value][2]

    def ok(value: float) -> bool:
        return abs(run(value) / target - 1) <= tolerance

    if param is None:
        run(0.0)
    else:
        _search(run, ok, param.type == "int", _bounds(base, param), target, max_steps)
    value = min(runs, key=lambda v: (abs(runs[v][2] / target - 1), v))
    cfg, chunking, achieved = runs[value]
    return MatchResult(
        config=cfg,
        chunking=chunking,
        target=float(target),
        achieved=achieved,
        within=abs(achieved / target - 1) <= tolerance,
        parameter=param.name if param is not None else None,
        steps=len(runs),
    )


def _bounds(chunker, param) -> tuple[float, float]:
    """The search interval of a length parameter."""
    lo = param.min if param.min is not None else (0.0 if param.type == "float" else 1.0)
    if param.type == "int":
        overlap = chunker.values.get("chunk_overlap")
        if param.name == "chunk_size" and overlap:
            lo = max(lo, overlap + 1)  # chunk_size must stay above the overlap
        hi = param.max if param.max is not None else 100_000
        return float(max(lo, 1)), float(hi)
    return float(lo if param.min is not None else 0.0), float(param.max if param.max is not None else math.inf)


def _search(
    run: Callable[[float], float],
    ok: Callable[[float], bool],
    integer: bool,
    bounds: tuple[float, float],
    target: float,
    max_steps: int,
) -> None:
    """Bisect for a value whose mean length is near ``target``; every value tried is kept by ``run``."""
    lo, hi = bounds
    if integer:
        # Start small and grow: a chunk size of the target itself is a good first guess.
        a, b = lo, min(hi, max(lo, round(target)))
        steps = 0
        while run(b) < target and b < hi and steps < max_steps:
            a, b = b, min(hi, b * 2)
            steps += 1
        while b - a > 1 and steps < max_steps:
            if ok(a) or ok(b):
                return
            mid = (a + b) // 2
            if run(mid) < target:
                a = mid
            else:
                b = mid
            steps += 1
        run(a)
        return
    # Floats (a threshold): find a bracket by doubling in both directions, then bisect.
    a, b = max(lo, 0.0) if lo > -math.inf else 0.0, 1.0
    steps = 0
    while run(b) < target and steps < max_steps // 2 and b < min(hi, 1e6):
        a, b = b, min(hi, b * 2)
        steps += 1
    while run(a) > target and a > max(lo, -1e6) and steps < max_steps // 2:
        b, a = a, (a * 2 if a < 0 else -1.0)
        if a < lo:
            a = lo
        steps += 1
    while steps < max_steps:
        if ok(a) or ok(b):
            return
        mid = (a + b) / 2
        if run(mid) < target:
            a = mid
        else:
            b = mid
        steps += 1
