"""Character-span retrieval metrics (the Chroma report's), excerpt search and chunking agreement.

The metrics are computed on character ranges ``(start, end)`` of one document, with the
arithmetic of the report's reference code (``chunking_evaluation``'s ``base_evaluation``),
so that numbers match it for the same chunks and retrievals:

- numerator: the characters of the union of the retrieved chunks that fall in the union of
  the excerpts, ``|∪R ∩ ∪E|`` (an excerpt character retrieved twice counts once);
- **recall** ``= numerator / Σ|E_j|``: the excerpt lengths are summed, not united, so two
  overlapping excerpts count their shared characters twice, as in the reference;
- **precision** ``= numerator / Σ|R_i|``: *every* retrieved character counts, overlapping
  chunks twice and chunks of other documents too (``other_chars``);
- **IoU** ``= numerator / (Σ|R_i| + Σ_j |E_j \\ ∪R|)``: precision's denominator plus the
  excerpt characters no retrieved chunk covers;
- **precision-Ω**: precision when every chunk that contains excerpt characters is retrieved,
  with the *union* of those chunks in the denominator: ``|∪H ∩ ∪E| / |∪H ∪ ∪E|``, ``H`` the
  chunks that meet an excerpt.

"Meets" is the reference's closed-interval test ``max(starts) <= min(ends)``: a chunk that ends
exactly where an excerpt starts counts as containing it (it adds to precision-Ω's
denominator and to the number of chunks ``retrieve=-1`` asks for). That quirk is kept on
purpose: it is what the published numbers were computed with. A ratio whose denominator is 0
(where the reference would divide by zero) is 0.0.

Where a chunk is. The reference does not keep the chunker's offsets: it searches each chunk's
text in the corpus (``rigorous_document_search``), which first drops one trailing ``.`` and
then takes the *first* occurrence. A chunk ending in a period is therefore scored one
character short (an excerpt ending there loses its period from the numerator), and a chunk
whose text also occurs earlier is scored at that earlier place. :func:`reference_chunk_spans`
reproduces this; :func:`~backend.retrieval.evaluate.evaluate` scores on those spans by default
(``chunk_spans="reference"``) and on the chunker's exact spans with ``chunk_spans="exact"``.

Excerpt search (:func:`find_excerpt`) is exact first, then whitespace-insensitive through an
offset map of the non-whitespace characters, so a match found either way has exact offsets
into the document text. Chunking agreement (:func:`boundary_iou`,
:func:`span_overlap_similarity`) and retrieval coverage (:func:`retrieval_coverage`) feed the
heat maps. numpy only.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np

from backend.chunking import Chunking
from backend.errors import ParameterError

__all__ = [
    "Range",
    "SpanScores",
    "RetrievalScores",
    "ExcerptMatch",
    "ExcerptFinder",
    "union_ranges",
    "reference_chunk_spans",
    "span_scores",
    "containing_chunks",
    "precision_omega",
    "score_retrieval",
    "find_excerpt",
    "boundary_iou",
    "span_overlap_similarity",
    "agreement_matrices",
    "retrieval_coverage",
    "coverage_profile",
]

Range = tuple[int, int]


@dataclass(frozen=True)
class SpanScores:
    """Recall, precision and IoU of one question's retrieval (fractions in 0..1)."""

    recall: float
    precision: float
    iou: float


