"""Meta-Chunking (Zhao et al., 2024): perplexity chunking, margin sampling and dynamic combination.

Pure functions over per-sentence values; nothing here loads a model. The chunkers in
:mod:`backend.chunkers.meta.chunkers` get the values from the model backend and call these; the
PPL page holds the values and re-chunks through those chunkers' ``chunk_from_means`` (no model
call when the threshold slider moves), and draws the candidates, :class:`Boundaries` and
:class:`ThetaCurve` computed here.

Perplexity chunking (eq. 3 of the paper)
    Each sentence ``i`` has a value ``v[i]``: the mean NLL of its tokens given all the text
    before it (``value="nll"``, what the authors' code uses) or its ``exp`` (``value="ppl"``,
    what the paper writes). A sentence that is neither the first nor the last and sits at a
    local minimum closes a chunk (it is the last sentence of its chunk). Two rules:

    ``rule="reference"`` (default; the authors' ``find_minima``)
        ``v[i] < v[i-1] and v[i] < v[i+1]`` and (``v[i-1] - v[i] >= θ`` or ``v[i+1] - v[i] >= θ``),
        or the plateau ``v[i] < v[i-1] and v[i] == v[i+1]`` with ``v[i-1] - v[i] >= θ``.
    ``rule="paper"`` (eq. 3 as printed)
        ``min(v[i-1], v[i+1]) - v[i] > θ``, or ``v[i-1] - v[i] > θ and v[i+1] == v[i]``.

    The reference keeps a minimum when its *larger* drop reaches θ, the paper when its
    *smaller* drop passes θ, so at the same θ the paper rule cuts less. Either way each
    candidate sentence has one number, its **drop**, and is a boundary exactly when
    ``drop >= θ`` (reference) or ``drop > θ`` (paper): :func:`boundary_candidates` computes
    them once, and every threshold is then a comparison — that is what makes the slider,
    the drop histogram and the θ → chunk-count curve cheap. A sentence with no scored token
    has value ``nan``; every comparison with ``nan`` is false, so it is never a minimum and
    never makes a neighbour one (IEEE float semantics, as in the authors' code, for both rules).

Dynamic combination (section 2.1)
    Meta-chunks are merged greedily, in order, while the merged span stays within
    ``target_length`` tokens; a meta-chunk longer than the target stands alone.

Margin sampling (eq. 1)
    For each sentence after the first, the model answers the Table 5 prompt ("1. split … /
    2. keep …"); ``margin = P("1") - P("2")``. The threshold starts at 0 and, once five
    margins are known, is the mean of the last five (the current one included, as in the
    authors' code). The sentence starts a new chunk when ``margin >= threshold``; it joins
    the current chunk when ``margin < threshold`` (the authors' code merges when
    ``P("2") - P("1")`` is greater than its threshold: the same decision).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from backend.chunkers.packing import pack_units
from backend.errors import ParameterError
from backend.tokenizers import SpanCounter

__all__ = [
    "RULES",
    "VALUES",
    "Boundaries",
    "Candidate",
    "MarginStep",
    "ThetaCurve",
    "boundaries_at",
    "boundary_candidates",
    "chunk_count_curve",
    "combine",
    "find_minima",
    "margin_messages",
    "margin_sampling_steps",
    "meta_chunk_ranges",
    "overlap_ranges",
    "ranges_from_steps",
    "sentence_values",
    "suggest_thresholds",
    "theta_curve",
    "theta_grid",
]

RULES = ("reference", "paper")
VALUES = ("nll", "ppl")
MARGIN_WINDOW = 5  # margins averaged into the adaptive threshold


@dataclass(frozen=True)
class Candidate:
    """A sentence that is a boundary for small enough thresholds.

    Attributes:
        index: The sentence's index.
        drop: The rule's drop at this sentence: a boundary when ``drop >= θ`` (reference
            rule) or ``drop > θ`` (paper rule).
    """

    index: int
    drop: float


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ParameterError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


def sentence_values(nll_means: Sequence[float], value: str = "nll") -> np.ndarray:
    """The per-sentence values the rules compare: mean NLLs, or their ``exp`` for ``value="ppl"``.

    ``None`` (a sentence with no scored token, as the CLI prints it) becomes ``nan``.
    """
    if value not in VALUES:
        raise ParameterError(f"value must be one of {', '.join(VALUES)}, got {value!r}")
    v = np.array([math.nan if x is None else float(x) for x in nll_means], dtype=np.float64)
    if value == "ppl":
        with np.errstate(over="ignore"):
            v = np.exp(v)
    return v


def boundary_candidates(values: Sequence[float], rule: str = "reference") -> list[Candidate]:
    """Every sentence that closes a chunk at some threshold, with its drop (see the module docstring)."""
    _check_rule(rule)
    v = [float(x) for x in values]
    out: list[Candidate] = []
    for i in range(1, len(v) - 1):
        prev, cur, nxt = v[i - 1], v[i], v[i + 1]
        if rule == "reference":
            if cur < prev and cur < nxt:
                out.append(Candidate(i, max(prev - cur, nxt - cur)))
            elif cur < prev and cur == nxt:
                out.append(Candidate(i, prev - cur))
        elif prev == prev and cur == cur and nxt == nxt:  # all three known (nan != nan)
            # eq. 3: min(prev, next) - cur > θ, or prev - cur > θ on a plateau (next == cur,
            # where the first clause cannot hold for θ >= 0). Every interior sentence is a
            # candidate: for a negative θ the first clause holds at sentences that are not minima.
            out.append(Candidate(i, prev - cur if nxt == cur else min(prev, nxt) - cur))
    return out


def _passes(drop: float, threshold: float, rule: str) -> bool:
    return drop >= threshold if rule == "reference" else drop > threshold


def find_minima(values: Sequence[float], threshold: float, rule: str = "reference") -> list[int]:
    """Indices of the sentences that close a chunk at ``threshold`` (ascending)."""
    return list(boundaries_at(boundary_candidates(values, rule), threshold, rule).kept)


@dataclass(frozen=True)
class Boundaries:
    """What one threshold makes of a document's candidates: the cuts, and the minima drawn with a θ bar.

    Attributes:
        threshold: θ.
        rule: ``reference`` or ``paper``.
        kept: The sentences that close a chunk at θ (ascending): :func:`find_minima`.
        drawn: The candidates a θ bar is drawn on: the real minima (a positive drop) and any
            candidate that cuts at θ (a negative θ under the paper rule cuts at non-minima).
        minima: How many candidates are real minima (a positive drop).
    """

    threshold: float
    rule: str
    kept: tuple[int, ...]
    drawn: tuple[Candidate, ...]
    minima: int


def boundaries_at(candidates: Sequence[Candidate], threshold: float, rule: str = "reference") -> Boundaries:
    """The :class:`Boundaries` of ``threshold`` from :func:`boundary_candidates`'s output (no re-scan of the values)."""
    _check_rule(rule)
    threshold = float(threshold)
    kept = tuple(c.index for c in candidates if _passes(c.drop, threshold, rule))
    cut = set(kept)
    drawn = tuple(c for c in candidates if c.drop > 0 or c.index in cut)
    return Boundaries(threshold, rule, kept, drawn, sum(1 for c in candidates if c.drop > 0))


