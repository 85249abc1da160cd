"""``fixed_token``: fixed windows of tokens (Chroma's FixedTokenChunker / LangChain's TokenTextSplitter).

The document is tokenized once; a window of ``chunk_size`` tokens starts every
``chunk_size - chunk_overlap`` tokens. Windows are mapped to character spans through the
tokens' start offsets instead of decoding token ids (decoding a window that cuts a
multi-byte character produces U+FFFD and text that is not in the document). A chunk runs
from its first token's start to the next window token's start, so consecutive chunks without
overlap tile the text exactly.
"""

from __future__ import annotations

import numpy as np

from backend.chunkers.base import OVERLAP_FRACTIONS, TOKEN_LENGTHS, Chunker, register, size_params
from backend.text.document import Document
from backend.tokenizers import SpanCounter

__all__ = ["FixedTokenChunker", "token_windows"]


@register
class FixedTokenChunker(Chunker):
    """Fixed windows of ``chunk_size`` tokens with ``chunk_overlap`` tokens shared, ignoring sentences.

    Chroma's FixedTokenChunker (LangChain's TokenTextSplitter), Meta-Chunking's "Original"
    baseline. A window whose text re-tokenizes to more than ``chunk_size`` tokens (possible
    where a window edge cuts a multi-byte character) is shortened by a token, so the limit
    always holds. Whitespace-only windows are dropped.
    """

    name = "fixed_token"
    family = "baseline"
    params = size_params(250, "Tokens shared by consecutive windows.", size_search=TOKEN_LENGTHS,
                         overlap_search=OVERLAP_FRACTIONS)

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        text = doc.text
        counter = SpanCounter(self.tokenizer, text)
        windows = token_windows(text, counter, self.values["chunk_size"], self.values["chunk_overlap"])
        return [(a, b, n) for a, b, n in windows if not text[a:b].isspace()]


def token_windows(
    text: str, counter: SpanCounter, size: int, overlap: int = 0, *, begin: int = 0
) -> list[tuple[int, int, int]]:
    """Windows of ``size`` tokens, one every ``size - overlap`` tokens, as exact spans with their token counts.

    The first window starts at ``begin`` (inside its token when a tokenizer glues leading
    whitespace to a word), so leading characters a tokenizer skips still belong to it. A window
    runs from its first token's start to the next window token's start; one whose text
    re-tokenizes to more than ``size`` tokens (an edge inside a multi-byte character) is
    shortened by a token. Whitespace-only windows are included: callers drop or merge them.
    """
    n = int(counter.starts.size)
    if n == 0:
        return []
    bounds = np.append(counter.starts, len(text))
    first_token = max(int(np.searchsorted(counter.starts, begin, side="right")) - 1, 0)
    bounds[first_token] = begin
    step = size - overlap
    # Optimistic pass: every window at once, counted in one batch. The sequential loop
    # below takes over from the first window that needs adjusting (rare).
    first = np.arange(first_token, n, step, dtype=np.int64)
    last_window = int(np.searchsorted(first + size, n, side="left"))  # first window reaching the end
    first = first[: last_window + 1]
    ends = np.minimum(first + size, n)
    lo, hi = bounds[first], bounds[ends]
    counts = counter.count_many(np.stack([lo, hi], axis=1))
    out: list[tuple[int, int, int]] = []
    resume = None
    for i, a, b, tokens in zip(first.tolist(), lo.tolist(), hi.tolist(), counts):
        if b <= a or tokens > size:
            resume = i
            break
        out.append((a, b, tokens))
    if resume is None:
        return out
    starts = bounds.tolist()
    count = counter.count
    i = resume
    while i < n:
        j = min(i + size, n)
        a, b = starts[i], starts[j]
        while b <= a and j < n:  # several tokens inside one character
            j += 1
            b = starts[j]
        tokens = count(a, b)
        while tokens > size and j - 1 > i and starts[j - 1] > a:
            j -= 1
            b = starts[j]
            tokens = count(a, b)
        out.append((a, b, tokens))
        if j >= n:
            break
        i = max(i + 1, j - overlap)
    return out
