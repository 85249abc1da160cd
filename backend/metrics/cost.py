"""What scoring chunkings for the quality metrics costs: pairs, tokens, and the time at a measured speed.

The language model reads every pair's text, so the cost is counted in tokens
(:func:`~backend.metrics.quality.estimate_cost` per chunking) and turned into time with a
:class:`Throughput`: a cautious default until a finished run has been timed.

The defaults fit a CPU: BC and DS (adjacent pairs only, a few minutes on a sample document),
and a small pair window for CS when it is picked (every ordered pair is n² passes: hours).
A run estimated above :data:`CONFIRM_SECONDS` asks for confirmation first
(:func:`needs_confirmation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.metrics.quality import estimate_cost, pair_requests

__all__ = [
    "DEFAULT_TOKENS_PER_S",
    "DEFAULT_METRICS",
    "DEFAULT_PAIR_WINDOW",
    "CONFIRM_SECONDS",
    "Throughput",
    "cost_estimate",
    "cost_label",
    "needs_confirmation",
    "format_seconds",
]

# Tokens per second the time estimate assumes until a run has been timed: a cautious figure
# for the bundled SmolLM2-135M on two busy CPU cores.
DEFAULT_TOKENS_PER_S = 150.0
# A run shorter than this, or one read from the cache, says little about the model's speed.
MIN_TOKENS = 2_000
MIN_SECONDS = 5.0
# What the Quality page computes unless told otherwise: the adjacent-pair metrics (n passes), not CS (n²).
DEFAULT_METRICS = ("bc", "ds")
# The pair window CS starts with: pairs with |i − j| ≤ 3, about 6n passes instead of n².
DEFAULT_PAIR_WINDOW = 3
# A run estimated longer than this (10 minutes at the session's measured speed) starts only once confirmed.
CONFIRM_SECONDS = 600.0


@dataclass(frozen=True)
class Throughput:
    """The language model's scoring speed: the default, or the one measured on the last long enough run.

    Attributes:
        tokens_per_s: Tokens read per second.
        measured: Whether it was measured (False: :data:`DEFAULT_TOKENS_PER_S`).
    """

    tokens_per_s: float = DEFAULT_TOKENS_PER_S
    measured: bool = False

    def after_run(self, tokens: int, seconds: float) -> Throughput:
        """The speed of a finished run that read ``tokens`` in ``seconds``; this one when the run was too short to tell."""
        if tokens >= MIN_TOKENS and seconds > MIN_SECONDS:
            return Throughput(tokens / seconds, measured=True)
        return self


def cost_estimate(
    token_counts: Sequence[Sequence[int]],
    *,
    complete: bool,
    window: int | None,
    tokens_per_s: float,
    chunk_texts: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """The summed :func:`~backend.metrics.quality.estimate_cost` of several chunkings, with a time estimate.

    Token counts are each configuration's own tokenizer's, so ``tokens`` (and the time) is
    an approximation of what the model reads. With ``chunk_texts`` (each chunking's chunk
    texts, same order) ``pairs`` counts each distinct ``(context, continuation)`` pair once,
    as the scoring job does (:func:`~backend.metrics.scores.score_chunkings` counts its
    progress in these pairs, so on a fresh cache its total is this ``pairs``).

    Returns:
        ``{"pairs", "tokens", "seconds"}``.
    """
    pairs = tokens = 0
    for counts in token_counts:
        cost = estimate_cost(list(counts), complete=complete, window=window)
        pairs += cost["pairs"]
        tokens += cost["tokens"]
    if chunk_texts is not None:
        distinct = {r for texts in chunk_texts for r in pair_requests(texts, complete=complete, window=window)}
        pairs = len(distinct)
    return {"pairs": pairs, "tokens": tokens, "seconds": tokens / max(tokens_per_s, 1e-9)}


def needs_confirmation(seconds: float, threshold: float = CONFIRM_SECONDS) -> bool:
    """Whether a run estimated at ``seconds`` is long enough to ask before starting it.

    Args:
        seconds: The estimate (:func:`cost_estimate`'s ``seconds``).
        threshold: The longest run that starts on one click (default :data:`CONFIRM_SECONDS`).
    """
    return seconds > threshold


def cost_label(cost: dict[str, float]) -> str:
    """A :func:`cost_estimate` in a few words: ``1,234 pairs, ≈ 6.5 min`` (the unit the job's progress counts)."""
    pairs = int(cost["pairs"])
    return f"{pairs:,} pair{'s' if pairs != 1 else ''}, ≈ {format_seconds(cost['seconds'])}"


def format_seconds(seconds: float) -> str:
    """``42`` → ``42 s``, ``390`` → ``6.5 min``, ``8000`` → ``2.2 h``."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
