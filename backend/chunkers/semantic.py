"""Embedding-based chunkers: ``semantic`` (Kamradt), ``semantic_max`` (size-capped) and ``cluster``.

All three embed spans of the document with the context's embedder (the bundled
all-MiniLM-L6-v2 unless told otherwise) through the on-disk output cache, so a rerun, a new
threshold or a new size cap costs no embedder call: only the list of embedded texts is the
cache key, and it depends on the segmentation and the buffer, never on the threshold.

``semantic`` follows LangChain's ``SemanticChunker`` (Greg Kamradt's notebook): each sentence
is embedded together with ``buffer_size`` neighbours on each side, the cosine distance between
consecutive windows is computed, and a chunk ends after sentence ``i`` when its distance (its
gradient, for ``gradient``) is strictly above a threshold set by ``breakpoint`` and
``amount`` with LangChain's formulas and defaults (:func:`breakpoint_threshold`). Differences
from LangChain, all deliberate: by default the sentences are the document's own
(``backend.text.segment``: abbreviations, CJK full stops and line structure), not the regex
``(?<=[.?!])\\s+`` — ``split=regex`` takes LangChain's regex sentences instead
(:func:`regex_sentence_spans`, as exact spans); a window is the document's text from its first
to its last sentence, not the sentences re-joined with spaces; chunks are exact spans; and an
optional hard ``max_tokens`` splits an oversized chunk at its largest internal distance,
recursively, then a single oversized sentence at clause marks or tokens.

``semantic_max`` is the Chroma report's KamradtModifiedChunker: by default the units are the
report's 50-token pieces of the recursive splitter and the buffer is 3. Its threshold search
has two modes. ``search=cap`` (the default) binary-searches the highest threshold whose chunks
are all at most ``chunk_size`` tokens, as the report's text describes ("a binary search over
discontinuity thresholds such that the largest chunk is shorter than the specified length"),
and always cuts on each side of a unit longer than that. ``search=mean`` is the reference code:
``total_tokens // chunk_size`` cuts wanted, the threshold bisected on [0, 1] until the interval
is 1e-6 wide, the last midpoint kept (:func:`mean_threshold`), and no cap, so chunks average
about ``chunk_size`` tokens but can be several times longer (the report's table shows a mean of
~397 tokens at chunk size 300). The cap is the default because it is what the report states
and what a user setting a size expects. What remains different in ``mean``: windows are the
document's text from the first to the last unit (the reference joins the pieces with spaces),
chunks are exact spans, and with ``chunk_size`` under 50 the pieces are ``chunk_size`` tokens.

``cluster`` is the report's ClusterSemanticChunker: 50-token pieces, embedded; a dynamic
program picks the segmentation maximizing the sum, over chunks, of the pairwise similarities
of the pieces inside each chunk, after subtracting the mean similarity of all pairs of
pieces (as the reference code does: without it, one chunk per maximal size would always
win). ``cap=tokens`` (the default) limits each chunk to ``max_chunk_size`` real tokens and
finds the true optimum. ``cap=pieces`` is the reference code: at most ``max_chunk_size //
piece_size`` pieces a chunk (at least one), and its recursion, which starts every ``dp[i]`` at
0 and replaces it only with a strictly larger total: where no chunk ending at piece ``i`` has
a positive total, that chunk starts at piece 0 — so a document whose first pieces are all
dissimilar gets one first chunk of any length — and no token cap is applied. The default
differs because a token cap is what a user sets (with a count of pieces a chunk holds whatever
its pieces hold: pieces are up to 50 tokens, often fewer) and because of that unbounded first
chunk. In both modes ties go to the shorter last chunk, as in the reference, and chunks
are exact spans (from the first piece's start to the last piece's end) rather than pieces
re-joined with spaces. The objective is evaluated on a band of the similarity matrix only
(chunks never span more pieces than fit), so a 300-page PDF costs O(pieces × band) memory and
time, not pieces².
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from backend.chunkers.base import TOKEN_LENGTHS, Chunker, Param, Search, register
from backend.chunkers.context import ModelContext
from backend.chunkers.recursive import SUBSENTENCE_SEPARATORS, enforce_size, recursive_spans
from backend.curves import Curve, chunk_end_points
from backend.errors import ParameterError
from backend.text.document import Document
from backend.text.segment import strip_span
from backend.tokenizers import SpanCounter

__all__ = [
    "BREAKPOINTS",
    "BREAKPOINT_DEFAULTS",
    "DistanceCurve",
    "SemanticChunker",
    "SemanticMaxChunker",
    "ClusterChunker",
    "as_curve",
    "breakpoint_threshold",
    "capped_threshold",
    "cluster_segmentation",
    "consecutive_distances",
    "forced_cuts",
    "mean_threshold",
    "piece_spans",
    "semantic_distances",
    "semantic_spans",
    "regex_sentence_spans",
    "sentence_units",
    "window_spans",
    "unit_groups",
    "allowed_windows",
]

BREAKPOINTS = ("percentile", "std", "iqr", "gradient")
# LangChain's BREAKPOINT_DEFAULTS (standard_deviation and interquartile under shorter names).
BREAKPOINT_DEFAULTS = {"percentile": 95.0, "std": 3.0, "iqr": 1.5, "gradient": 95.0}
UNITS = ("piece", "sentence")
CLUSTER_CAPS = ("tokens", "pieces")  # cluster's limit: real tokens (ours), or a count of pieces (the reference code)
SEARCHES = ("cap", "mean")  # semantic_max's threshold: a size cap (the report's text), or a mean (its code)
SPLITS = ("document", "regex")  # semantic's sentences: the document's, or LangChain's regex

Spans = list[tuple[int, int]]


# --- the distance curve --------------------------------------------------------------------


def window_spans(units: Sequence[tuple[int, int]], buffer_size: int) -> Spans:
    """Each unit's window: from the start of the unit ``buffer_size`` before to the end of the one after."""
    n = len(units)
    return [(units[max(0, i - buffer_size)][0], units[min(n - 1, i + buffer_size)][1]) for i in range(n)]