def meta_chunk_ranges(n_sentences: int, minima: Sequence[int]) -> list[tuple[int, int]]:
    """``(first, last)`` sentence indices of each chunk; a minimum is the last sentence of its chunk."""
    out: list[tuple[int, int]] = []
    first = 0
    for m in minima:
        if first <= m < n_sentences - 1:
            out.append((first, m))
            first = m + 1
    if n_sentences:
        out.append((first, n_sentences - 1))
    return out


def overlap_ranges(n_sentences: int, minima: Sequence[int]) -> list[tuple[int, int]]:
    """Like :func:`meta_chunk_ranges`, but each minimum sentence also opens the next chunk (section 4.2.1)."""
    out: list[tuple[int, int]] = []
    first = 0
    for m in minima:
        if first <= m < n_sentences - 1 and m > first:
            out.append((first, m))
            first = m
    if n_sentences:
        out.append((first, n_sentences - 1))
    return out


def combine(
    text: str,
    units: Sequence[tuple[int, int]],
    counter: SpanCounter,
    target_length: int,
) -> list[tuple[int, int, int]]:
    """Merge adjacent meta-chunk spans greedily while each merged span has at most ``target_length`` tokens.

    Counts are exact (the merged span, whitespace between units included, counted by
    ``counter``); a unit longer than the target stands alone.

    Returns:
        ``(start, end, tokens)`` per merged chunk.
    """
    if target_length < 1:
        raise ParameterError(f"target_length ({target_length}) must be at least 1")
    counts = counter.count_many(units)
    return pack_units(text, units, counts, counter, target_length, 0)


