"""``recursive``: LangChain's RecursiveCharacterTextSplitter, as configured in the Chroma report.

The algorithm follows LangChain's (``keep_separator="start"``, ``strip_whitespace=True``,
token length function) with two differences that matter for evaluation: every piece is a
span of the document tracked while splitting (LangChain rebuilds strings and users recover
offsets with ``text.find``, which fails on repeated text), and ``chunk_size`` is a hard limit
on the real token count of each chunk (LangChain sums the pieces' counts, which can
undercount after joining). Counting pieces is where LangChain spends its time; here every
count is exact but comes from one tokenization of the document (see ``SpanCounter``).
"""

from __future__ import annotations

from typing import Sequence

from backend.chunkers.base import OVERLAP_FRACTIONS, TOKEN_LENGTHS, Chunker, register, size_params
from backend.text.document import Document
from backend.text.segment import strip_span
from backend.tokenizers import SpanCounter, Tokenizer

__all__ = [
    "RecursiveChunker",
    "recursive_spans",
    "enforce_size",
    "CHROMA_SEPARATORS",
    "SUBSENTENCE_SEPARATORS",
    "split_before",
]

CHROMA_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", ".", "?", "!", " ", "")
# For a single sentence longer than the limit: clause marks first (Latin and CJK), then words, then characters.
SUBSENTENCE_SEPARATORS: tuple[str, ...] = ("\n", "; ", "；", ", ", "，", "、", ": ", "：", " ", "")


def split_before(text: str, lo: int, hi: int, sep: str) -> list[tuple[int, int]]:
    """Split ``text[lo:hi]`` before each occurrence of ``sep`` (the separator starts the next piece)."""
    if sep == "":
        return [(i, i + 1) for i in range(lo, hi)]
    # str.split finds the same non-overlapping occurrences as re.split, in C.
    parts = text[lo:hi].split(sep)
    step = len(sep)
    out = []
    pos = lo
    first = True
    for part in parts:
        start = pos if first else pos - step  # every piece after the first starts with the separator
        end = pos + len(part)
        if end > start:
            out.append((start, end))
        pos = end + step
        first = False
    return out


def _merge(
    text: str, splits: Sequence[tuple[int, int]], lens: Sequence[int], size: int, overlap: int, out: list
) -> None:
    """LangChain's ``_merge_splits`` on spans (the separator is kept in the pieces, so its length is 0)."""
    current: list[int] = []  # indexes into splits
    first = 0  # current[first:] is the live window (avoids O(n) pops from the front)
    total = 0
    for j, n in enumerate(lens):
        if total + n > size and len(current) > first:
            s, e = strip_span(text, splits[current[first]][0], splits[current[-1]][1])
            if e > s:
                out.append((s, e))
            while total > overlap or (total + n > size and total > 0):
                total -= lens[current[first]]
                first += 1
        current.append(j)
        total += n
    if len(current) > first:
        s, e = strip_span(text, splits[current[first]][0], splits[current[-1]][1])
        if e > s:
            out.append((s, e))


def recursive_spans(
    text: str,
    tokenizer: Tokenizer,
    chunk_size: int,
    chunk_overlap: int = 0,
    separators: Sequence[str] = CHROMA_SEPARATORS,
    lo: int = 0,
    hi: int | None = None,
    counter: SpanCounter | None = None,
) -> list[tuple[int, int]]:
    """Recursive splitting of ``text[lo:hi]``; spans are stripped of surrounding whitespace.

    A piece is kept whole when shorter than ``chunk_size`` tokens and split with the next
    separator otherwise, as LangChain does. Pieces are counted alone (as LangChain's length
    function sees them); pass a :class:`SpanCounter` of ``text`` to reuse one tokenization.
    """
    hi = len(text) if hi is None else hi
    counter = counter or SpanCounter(tokenizer, text)
    out: list[tuple[int, int]] = []
    _recurse(text, lo, hi, tuple(separators), counter, chunk_size, chunk_overlap, out)
    return out