def consecutive_distances(vectors: np.ndarray) -> np.ndarray:
    """Cosine distance ``1 - cos`` between each row and the next (rows L2-normalized); length ``n - 1``."""
    v = np.asarray(vectors, dtype=np.float64)
    if len(v) < 2:
        return np.zeros(0)
    return 1.0 - np.einsum("ij,ij->i", v[:-1], v[1:])


def breakpoint_threshold(distances: np.ndarray, breakpoint: str, amount: float | None = None) -> tuple[float, np.ndarray]:
    """LangChain's threshold rule: ``(threshold, scores)``; a chunk ends where ``scores > threshold``.

    Args:
        distances: Consecutive cosine distances (at least one).
        breakpoint: ``percentile`` (the ``amount``-th percentile of the distances), ``std``
            (mean + ``amount`` standard deviations), ``iqr`` (mean + ``amount`` interquartile
            ranges) or ``gradient`` (the ``amount``-th percentile of the distances' gradient;
            the scores are then the gradient).
        amount: The rule's amount; None for LangChain's default (:data:`BREAKPOINT_DEFAULTS`).

    Returns:
        The threshold and the array compared with it. With ``gradient`` and a single distance
        (LangChain returns the two sentences apart) the threshold is ``-inf``.

    Raises:
        ParameterError: unknown rule, no distances, or a percentile outside 0..100.
    """
    if breakpoint not in BREAKPOINT_DEFAULTS:
        raise ParameterError(f"breakpoint must be one of {', '.join(BREAKPOINTS)}, got {breakpoint!r}")
    d = np.asarray(distances, dtype=np.float64)
    if d.size == 0:
        raise ParameterError("a breakpoint threshold needs at least one distance (two sentences)")
    a = BREAKPOINT_DEFAULTS[breakpoint] if amount is None else float(amount)
    if breakpoint in ("percentile", "gradient") and not 0 <= a <= 100:
        raise ParameterError(f"amount ({a:g}) must be a percentile between 0 and 100 for breakpoint={breakpoint}")
    if breakpoint == "percentile":
        return float(np.percentile(d, a)), d
    if breakpoint == "std":
        return float(np.mean(d) + a * np.std(d)), d
    if breakpoint == "iqr":
        q1, q3 = np.percentile(d, [25, 75])
        return float(np.mean(d) + a * (q3 - q1)), d
    if d.size == 1:
        return float("-inf"), d
    grad = np.gradient(d, np.arange(d.size))
    return float(np.percentile(grad, a)), grad