def chunk_count_curve(
    candidates: Sequence[Candidate],
    thresholds: Sequence[float],
    rule: str,
    n_sentences: int,
) -> np.ndarray:
    """How many chunks each threshold gives (non-overlapping PPL chunking), without re-chunking.

    One sort of the drops; each threshold is then a binary search.
    """
    _check_rule(rule)
    drops = np.sort(np.array([c.drop for c in candidates], dtype=np.float64))
    t = np.asarray(thresholds, dtype=np.float64)
    side = "left" if rule == "reference" else "right"  # drop >= θ vs drop > θ
    kept = drops.size - np.searchsorted(drops, t, side=side)
    return np.where(n_sentences > 0, kept + 1, 0)


def theta_grid(candidates: Sequence[Candidate], low: float, high: float, points: int = 240) -> np.ndarray:
    """Thresholds for the θ → chunk-count curve: an even grid plus every finite drop in range (the curve's steps)."""
    drops = np.array([c.drop for c in candidates if math.isfinite(c.drop)], dtype=np.float64)
    grid = np.linspace(low, high, points)
    return np.unique(np.concatenate([grid, drops[(drops >= low) & (drops <= high)]]))


@dataclass(frozen=True, eq=False)
class ThetaCurve:
    """Plain PPL chunking (no overlap, no combination) over a range of thresholds.

    Attributes:
        thresholds: The thresholds, ascending (:func:`theta_grid`).
        counts: How many chunks each gives (:func:`chunk_count_curve`).
        mean_tokens: The mean chunk length each gives, approximately: the tokens from the
            first sentence's start to the last one's end, divided by the count.
    """

    thresholds: np.ndarray
    counts: np.ndarray
    mean_tokens: np.ndarray

    def theta_for_length(self, aim: float) -> tuple[float, float]:
        """The threshold whose mean chunk length is nearest ``aim`` (the smallest on a tie), and that length.

        Raises:
            ParameterError: the curve has no point.
        """
        if not len(self.thresholds):
            raise ParameterError("the θ curve has no point")
        best = min(range(len(self.thresholds)), key=lambda i: (abs(self.mean_tokens[i] - aim), self.thresholds[i]))
        return float(self.thresholds[best]), float(self.mean_tokens[best])


def theta_curve(
    candidates: Sequence[Candidate],
    rule: str,
    n_sentences: int,
    total_tokens: int,
    low: float,
    high: float,
    points: int = 240,
) -> ThetaCurve:
    """Chunk count and mean chunk length over thresholds from ``low`` to ``high``, without re-chunking.

    Args:
        candidates: :func:`boundary_candidates` of the values.
        rule: ``reference`` or ``paper``.
        n_sentences: How many sentences the document has.
        total_tokens: Tokens from the first sentence's start to the last sentence's end.
        low: The smallest threshold (:func:`suggest_thresholds`).
        high: The largest.
        points: Thresholds of the even grid (every drop in range is added).
    """
    thresholds = theta_grid(candidates, low, high, points)
    counts = chunk_count_curve(candidates, thresholds, rule, n_sentences)
    return ThetaCurve(thresholds, counts, total_tokens / counts.clip(min=1))


def suggest_thresholds(candidates: Sequence[Candidate], steps: int = 200) -> tuple[float, float, float]:
    """``(low, high, step)`` for a threshold slider, from this document's drops.

    ``high`` is just above the largest finite drop, so the slider reaches "no boundary at
    all"; ``step`` gives about ``steps`` positions, rounded to one significant figure.
    """
    drops = [c.drop for c in candidates if math.isfinite(c.drop)]
    top = max(drops, default=1.0)
    if top <= 0:
        top = 1.0
    raw = top / max(1, steps)
    step = float(f"{raw:.0e}")
    high = math.ceil(top / step) * step + step
    low = min(0.0, math.floor(min(drops, default=0.0) / step) * step)
    return round(low, 12), round(high, 12), step