@dataclass(frozen=True)
class RetrievalScores:
    """All four of the report's metrics for one query (fractions in 0..1)."""

    recall: float
    precision: float
    precision_omega: float
    iou: float

    def to_json(self) -> dict[str, float]:
        """``{"recall", "precision", "precision_omega", "iou"}``."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ExcerptMatch:
    """Where an excerpt was found: ``text[start:end]``; ``exact`` is False for a whitespace-insensitive match."""

    start: int
    end: int
    exact: bool


# --- range arithmetic ------------------------------------------------------------------------


def union_ranges(ranges: Iterable[Range]) -> list[Range]:
    """The union of ``ranges`` as sorted, disjoint, non-touching ranges (empty ranges dropped)."""
    merged: list[list[int]] = []
    for s, e in sorted((int(s), int(e)) for s, e in ranges if e > s):
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1][1] = e
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def reference_chunk_spans(text: str, spans: Sequence[Range]) -> list[Range]:
    """Where the reference's chunk search places each chunk ``text[s:e]`` (see the module doc).

    One trailing ``.`` is dropped from the chunk's text, which is then looked up from the start
    of ``text``: the first occurrence wins, so the result starts at or before ``s``. (The
    reference's whitespace-insensitive and fuzzy fallbacks never run: a chunk's text is always
    in its document.) A chunk that is just ``"."`` becomes the empty range at 0, as there.

    Args:
        text: The document (corpus) text.
        spans: The chunks' exact ``(start, end)`` ranges in ``text``.
    """
    out: list[Range] = []
    seen: dict[str, int] = {}
    for s, e in spans:
        target = text[s:e]
        if target.endswith("."):
            target = target[:-1]
        at = seen.get(target)
        if at is None:
            # Only text before the chunk can hold an earlier occurrence; the chunk itself is the fallback.
            found = text.find(target, 0, s + len(target) - 1) if target else 0
            at = seen[target] = s if found < 0 else found
        out.append((at, at + len(target)))
    return out


def _total(ranges: Iterable[Range]) -> int:
    return sum(max(0, int(e) - int(s)) for s, e in ranges)


def _intersection_length(a: Sequence[Range], b: Sequence[Range]) -> int:
    """Length of the intersection of two unions (each sorted and disjoint)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _uncovered_length(r: Range, union: Sequence[Range]) -> int:
    """Characters of ``r`` outside ``union`` (sorted and disjoint)."""
    s, e = r
    if e <= s:
        return 0
    return (e - s) - _intersection_length([(s, e)], union)


def _ratio(num: int, den: int) -> float:
    return num / den if den > 0 else 0.0


def _check_excerpts(excerpts: Sequence[Range]) -> None:
    if not excerpts:
        raise ParameterError("a question needs at least one excerpt")


# --- the report's metrics --------------------------------------------------------------------


def span_scores(retrieved: Sequence[Range], excerpts: Sequence[Range], *, other_chars: int = 0) -> SpanScores:
    """Recall, precision and IoU of one question, as the reference computes them.

    Args:
        retrieved: The retrieved chunks' ranges in the question's document, in any order
            (overlapping chunks allowed).
        excerpts: The question's excerpt ranges in that document.
        other_chars: Characters retrieved from other documents (chunks of other corpora
            returned for this question): they count in precision's and IoU's denominators.

    Raises:
        ParameterError: no excerpt.
    """
    _check_excerpts(excerpts)
    r_union = union_ranges(retrieved)
    numerator = _intersection_length(r_union, union_ranges(excerpts))
    retrieved_chars = _total(retrieved) + int(other_chars)
    unused = sum(_uncovered_length(e, r_union) for e in excerpts)
    return SpanScores(
        recall=_ratio(numerator, _total(excerpts)),
        precision=_ratio(numerator, retrieved_chars),
        iou=_ratio(numerator, retrieved_chars + unused),
    )


def containing_chunks(chunks: Sequence[Range], excerpts: Sequence[Range]) -> list[int]:
    """Indices of the chunks that meet an excerpt (the reference's closed-interval test, see the module doc).

    Their count is how many chunks ``retrieve=-1`` retrieves for the question.
    """
    out = []
    for i, (cs, ce) in enumerate(chunks):
        if any(max(cs, es) <= min(ce, ee) for es, ee in excerpts):
            out.append(i)
    return out


def precision_omega(chunks: Sequence[Range], excerpts: Sequence[Range]) -> float:
    """Precision-Ω: the precision of retrieving exactly the chunks that meet an excerpt.

    Args:
        chunks: Every chunk of the question's document.
        excerpts: The question's excerpts.

    Raises:
        ParameterError: no excerpt.
    """
    _check_excerpts(excerpts)
    hit = [chunks[i] for i in containing_chunks(chunks, excerpts)]
    numerator = _intersection_length(union_ranges(hit), union_ranges(excerpts))
    return _ratio(numerator, _total(union_ranges([*hit, *excerpts])))