@dataclass(frozen=True, eq=False)
class DistanceCurve:
    """What a semantic chunker cuts on; the page draws ``scores`` against ``threshold``.

    Attributes:
        units: The spans the distances lie between (sentences, or 50-token pieces).
        distances: ``distances[i]`` is the cosine distance between the windows of units ``i``
            and ``i + 1`` (length ``len(units) - 1``).
        scores: What the threshold is compared with: the distances, or their gradient.
        threshold: A chunk ends after unit ``i`` where ``scores[i] > threshold`` (nan with
            fewer than two units).
        rule: ``percentile``, ``std``, ``iqr``, ``gradient``, or ``semantic_max``'s search:
            ``cap`` or ``mean``.
        amount: The rule's amount (the size cap in tokens for ``cap``, the mean chunk length
            aimed at for ``mean``).
        forced: Units that end a chunk whatever the threshold (``cap``: each side of a unit
            longer than the cap on its own).
    """

    units: tuple[tuple[int, int], ...]
    distances: np.ndarray
    scores: np.ndarray
    threshold: float
    rule: str
    amount: float
    forced: tuple[int, ...] = ()

    @property
    def breakpoints(self) -> np.ndarray:
        """Indexes ``i`` of the units that end a chunk (before any size cap)."""
        if self.scores.size == 0:
            return np.zeros(0, dtype=np.int64)
        cut = self.scores > self.threshold
        cut[list(self.forced)] = True
        return np.flatnonzero(cut)


def _unit_distances(text: str, units: Sequence[tuple[int, int]], context: ModelContext, buffer_size: int) -> np.ndarray:
    if len(units) < 2:
        return np.zeros(0)
    windows = window_spans(units, buffer_size)
    return consecutive_distances(context.embed([text[s:e] for s, e in windows]))


_LANGCHAIN_SENTENCE = re.compile(r"(?<=[.?!])\s+")


def regex_sentence_spans(text: str) -> Spans:
    """LangChain SemanticChunker's sentences, ``re.split(r"(?<=[.?!])\\s+", text)``, as spans of ``text``.

    The parts between the matches, stripped of the whitespace the regex leaves at their ends
    (the text's own leading and trailing whitespace, and what precedes a separator that is
    not after ``.``, ``?`` or ``!``); parts that are only whitespace (LangChain keeps the
    empty string after a final ``". "``) are left out.
    """
    bounds, pos = [], 0
    for m in _LANGCHAIN_SENTENCE.finditer(text):
        bounds.append((pos, m.start()))
        pos = m.end()
    bounds.append((pos, len(text)))
    spans = [strip_span(text, s, e) for s, e in bounds]
    return [(s, e) for s, e in spans if e > s]


def sentence_units(doc: Document, split: str = "document") -> Spans:
    """``semantic``'s sentences: the document's own (``document``) or LangChain's regex ones (``regex``)."""
    if split == "regex":
        return regex_sentence_spans(doc.text)
    if split != "document":
        raise ParameterError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return [(s.start, s.end) for s in doc.sentences]


def semantic_distances(
    doc: Document,
    context: ModelContext | None = None,
    buffer_size: int = 1,
    breakpoint: str = "percentile",
    amount: float | None = None,
    split: str = "document",
) -> DistanceCurve:
    """The Kamradt distance curve of ``doc``'s sentences and LangChain's threshold on it.

    Args:
        doc: The document.
        context: The embedder and cache (default: the bundled embedder, the default cache).
            Embeddings come from the cache when this embedder saw these windows before, so
            changing ``breakpoint`` or ``amount`` never calls the embedder.
        buffer_size: Neighbouring sentences on each side embedded with each sentence.
        breakpoint: The threshold rule (see :func:`breakpoint_threshold`).
        amount: Its amount; None for LangChain's default.
        split: Which sentences (see :func:`sentence_units`).
    """
    units = tuple(sentence_units(doc, split))
    distances = _unit_distances(doc.text, units, context or ModelContext(), buffer_size)
    a = BREAKPOINT_DEFAULTS.get(breakpoint, 0.0) if amount is None else float(amount)
    if distances.size == 0:
        breakpoint_threshold(np.zeros(1), breakpoint, a)  # still reject a bad rule or amount
        return DistanceCurve(units, distances, distances, float("nan"), breakpoint, a)
    threshold, scores = breakpoint_threshold(distances, breakpoint, a)
    return DistanceCurve(units, distances, np.asarray(scores, dtype=np.float64), threshold, breakpoint, a)


# --- from breakpoints to capped spans --------------------------------------------------------


def unit_groups(n_units: int, cuts: np.ndarray) -> list[tuple[int, int]]:
    """Unit index ranges ``(a, b)`` (inclusive) ending at each cut and at the last unit."""
    ends = [int(c) for c in cuts if 0 <= c < n_units - 1] + [n_units - 1]
    out, a = [], 0
    for b in ends:
        out.append((a, b))
        a = b + 1
    return out