# --- margin sampling ---------------------------------------------------------------------------

_PROMPT_EN = (
    "This is a text chunking task. You are a text analysis expert. Please choose one of the following "
    "two options based on the logical structure and semantic content of the provided sentence:\n"
    '1. Split "{both}" into "{first}" and "{second}" two parts;\n'
    '2. Keep "{both}" unsplit in its original form;\n'
    "Please answer 1 or 2."
)
_PROMPT_ZH = (
    "这是一个文本分块任务.你是一位文本分析专家，请根据提供的句子的逻辑结构和语义内容，从下面两种方案中选择一种分块方式：\n"
    "1. 将“{both}”分割成“{first}”与“{second}”两部分；\n"
    "2. 将“{both}”不进行分割，保持原形式；\n"
    "请回答1或2。"
)
SYSTEM_PROMPT = "You are a helpful assistant."


def margin_messages(first: str, second: str, both: str, language: str) -> list[dict[str, str]]:
    """The chat messages of the Table 5 prompt (Chinese for ``language="zh"``, else English).

    Args:
        first: The text before the candidate boundary (the previous sentence, or the chunk so far).
        second: The sentence after it.
        both: The two as they stand in the document (the exact text from ``first`` to ``second``).
        language: A language code.
    """
    template = _PROMPT_ZH if language == "zh" else _PROMPT_EN
    user = template.format(both=both, first=first, second=second)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class MarginStep:
    """One margin-sampling decision: whether sentence ``index`` starts a new chunk.

    Attributes:
        index: The sentence judged (1 … n-1).
        margin: ``P("1") - P("2")`` (split minus keep).
        threshold: The threshold it was compared with.
        split: ``margin >= threshold``: the sentence starts a new chunk.
        context_start: Sentence index where the compared text began (the previous sentence,
            or the current chunk's first sentence).
    """

    index: int
    margin: float
    threshold: float
    split: bool
    context_start: int


def margin_sampling_steps(
    n_sentences: int,
    margin_of: Callable[[int, int], float],
    unit: str = "chunk",
    progress: Callable[[int, int], None] | None = None,
) -> list[MarginStep]:
    """Run margin sampling over sentences ``0 … n-1``.

    Args:
        n_sentences: How many sentences.
        margin_of: ``margin_of(context_start, i)``: the margin for joining sentence ``i`` to
            the text of sentences ``context_start … i-1``.
        unit: ``sentence`` (compare with the previous sentence) or ``chunk`` (with the chunk
            built so far).
        progress: ``progress(done, total)`` after each decision; may raise ``Cancelled``.

    Returns:
        One step per sentence after the first; ``split`` steps start chunks.
    """
    if unit not in ("sentence", "chunk"):
        raise ParameterError(f"unit must be sentence or chunk, got {unit!r}")
    steps: list[MarginStep] = []
    history: list[float] = []
    threshold = 0.0
    chunk_start = 0
    total = max(0, n_sentences - 1)
    if progress is not None:
        progress(0, total)
    for i in range(1, n_sentences):
        ctx = i - 1 if unit == "sentence" else chunk_start
        m = float(margin_of(ctx, i))
        split = m >= threshold
        steps.append(MarginStep(i, m, threshold, split, ctx))
        if split:
            chunk_start = i
        history.append(m)
        if len(history) >= MARGIN_WINDOW:
            threshold = sum(history[-MARGIN_WINDOW:]) / MARGIN_WINDOW
        if progress is not None:
            progress(i, total)
    return steps


def ranges_from_steps(n_sentences: int, steps: Sequence[MarginStep]) -> list[tuple[int, int]]:
    """``(first, last)`` sentence ranges of the chunks margin sampling decided."""
    if n_sentences == 0:
        return []
    starts = [0] + [s.index for s in steps if s.split]
    ends = [b - 1 for b in starts[1:]] + [n_sentences - 1]
    return list(zip(starts, ends))