def score_retrieval(
    retrieved: Sequence[Range], chunks: Sequence[Range], excerpts: Sequence[Range], *, other_chars: int = 0
) -> RetrievalScores:
    """Recall, precision, precision-Ω and IoU of one query (e.g. a live query the user marked).

    Args:
        retrieved: The retrieved chunks' ranges in the document.
        chunks: Every chunk of the chunking (for precision-Ω).
        excerpts: The true answer's ranges.
        other_chars: Characters retrieved from other documents (see :func:`span_scores`).

    Raises:
        ParameterError: no excerpt.
    """
    s = span_scores(retrieved, excerpts, other_chars=other_chars)
    return RetrievalScores(s.recall, s.precision, precision_omega(chunks, excerpts), s.iou)


# --- excerpt search --------------------------------------------------------------------------

_WS_CODES = np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.uint32)  # all of str.isspace
_WS_RUN = re.compile(r"\s+")  # re's \s on str is str.isspace, the same set


class ExcerptFinder:
    """Finds excerpts in one text; build once and reuse for many excerpts (the offset map is built once).

    Example:
        >>> ExcerptFinder("a  b\\nc").find("a b c")
        ExcerptMatch(start=0, end=6, exact=False)
    """

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def _stripped(self) -> tuple[str, np.ndarray]:
        """The text without whitespace, and each kept character's offset in the text."""
        codes = np.frombuffer(self.text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        positions = np.flatnonzero(~np.isin(codes, _WS_CODES))
        return _WS_RUN.sub("", self.text), positions

    def find(self, excerpt: str, start: int = 0) -> ExcerptMatch | None:
        """The first occurrence of ``excerpt`` at or after ``start``: exact, else ignoring whitespace.

        Whitespace-insensitive means equal once every whitespace character is removed from
        both (so ``"a b"`` also finds ``"a\\n  b"`` and ``"ab"``); the match then runs from the
        first to the last non-whitespace character it covers. Case and every other character
        must match. None when not found or when ``excerpt`` is blank.
        """
        if not excerpt or excerpt.isspace():
            return None
        at = self.text.find(excerpt, start)
        if at >= 0:
            return ExcerptMatch(at, at + len(excerpt), True)
        needle = _WS_RUN.sub("", excerpt)
        stripped, positions = self._stripped
        from_index = int(np.searchsorted(positions, start)) if start else 0
        i = stripped.find(needle, from_index)
        if i < 0:
            return None
        return ExcerptMatch(int(positions[i]), int(positions[i + len(needle) - 1]) + 1, False)


def find_excerpt(text: str, excerpt: str) -> ExcerptMatch | None:
    """Where ``excerpt`` occurs in ``text``: exactly, else whitespace-insensitively (see :class:`ExcerptFinder`).

    For many excerpts of one text, build an :class:`ExcerptFinder` once instead.
    """
    return ExcerptFinder(text).find(excerpt)


# --- agreement between chunkings -------------------------------------------------------------


def boundary_iou(a: Iterable[int], b: Iterable[int], tolerance: int = 0) -> float:
    """IoU of two boundary sets, boundaries within ``tolerance`` characters counting as equal.

    Boundaries are matched one to one (greedily from the left, which is optimal on a line):
    ``matched / (|A| + |B| - matched)``. Two empty sets agree fully (1.0).

    Raises:
        ParameterError: a negative tolerance.
    """
    if tolerance < 0:
        raise ParameterError(f"tolerance ({tolerance}) must be at least 0")
    xs, ys = sorted(set(int(x) for x in a)), sorted(set(int(y) for y in b))
    if not xs and not ys:
        return 1.0
    i = j = matched = 0
    while i < len(xs) and j < len(ys):
        if abs(xs[i] - ys[j]) <= tolerance:
            matched += 1
            i += 1
            j += 1
        elif xs[i] < ys[j]:
            i += 1
        else:
            j += 1
    return matched / (len(xs) + len(ys) - matched)


def _best_overlaps(a: Sequence[Range], b: Sequence[Range]) -> float:
    """Length-weighted mean over ``a`` of each span's best IoU with a span of ``b``."""
    order = sorted(b)
    starts = [s for s, _ in order]
    max_end = np.maximum.accumulate([e for _, e in order]).tolist() if order else []
    weighted = total = 0.0
    for s, e in a:
        if e <= s:
            continue
        best = 0.0
        j = bisect.bisect_left(starts, e) - 1
        while j >= 0 and max_end[j] > s:  # spans further left all end at or before s
            bs, be = order[j]
            inter = min(e, be) - max(s, bs)
            if inter > 0:
                best = max(best, inter / (max(e, be) - min(s, bs)))
            j -= 1
        weighted += best * (e - s)
        total += e - s
    return weighted / total if total else 0.0


def span_overlap_similarity(a: Sequence[Range], b: Sequence[Range]) -> float:
    """How alike two chunkings' spans are, in 0..1 (1.0 for identical spans).

    Each span's best IoU with a span of the other chunking, averaged weighted by span
    length, in both directions, and the two directions averaged. Two empty chunkings give
    1.0, one empty chunking 0.0.
    """
    a = [(int(s), int(e)) for s, e in a if e > s]
    b = [(int(s), int(e)) for s, e in b if e > s]
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return (_best_overlaps(a, b) + _best_overlaps(b, a)) / 2


def agreement_matrices(chunkings: Sequence[Chunking], tolerance: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise agreement of chunkings of one document, for the configuration × configuration heat map.

    Returns:
        ``(boundaries, overlap)``: square arrays of :func:`boundary_iou` (boundaries within
        ``tolerance`` characters match) and of :func:`span_overlap_similarity`; both symmetric
        with ones on the diagonal.

    Raises:
        ParameterError: chunkings of different documents, or a negative tolerance.
    """
    if tolerance < 0:
        raise ParameterError(f"tolerance ({tolerance}) must be at least 0")
    if len({c.doc_id for c in chunkings}) > 1:
        raise ParameterError("agreement needs chunkings of the same document")
    n = len(chunkings)
    bounds = np.ones((n, n), dtype=np.float64)
    overlap = np.ones((n, n), dtype=np.float64)
    spans = [[(c.start, c.end) for c in ch.chunks] for ch in chunkings]
    for i in range(n):
        for j in range(i + 1, n):
            bounds[i, j] = bounds[j, i] = boundary_iou(chunkings[i].boundaries, chunkings[j].boundaries, tolerance)
            overlap[i, j] = overlap[j, i] = span_overlap_similarity(spans[i], spans[j])
    return bounds, overlap


# --- coverage --------------------------------------------------------------------------------


def retrieval_coverage(length: int, retrieved: Iterable[Sequence[Range]]) -> np.ndarray:
    """How many questions retrieved each character: an int32 array of ``length`` counts.

    Args:
        length: The document's length in characters.
        retrieved: For each question, the ranges retrieved in this document (a character
            inside two retrieved chunks of one question counts once).
    """
    delta = np.zeros(int(length) + 1, dtype=np.int64)
    for ranges in retrieved:
        for s, e in union_ranges(ranges):
            s, e = max(0, s), min(int(length), e)
            if e > s:
                delta[s] += 1
                delta[e] -= 1
    return np.cumsum(delta[:-1]).astype(np.int32)


def coverage_profile(coverage: np.ndarray, bins: int) -> np.ndarray:
    """The mean of ``coverage`` over ``bins`` equal stretches of the document (for a strip plot).

    Raises:
        ParameterError: ``bins`` below 1.
    """
    if bins < 1:
        raise ParameterError(f"bins ({bins}) must be at least 1")
    n = len(coverage)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    bins = min(bins, n)
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    sums = np.add.reduceat(coverage.astype(np.float64), edges[:-1])
    return sums / np.diff(edges)