def _capped(
    text: str,
    units: Sequence[tuple[int, int]],
    distances: np.ndarray,
    groups: Sequence[tuple[int, int]],
    counter: SpanCounter,
    cap: int | None,
) -> list[tuple[int, int, int]]:
    """Spans of the unit groups; with ``cap``, a group over it is split at its largest internal distance.

    The split recurses until every group fits or is one unit; a unit over the cap is split
    at clause marks, then words, then tokens (:func:`~backend.chunkers.recursive.enforce_size`).
    """
    out: list[tuple[int, int, int]] = []
    stack = list(reversed(groups))
    while stack:
        a, b = stack.pop()
        s, e = units[a][0], units[b][1]
        n = counter.count(s, e)
        if cap is None or n <= cap:
            out.append((s, e, n))
        elif a == b:
            out.extend(_fit(text, s, e, counter, cap))
        else:
            k = a + int(np.argmax(distances[a:b]))  # the first of equal maxima
            stack.append((k + 1, b))
            stack.append((a, k))
    return out


def _fit(text: str, s: int, e: int, counter: SpanCounter, cap: int) -> list[tuple[int, int, int]]:
    """One unit over ``cap`` split at clause marks, words, then tokens; then characters for what still does not fit.

    The last step is for tiny caps only: a token window stripped of its leading space can
    count one token more than it did inside the text (``" burned"`` is one token, ``"burned"`` two).
    """
    out: list[tuple[int, int, int]] = []
    for a, b, n in enforce_size(text, [(s, e)], counter.tokenizer, cap, SUBSENTENCE_SEPARATORS, counter):
        if n <= cap or b - a == 1:
            out.append((a, b, n))
            continue
        i = a
        while i < b:
            j = i + 1
            while j < b and counter.count(i, j + 1) <= cap:
                j += 1
            x, y = strip_span(text, i, j)
            if y > x:
                out.append((x, y, counter.count(x, y)))
            i = j
    return out


def semantic_spans(
    text: str, curve: DistanceCurve, counter: SpanCounter, max_tokens: int | None = None
) -> list[tuple[int, int, int]]:
    """``(start, end, tokens)`` of the chunks a curve's breakpoints make, each at most ``max_tokens`` if given.

    No model call: the page re-chunks with this when the threshold moves.
    """
    if not curve.units:
        return []
    groups = unit_groups(len(curve.units), curve.breakpoints)
    return _capped(text, curve.units, curve.distances, groups, counter, max_tokens)


def forced_cuts(units: Sequence[tuple[int, int]], counter: SpanCounter, cap: int) -> tuple[int, ...]:
    """Boundaries on each side of every unit longer than ``cap`` on its own (it is a chunk, or several, alone)."""
    counts = counter.count_many(units)
    n = len(units)
    cuts = {j for i, c in enumerate(counts) if c > cap for j in (i - 1, i) if 0 <= j < n - 1}
    return tuple(sorted(cuts))


def capped_threshold(
    units: Sequence[tuple[int, int]],
    distances: np.ndarray,
    counter: SpanCounter,
    cap: int,
    forced: Sequence[int] = (),
) -> float:
    """The largest threshold whose chunks of two or more units all fit in ``cap`` tokens.

    Candidates are ``-inf`` (cut everywhere) and every distinct distance (cut where the
    distance is strictly above it); a higher threshold means fewer cuts and longer chunks, so
    the answer is found by binary search. Boundaries in ``forced`` are always cut (see
    :func:`forced_cuts`: without them, one sentence over the cap would force the threshold
    below both its neighbouring distances and shred the rest of the document).
    """
    d = np.asarray(distances, dtype=np.float64)
    candidates = np.concatenate([[-np.inf], np.unique(d)])
    n = len(units)
    always = np.zeros(d.size, dtype=bool)
    always[list(forced)] = True

    def fits(t: float) -> bool:
        groups = [(a, b) for a, b in unit_groups(n, np.flatnonzero((d > t) | always)) if b > a]
        counts = counter.count_many([(units[a][0], units[b][1]) for a, b in groups])
        return all(c <= cap for c in counts)

    lo, hi = 0, len(candidates) - 1
    if fits(candidates[hi]):
        return float(candidates[hi])
    while hi - lo > 1:  # invariant: candidates[lo] fits, candidates[hi] does not
        mid = (lo + hi) // 2
        if fits(candidates[mid]):
            lo = mid
        else:
            hi = mid
    return float(candidates[lo])