def _pick(text: str, lo: int, hi: int, separators: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The first separator present in ``text[lo:hi]`` and the separators left for its pieces."""
    for i, s in enumerate(separators):
        if s == "":
            return s, ()
        if text.find(s, lo, hi) != -1:
            return s, separators[i + 1 :]
    return separators[-1], ()


class _Node:
    """One span to split: its pieces, their counts, and the pieces split again (by index)."""

    __slots__ = ("lo", "hi", "separators", "splits", "lens", "rest", "children")

    def __init__(self, lo: int, hi: int, separators: tuple[str, ...]) -> None:
        self.lo, self.hi, self.separators = lo, hi, separators
        self.splits: list[tuple[int, int]] = []
        self.lens: list[int] = []
        self.rest: tuple[str, ...] = ()
        self.children: dict[int, _Node] = {}


def _recurse(text, lo, hi, separators, counter, size, overlap, out) -> None:
    # The same recursion as LangChain's, planned one depth at a time: every piece of every span
    # at one depth is counted in a single count_many call (a call per span paid numpy's fixed
    # cost hundreds of times per document), then the tree is walked in order to merge.
    root = _Node(lo, hi, separators)
    level = [root]
    while level:
        batch: list[tuple[int, int]] = []
        for node in level:
            sep, node.rest = _pick(text, node.lo, node.hi, node.separators)
            node.splits = split_before(text, node.lo, node.hi, sep)
            batch.extend(node.splits)
        lens = counter.count_many(batch)
        deeper: list[_Node] = []
        pos = 0
        for node in level:
            k = len(node.splits)
            node.lens = lens[pos : pos + k]
            pos += k
            if node.rest:
                for j, n in enumerate(node.lens):
                    if n >= size:
                        a, b = node.splits[j]
                        child = node.children[j] = _Node(a, b, node.rest)
                        deeper.append(child)
        level = deeper
    _emit(text, root, size, overlap, out)


def _emit(text, node, size, overlap, out) -> None:
    """Merge runs of small pieces and emit (or descend into) the large ones, in text order."""
    splits, lens = node.splits, node.lens
    good_from = -1
    for k, n in enumerate(lens):
        if n < size:
            if good_from < 0:
                good_from = k
            continue
        if good_from >= 0:
            _merge(text, splits[good_from:k], lens[good_from:k], size, overlap, out)
            good_from = -1
        if not node.rest:
            s, e = strip_span(text, *splits[k])
            if e > s:
                out.append((s, e))
        else:
            _emit(text, node.children[k], size, overlap, out)
    if good_from >= 0:
        _merge(text, splits[good_from:], lens[good_from:], size, overlap, out)


def enforce_size(
    text: str,
    spans: list[tuple[int, int]],
    tokenizer: Tokenizer,
    size: int,
    separators: Sequence[str] = CHROMA_SEPARATORS,
    counter: SpanCounter | None = None,
) -> list[tuple[int, int, int]]:
    """Count each span; split again the rare span whose real count exceeds ``size``.

    Summed piece counts can undercount a joined chunk by a token or two. Such a span is split
    recursively with a smaller budget until every piece fits, so cuts stay at separators.
    """
    counter = counter or SpanCounter(tokenizer, text)
    counts = counter.count_many(spans)
    out: list[tuple[int, int, int]] = []
    for (s, e), n in zip(spans, counts):
        if n <= size:
            out.append((s, e, n))
            continue
        budget = size - 1
        while True:
            subs = recursive_spans(text, tokenizer, max(budget, 1), 0, separators, s, e, counter) if budget > 0 else []
            sub_counts = counter.count_many(subs)
            if subs and all(c <= size for c in sub_counts):
                out.extend((a, b, c) for (a, b), c in zip(subs, sub_counts))
                break
            if budget <= 1:
                out.extend(_token_windows(text, s, e, tokenizer, size))
                break
            budget = max(1, budget - max(1, budget // 4))
    return out


def _token_windows(text: str, s: int, e: int, tokenizer: Tokenizer, size: int) -> list[tuple[int, int, int]]:
    """Last resort: windows of ``size`` tokens (a unit the separators cannot split)."""
    starts = [int(x) + s for x in tokenizer.token_starts(text[s:e])]
    cuts = sorted({s, *starts[size::size], e})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        a, b = strip_span(text, a, b)
        if b > a:
            out.append((a, b, tokenizer.count(text[a:b])))
    return out


@register
class RecursiveChunker(Chunker):
    """Recursive splitting on ``["\\n\\n", "\\n", ".", "?", "!", " ", ""]`` up to ``chunk_size`` tokens.

    LangChain's RecursiveCharacterTextSplitter as configured in the Chroma report: the first
    separator present splits the text; pieces shorter than ``chunk_size`` are merged greedily,
    longer ones are split again with the next separator. Separators stay at the start of the
    following piece; chunks are stripped of surrounding whitespace. ``chunk_overlap`` tokens of
    whole pieces are repeated between neighbouring chunks.
    """

    name = "recursive"
    family = "baseline"
    params = size_params(200, "Tokens of whole pieces repeated between chunks.", size_search=TOKEN_LENGTHS,
                         overlap_search=OVERLAP_FRACTIONS)

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        size = self.values["chunk_size"]
        counter = SpanCounter(self.tokenizer, doc.text)
        spans = recursive_spans(doc.text, self.tokenizer, size, self.values["chunk_overlap"], counter=counter)
        return enforce_size(doc.text, spans, self.tokenizer, size, counter=counter)
