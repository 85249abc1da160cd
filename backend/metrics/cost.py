"""What scoring chunkings for the quality metrics costs: the pairs still missing, and the time at this machine's speed.

Only the work not already in the output cache counts: :func:`pair_cost` looks each distinct
pair's cache entry up (a file check, nothing read) and prices the missing ones at the speed the
language model was measured at on this machine (:mod:`backend.models.rates`, per model, device
and precision, remembered across restarts). Until a run has measured it, the time is a guess
and says so (:data:`GUESS_CHARS_PER_S`, :attr:`Throughput.measured`). :func:`embed_cost` does the
same for the chunk embeddings DS needs. The scoring job is anytime: :func:`first_estimate_cost` is
what it scores before its first estimates with intervals (its first round), at the same speed.
:func:`cost_estimate` is the token count of :func:`estimate_cost` over several chunkings (what a fresh
cache costs).

The defaults fit a CPU: BC and DS (adjacent pairs only, a few minutes on a sample document),
and a small pair window for CS when it is picked (every ordered pair is n² passes: hours).
A run estimated above :data:`CONFIRM_SECONDS` asks for confirmation first
(:func:`needs_confirmation`). Durations read in human units (:func:`format_seconds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.metrics.estimate import stratified_order
from backend.metrics.scores import SAMPLE_SEED, pair_requests, required_pairs, sample_requests, sample_rounds
from backend.models.cache import OutputCache
from backend.models.embeddings import embeddings_key
from backend.models.rates import Rate, rate_store
from backend.models.scoring import missing_pairs, pair_work
from backend.progress import format_seconds

__all__ = [
    "DEFAULT_TOKENS_PER_S",
    "GUESS_CHARS_PER_S",
    "DEFAULT_METRICS",
    "DEFAULT_PAIR_WINDOW",
    "CONFIRM_SECONDS",
    "EmbedCost",
    "PairCost",
    "Throughput",
    "cost_estimate",
    "cost_label",
    "embed_cost",
    "estimate_cost",
    "first_estimate_cost",
    "needs_confirmation",
    "format_seconds",
    "pair_cost",
]

# The tokens per second of :func:`cost_estimate`'s ``seconds`` when a caller has nothing better: about
# what SmolLM2-135M reads on two busy CPU cores (a guess, never shown as measured).
DEFAULT_TOKENS_PER_S = 150.0
# Until the language model's pair scoring has been measured on this machine, the time of a run is this
# guess (about DEFAULT_TOKENS_PER_S at four characters a token), always labelled as a guess.
GUESS_CHARS_PER_S = 600.0
# What the Quality page computes unless told otherwise: the adjacent-pair metrics (n passes), not CS (n²).
DEFAULT_METRICS = ("bc", "ds")
# The pair window CS starts with: pairs with |i − j| ≤ 3, about 6n passes instead of n².
DEFAULT_PAIR_WINDOW = 3
# A run estimated longer than this (10 minutes at the measured speed) starts only once confirmed.
CONFIRM_SECONDS = 600.0


def estimate_cost(token_counts: Sequence[int], *, complete: bool = True, window: int | None = None) -> dict[str, int]:
    """What scoring a chunking's pairs costs: ``{"pairs", "tokens"}``.

    ``tokens`` counts what the model reads: every context chunk once per group of
    continuations, every continuation once per pair, plus the unconditional pass per chunk.
    """
    n = len(token_counts)
    pairs = required_pairs(n, complete=complete, window=window)
    contexts = {i for i, _ in pairs}
    tokens = sum(int(token_counts[i]) for i in contexts) + sum(int(token_counts[j]) for _, j in pairs)
    tokens += sum(int(t) + 1 for t in token_counts)
    return {"pairs": len(pairs) + n, "tokens": tokens}


@dataclass(frozen=True)
class Throughput:
    """The language model's pair-scoring speed: measured on this machine, or the plainly labelled guess.

    Attributes:
        chars_per_s: Characters of the pairs read per second (the weight of
            :func:`~backend.models.scoring.pair_work`).
        pairs_per_s: Pairs per second (None: not measured).
        measured: Whether it was measured (False: :data:`GUESS_CHARS_PER_S`).
        from_pass: Measured on a PPL scoring pass of the model, not on pair scoring (see :meth:`measured_for`).
    """

    chars_per_s: float = GUESS_CHARS_PER_S
    pairs_per_s: float | None = None
    measured: bool = False
    from_pass: bool = False

    @classmethod
    def of(cls, rate: Rate | None) -> Throughput:
        """The speed of a measured ``pairs`` rate (:class:`~backend.models.rates.Rate`); None: the guess."""
        if rate is None:
            return cls()
        return cls(rate.work_per_s, rate.units_per_s, measured=True)

    @classmethod
    def measured_for(cls, fingerprint: str | None, kind: str = "lm") -> Throughput:
        """The speed measured for the model ``fingerprint`` (its latest device and precision), else the guess.

        Before its pair scoring was measured, a PPL pass of the same model measured on this machine
        stands in (characters of text read per second; pairs differ — short contexts, no re-read
        context, one call per group — so the figure is said to be the pass's). Closer than any guess:
        the issue's Quality page guessed 150 tokens/s minutes after a PPL pass ran at 43.
        """
        rates = rate_store()
        pairs = rates.find(fingerprint, "pairs", kind=kind) if fingerprint else None
        if pairs is not None:
            return cls.of(pairs)
        scoring = rates.find(fingerprint, "token_nll", kind=kind) if fingerprint else None
        if scoring is not None and scoring.chars_per_s is not None:
            return cls(scoring.chars_per_s, None, measured=True, from_pass=True)
        return cls()

    @property
    def words(self) -> str:
        """The speed in words: ``3.1 pairs/s, measured on this machine`` or what the guess is."""
        if not self.measured:
            return f"a guess ({GUESS_CHARS_PER_S:,.0f} characters/s) until the first run measures this machine"
        if self.from_pass:
            return f"{self.chars_per_s:,.0f} characters/s, measured on this machine's PPL pass of the same model"
        per = f"{self.pairs_per_s:,.1f} pairs/s" if self.pairs_per_s else f"{self.chars_per_s:,.0f} characters/s"
        return f"{per}, measured on this machine"


@dataclass(frozen=True)
class PairCost:
    """What scoring the pairs still missing from the cache costs.

    Attributes:
        pairs: Distinct pairs missing (what the scoring job counts).
        total_pairs: Distinct pairs the tables need.
        chars: Their weight (:func:`~backend.models.scoring.pair_work`).
        seconds: At ``throughput``.
        throughput: The speed (measured, or the guess).
    """

    pairs: int
    total_pairs: int
    chars: float
    seconds: float
    throughput: Throughput

    @property
    def cached(self) -> int:
        """Pairs already in the cache."""
        return self.total_pairs - self.pairs


def _priced(
    requests: Sequence[tuple[str, str]], fingerprint: str | None, kind: str, cache: OutputCache | None,
    throughput: Throughput,
) -> PairCost:
    """The distinct ``requests`` still missing from ``cache`` (all of them without a fingerprint or cache), priced."""
    distinct = list(dict.fromkeys(requests))
    todo = missing_pairs(distinct, fingerprint, kind, cache) if fingerprint and cache is not None else distinct
    chars = float(sum(pair_work(todo)))
    return PairCost(len(todo), len(distinct), chars, chars / max(throughput.chars_per_s, 1e-9), throughput)


def pair_cost(
    texts: Sequence[Sequence[str]],
    *,
    complete: bool,
    window: int | None,
    fingerprint: str | None,
    kind: str,
    cache: OutputCache | None,
    throughput: Throughput,
) -> PairCost:
    """The pairs of the chunkings ``texts`` (each its chunks' texts) still missing from ``cache``, and their time.

    Each distinct ``(context, continuation)`` pair counts once, as the scoring job counts it.
    With no fingerprint (the model's identity is unknown until it loads) or no cache, every
    pair counts as missing.
    """
    requests = [r for t in texts for r in pair_requests(list(t), complete=complete, window=window)]
    return _priced(requests, fingerprint, kind, cache, throughput)


def first_estimate_cost(
    texts: Sequence[Sequence[str]],
    *,
    complete: bool,
    window: int | None,
    fingerprint: str | None,
    kind: str,
    cache: OutputCache | None,
    throughput: Throughput,
) -> PairCost | None:
    """What the scoring job scores before its first estimates with 95% intervals, and its time; None: one round.

    The job (:func:`~backend.metrics.scores.score_chunkings`) scores a seeded sample of each
    chunking's chunks first (:func:`~backend.metrics.scores.sample_rounds`) and publishes the
    estimates when that round ends: its pairs still missing from ``cache``, priced as
    :func:`pair_cost` prices the whole job's. None when the first round is the whole job (a
    chunking this short gets its exact values first). Arguments as for :func:`pair_cost`.
    """
    texts = [list(t) for t in texts]
    rounds = sample_rounds(texts, complete=complete, window=window)
    if len(rounds) < 2:
        return None
    sampled = [stratified_order(len(t), SAMPLE_SEED)[:upto] for t, upto in zip(texts, rounds[0], strict=True)]
    requests = [r for t, nodes in zip(texts, sampled, strict=True)
                for r in sample_requests(t, nodes, complete=complete, window=window)[0]]
    return _priced(requests, fingerprint, kind, cache, throughput)


@dataclass(frozen=True)
class EmbedCost:
    """What embedding the chunks not in the cache costs (DS).

    Attributes:
        texts: Texts to embed.
        chars: Their characters.
        seconds: At the embedder's measured speed; None: not measured on this machine yet.
    """

    texts: int
    chars: int
    seconds: float | None

    @property
    def words(self) -> str:
        """``about 2 min`` at the measured speed, or that the first run measures it."""
        if self.texts == 0:
            return "nothing to embed"
        if self.seconds is None:
            return "time measured on the first run"
        return format_seconds(self.seconds)


def embed_cost(texts: Sequence[Sequence[str]], fingerprint: str | None, cache: OutputCache | None) -> EmbedCost:
    """The chunkings ``texts`` whose embeddings (one cache entry per chunking) are not cached, and their time.

    The time is at the embedder's speed measured on this machine (None before its first run).
    """
    todo = [list(t) for t in texts if t and not (
        fingerprint and cache is not None and cache.contains(embeddings_key(fingerprint, list(t)))
    )]
    chars = sum(len(x) for t in todo for x in t)
    rate = rate_store().find(fingerprint, "embed") if fingerprint else None
    seconds = chars / rate.work_per_s if rate is not None and todo else (0.0 if not todo else None)
    return EmbedCost(sum(len(t) for t in todo), chars, seconds)


def cost_estimate(
    token_counts: Sequence[Sequence[int]],
    *,
    complete: bool,
    window: int | None,
    tokens_per_s: float,
    chunk_texts: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """The summed :func:`estimate_cost` of several chunkings, with a time estimate.

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
    """A cost in a few words: ``1,234 pairs, about 6 min`` (the unit the job's progress counts).

    With ``"measured": False`` in ``cost`` the time is marked as a guess (``…, about 6 min (a guess)``).
    """
    pairs = int(cost["pairs"])
    guess = "" if cost.get("measured", True) else " (a guess)"
    return f"{pairs:,} pair{'s' if pairs != 1 else ''}, {format_seconds(cost['seconds'])}{guess}"