def mean_threshold(distances: np.ndarray, total_tokens: int, avg_chunk_size: int) -> float:
    """The reference code's threshold for chunks of ``avg_chunk_size`` tokens on average (no cap).

    ``total_tokens // avg_chunk_size`` is the number of cuts wanted; the threshold is bisected
    on [0, 1] until the interval is at most 1e-6 wide: where more distances than that are
    strictly above the midpoint, the midpoint becomes the lower end, otherwise the upper. The
    answer is the last midpoint, as in the reference (not the end of the interval that holds
    the wanted count), so the cuts (``distances > threshold``) can be one or two more or fewer
    than wanted when distances are close; distances outside [0, 1] are always or never cut.
    """
    d = np.asarray(distances, dtype=np.float64)
    cuts = total_tokens // avg_chunk_size
    lower, upper = 0.0, 1.0
    threshold = 0.5
    while upper - lower > 1e-6:
        threshold = (upper + lower) / 2.0
        if int(np.sum(d > threshold)) > cuts:
            lower = threshold
        else:
            upper = threshold
    return threshold


_RULE_TEXT = {
    "percentile": "{a:g}th percentile of the distances",
    "std": "mean + {a:g} standard deviations",
    "iqr": "mean + {a:g} interquartile ranges",
    "gradient": "{a:g}th percentile of the gradient",
    "cap": "the largest that keeps chunks within {a:g} tokens",
    "mean": "bisection for {a:g}-token chunks on average (the reference code)",
}


def as_curve(distance: DistanceCurve, spans: Sequence[Sequence[int]], unit: str) -> Curve:
    """A :class:`DistanceCurve` as the app's :class:`~backend.curves.Curve`: one point per gap between units.

    Point ``i`` is the gap after unit ``i``; its value is what the threshold was compared with
    (the distance, or its gradient); ``spans`` (the chunker's chunks) give the boundaries.
    """
    points = distance.units[:-1]
    threshold = distance.threshold if math.isfinite(distance.threshold) else None
    gradient = distance.rule == "gradient"
    return Curve(
        points,
        np.asarray(distance.scores, dtype=np.float64),
        x_label=unit,
        y_label="gradient of the cosine distance" if gradient else "cosine distance to the next window",
        point_label=f"gap after {unit}",
        boundaries=chunk_end_points(points, spans),
        threshold=threshold,
        threshold_label="threshold: " + _RULE_TEXT[distance.rule].format(a=distance.amount),
    )


# --- cluster ---------------------------------------------------------------------------------


def piece_spans(text: str, counter: SpanCounter, piece_size: int) -> Spans:
    """The report's pieces: the recursive splitter at ``piece_size`` tokens, no overlap."""
    spans = recursive_spans(text, counter.tokenizer, piece_size, 0, counter=counter)
    return [(s, e) for s, e, _n in enforce_size(text, spans, counter.tokenizer, piece_size, counter=counter)]


def _band_rewards(vectors: np.ndarray, width: int) -> np.ndarray:
    """``R[i, w]``: the reward of the chunk of pieces ``i-w..i`` (0 where ``w > i``).

    The reward is the sum of the mean-centered similarity matrix over the chunk's block with
    a zero diagonal, i.e. twice the sum over its pairs of ``cos(p, q) - mean``, where ``mean``
    is the mean similarity over all pairs of pieces of the document.
    """
    e = np.asarray(vectors, dtype=np.float64)
    n = len(e)
    total = e.sum(axis=0)
    pairs = n * (n - 1) / 2
    mean = (float(total @ total) - float(np.einsum("ij,ij->", e, e))) / 2 / pairs if pairs else 0.0
    # B[j, t] = sim(j, j+t) - mean for t >= 1; C[j, d] = sum of B[j, 1..d].
    band = np.zeros((n, width))
    for t in range(1, min(width, n)):
        band[: n - t, t] = np.einsum("ij,ij->i", e[: n - t], e[t:]) - mean
    c = np.cumsum(band, axis=1)
    # A[i, u] = C[i-u, u]: row i of the chunk ending at i, read back from its last piece.
    rows = np.arange(n)[:, None] - np.arange(width)[None, :]
    a = np.where(rows >= 0, c[np.clip(rows, 0, None), np.arange(width)[None, :]], 0.0)
    return 2.0 * np.cumsum(a, axis=1)


def cluster_segmentation(vectors: np.ndarray, allowed: np.ndarray, from_zero: bool = False) -> list[tuple[int, int]]:
    """The segmentation of pieces into consecutive chunks with the largest total reward.

    Args:
        vectors: One L2-normalized embedding per piece.
        allowed: Boolean ``(n, width)``: ``allowed[i, w]`` says the chunk of pieces
            ``i-w..i`` may be used. A single piece (``w = 0``) is always allowed.
        from_zero: The reference code's recursion instead of the optimum: the best total up
            to piece ``i`` starts at 0 and only a candidate strictly above it replaces it, so
            when no allowed chunk ending at ``i`` (plus the best total before it) is positive,
            the chunk ending at ``i`` starts at piece 0, whatever ``allowed`` says and however
            long it is.

    Returns:
        Inclusive piece ranges ``(first, last)`` in order. The reward of a chunk is described
        in :func:`_band_rewards`; ties go to the shorter last chunk.
    """
    n = len(vectors)
    if n == 0:
        return []
    width = max(1, allowed.shape[1])
    rewards = _band_rewards(vectors, width)
    best = np.zeros(n + 1)  # best[i]: the best total of pieces 0..i-1
    start = np.zeros(n, dtype=np.int64)
    for i in range(n):
        m = min(width, i + 1)
        vals = rewards[i, :m] + best[i + 1 - m : i + 1][::-1]
        ok = allowed[i, :m].copy()
        ok[0] = True
        vals = np.where(ok, vals, -np.inf)
        w = int(np.argmax(vals))  # the first of equal maxima: the shortest chunk
        if from_zero and not vals[w] > 0:
            best[i + 1], start[i] = 0.0, 0  # the reference's dp[i] = 0, segmentation[i] = 0
            continue
        best[i + 1] = vals[w]
        start[i] = i - w
    out = []
    i = n - 1
    while i >= 0:
        out.append((int(start[i]), i))
        i = int(start[i]) - 1
    out.reverse()
    return out


def allowed_windows(pieces: Spans, counter: SpanCounter, cap: int) -> np.ndarray:
    """``allowed[i, w]``: the span of pieces ``i-w..i`` counts at most ``cap`` tokens alone.

    Real counts are taken for every chunk whose pieces' own counts sum to at most twice the
    cap (whitespace between pieces and tokens merged across them make the real count differ
    from the sum, never by a factor of two); longer ones are not allowed.
    """
    n = len(pieces)
    own = np.asarray(counter.count_many(pieces), dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(own)])
    # First piece j of the longest candidate ending at i: prefix[i+1] - prefix[j] <= 2 cap.
    first = np.searchsorted(prefix, prefix[1:] - 2 * cap, side="left")
    first = np.minimum(first, np.arange(n))
    width = int((np.arange(n) - first).max()) + 1 if n else 1
    ii, ww = [], []
    for w in range(1, width):
        idx = np.flatnonzero(np.arange(n) - first >= w)
        ii.append(idx)
        ww.append(np.full(idx.size, w))
    allowed = np.zeros((n, width), dtype=bool)
    allowed[:, 0] = True
    if ii:
        i_all, w_all = np.concatenate(ii), np.concatenate(ww)
        starts = np.asarray(pieces, dtype=np.int64)
        spans = np.stack([starts[i_all - w_all, 0], starts[i_all, 1]], axis=1)
        counts = np.asarray(counter.count_many(spans), dtype=np.int64)
        allowed[i_all, w_all] = counts <= cap
    return allowed


# --- the chunkers ----------------------------------------------------------------------------

_BUFFER = Param("buffer_size", "int", 1, "Neighbouring units on each side embedded with each unit.", min=0, max=20)


@register
class SemanticChunker(Chunker):
    """Kamradt semantic chunking (LangChain's SemanticChunker): cut where consecutive sentence windows drift apart.

    Each sentence is embedded with ``buffer_size`` neighbours on each side; a chunk ends after
    a sentence whose window's cosine distance to the next window is strictly above the
    threshold. ``breakpoint`` picks how the threshold is set from all the distances:
    ``percentile`` (the ``amount``-th percentile), ``std`` (mean + ``amount`` standard
    deviations), ``iqr`` (mean + ``amount`` interquartile ranges) or ``gradient`` (the
    ``amount``-th percentile of the distances' gradient). ``amount=-1`` takes LangChain's
    default for the rule (95, 3, 1.5, 95); a larger amount gives fewer, longer chunks.
    The threshold is relative to the document, so longer documents get longer chunks; set
    ``max_tokens`` for a hard cap (an oversized chunk is split at its largest internal
    distances). ``split`` picks the sentences: the document's own (``document``, the default)
    or LangChain's, the text split at whitespace after ``.``, ``?`` or ``!`` (``regex``).
    """

    name = "semantic"
    family = "semantic"
    needs = ("embedder",)
    length_param = "amount"
    params = (
        Param("breakpoint", "str", "percentile", "How the threshold is set from the distances (LangChain's rules).",
              choices=BREAKPOINTS),
        Param("amount", "float", -1.0,
              "The rule's amount: a percentile for percentile and gradient, a multiplier for std and iqr; "
              "-1 for LangChain's default (95, 3, 1.5, 95). Larger, fewer and longer chunks.",
              # Tuned under the default percentile rule: from half the gaps cut (chunks of ~2 sentences)
              # to the top 2% (LangChain's 95 is on the grid). The rule and buffer_size stay put, so
              # every point reads the same cached embeddings.
              min=-1, max=100, search=Search(low=50, high=98, step=3)),
        _BUFFER,
        Param("max_tokens", "int", 0, "Hard cap on chunk tokens (0: none).", min=0, max=100_000,
              search=Search(choices=(0, 256, 512, 1024))),
        Param("split", "str", "document", "document: the document's own sentences; regex: LangChain's "
              "sentences, the text split at whitespace after . ? or ! (the reference code).", choices=SPLITS),
    )

    def validate(self) -> None:
        """Reject an amount between -1 and 0, and a percentile amount above 100."""
        super().validate()
        amount = self.values["amount"]
        if amount != -1 and amount < 0:
            raise ParameterError(f"semantic: amount ({amount:g}) must be -1 (the rule's default) or at least 0")

    @property
    def amount(self) -> float:
        """The effective amount (LangChain's default for the rule when ``amount`` is -1)."""
        a = self.values["amount"]
        return BREAKPOINT_DEFAULTS[self.values["breakpoint"]] if a == -1 else float(a)

    def distance_curve(self, doc: Document) -> DistanceCurve:
        """This configuration's distance curve and threshold of ``doc`` (embeddings cached)."""
        v = self.values
        return semantic_distances(doc, self.context, v["buffer_size"], v["breakpoint"], self.amount, v["split"])

    def _spans(self, doc: Document, distance: DistanceCurve) -> list[tuple[int, int, int]]:
        cap = self.values["max_tokens"] or None
        return semantic_spans(doc.text, distance, SpanCounter(self.tokenizer, doc.text), cap)

    def _empty(self, doc: Document) -> bool:
        return not (doc.sentences if self.values["split"] == "document" else doc.text.strip())

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        if self._empty(doc):
            return []
        return self._spans(doc, self.distance_curve(doc))

    def curve(self, doc: Document, context: ModelContext | None = None) -> Curve:
        """The distances (or their gradient) between sentence windows, the threshold, and the chunk ends."""
        if context is not None:
            self.context = context
        if self._empty(doc):
            empty = np.zeros(0)
            return as_curve(DistanceCurve((), empty, empty, float("nan"), self.values["breakpoint"], 0.0), [], "sentence")
        distance = self.distance_curve(doc)
        return as_curve(distance, self._spans(doc, distance), "sentence")


@register
class SemanticMaxChunker(Chunker):
    """Size-capped semantic chunking (the Chroma report's KamradtModifiedChunker): no chunk over ``chunk_size``.

    The units (by default the report's 50-token pieces of the recursive splitter, or the
    document's sentences) are embedded with ``buffer_size`` neighbours on each side (3 in the
    report), and the distance threshold is binary-searched: the highest threshold whose
    chunks all fit in ``chunk_size`` tokens. A single unit longer than that is split at
    clause marks, words, then tokens. ``search=mean`` is the report's code instead: the
    threshold bisected for ``total tokens // chunk_size`` cuts, so chunks average about
    ``chunk_size`` tokens with no cap (some are several times longer).
    """

    name = "semantic_max"
    family = "semantic"
    needs = ("embedder",)
    length_param = "chunk_size"
    params = (
        Param("chunk_size", "int", 400, "Maximum tokens per chunk.", min=1, max=100_000, search=TOKEN_LENGTHS),
        Param("unit", "str", "piece", "piece: 50-token pieces of the recursive splitter (the report); "
              "sentence: the document's sentences.", choices=UNITS),
        Param("buffer_size", "int", 3, "Neighbouring units on each side embedded with each unit.", min=0, max=20),
        Param("search", "str", "cap", "cap: the highest threshold that keeps every chunk within chunk_size tokens; "
              "mean: the reference code's bisection for chunk_size tokens per chunk on average (no cap).",
              choices=SEARCHES),
    )

    def units(self, doc: Document, counter: SpanCounter) -> Spans:
        """The spans whose windows are embedded."""
        if self.values["unit"] == "sentence":
            return [(s.start, s.end) for s in doc.sentences]
        return piece_spans(doc.text, counter, min(50, self.values["chunk_size"]))

    def distance_curve(self, doc: Document, counter: SpanCounter | None = None) -> DistanceCurve:
        """The distance curve of ``doc`` and the threshold the search found (rule ``cap`` or ``mean``)."""
        counter = counter or SpanCounter(self.tokenizer, doc.text)
        units = tuple(self.units(doc, counter))
        distances = _unit_distances(doc.text, units, self.context, self.values["buffer_size"])
        size, rule = self.values["chunk_size"], self.values["search"]
        if not distances.size:
            return DistanceCurve(units, distances, distances, float("nan"), rule, float(size))
        if rule == "mean":
            threshold = mean_threshold(distances, sum(counter.count_many(units)), size)
            return DistanceCurve(units, distances, distances, threshold, rule, float(size))
        forced = forced_cuts(units, counter, size)
        threshold = capped_threshold(units, distances, counter, size, forced)
        return DistanceCurve(units, distances, distances, threshold, rule, float(size), forced)

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        return self._cut(doc)[1]

    def _cut(self, doc: Document) -> tuple[DistanceCurve, list[tuple[int, int, int]]]:
        counter = SpanCounter(self.tokenizer, doc.text)
        curve = self.distance_curve(doc, counter)
        cap = self.values["chunk_size"] if self.values["search"] == "cap" else None
        return curve, semantic_spans(doc.text, curve, counter, cap)

    def curve(self, doc: Document, context: ModelContext | None = None) -> Curve:
        """The distances between unit windows, the threshold the search found, and the chunk ends."""
        if context is not None:
            self.context = context
        distance, spans = self._cut(doc)
        return as_curve(distance, spans, self.values["unit"])


@register
class ClusterChunker(Chunker):
    """ClusterSemanticChunker (the Chroma report): chunks that maximize the similarity of the pieces inside them.

    The text is cut into pieces of at most ``piece_size`` tokens by the recursive splitter,
    each piece is embedded, and dynamic programming finds the segmentation into chunks of at
    most ``max_chunk_size`` tokens that maximizes the sum, over chunks, of the pairwise cosine
    similarities of their pieces minus the document's mean similarity (the reference code's
    normalization). Globally optimal, unlike the greedy Kamradt chunkers. ``cap=pieces`` is the
    report's code instead: at most ``max_chunk_size // piece_size`` pieces a chunk, whatever
    their tokens, and its recursion from zero, which can leave one first chunk of any length.
    """

    name = "cluster"
    family = "semantic"
    needs = ("embedder",)
    length_param = "max_chunk_size"
    params = (
        Param("max_chunk_size", "int", 400, "Maximum tokens per chunk.", min=1, max=100_000, search=TOKEN_LENGTHS),
        Param("piece_size", "int", 50, "Maximum tokens per embedded piece (the report: 50).", min=1, max=10_000),
        Param("cap", "str", "tokens", "tokens: no chunk over max_chunk_size tokens, the optimal segmentation; "
              "pieces: the reference code's limit of max_chunk_size // piece_size pieces and its recursion "
              "(no token cap; the first chunk can be of any length).", choices=CLUSTER_CAPS),
    )

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        cap = self.values["max_chunk_size"]
        size = min(self.values["piece_size"], cap)
        counter = SpanCounter(self.tokenizer, doc.text)
        pieces = piece_spans(doc.text, counter, size)
        if not pieces:
            return []
        vectors = self.context.embed([doc.text[s:e] for s, e in pieces])
        reference = self.values["cap"] == "pieces"  # a count of pieces, the dp from zero, no token cap
        if reference:
            allowed, limit = np.ones((len(pieces), max(1, cap // size)), dtype=bool), None
        else:
            allowed, limit = allowed_windows(pieces, counter, cap), cap
        segments = cluster_segmentation(vectors, allowed, from_zero=reference)
        return _capped(doc.text, pieces, np.zeros(len(pieces)), segments, counter, limit)
