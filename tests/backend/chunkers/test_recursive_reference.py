"""``recursive_spans`` (planned one depth at a time, counts from one tokenization) against a plain recursion."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.chunkers.recursive import CHROMA_SEPARATORS, SUBSENTENCE_SEPARATORS, split_before, recursive_spans
from backend.text.segment import strip_span
from backend.tokenizers import get_tokenizer

_alphabet = st.sampled_from(
    list("abcdefghij ABC  \n\n\t.,;:!?-'\"()0123456789")
    + ["Dr.", "e.g.", "3.14", "。", "，", "北京", "😀", "é", "\u00a0", "; ", ", ", "The ", " word"]
)
texts = st.one_of(st.lists(_alphabet, max_size=400).map("".join), st.text(max_size=300))


def _reference(text, count, size, overlap, separators, lo, hi):
    """LangChain's recursion written plainly: each piece counted alone, depth first."""
    out: list[tuple[int, int]] = []

    def merge(splits):
        current, total = [], 0
        for a, b, n in splits:
            if total + n > size and current:
                s, e = strip_span(text, current[0][0], current[-1][1])
                if e > s:
                    out.append((s, e))
                while total > overlap or (total + n > size and total > 0):
                    total -= current.pop(0)[2]
            current.append((a, b, n))
            total += n
        if current:
            s, e = strip_span(text, current[0][0], current[-1][1])
            if e > s:
                out.append((s, e))

    def recurse(lo, hi, seps):
        sep, rest = seps[-1], ()
        for i, s in enumerate(seps):
            if s == "" or s in text[lo:hi]:
                sep, rest = s, (seps[i + 1 :] if s else ())
                break
        good = []
        for a, b in split_before(text, lo, hi, sep):
            n = count(text[a:b])
            if n < size:
                good.append((a, b, n))
                continue
            if good:
                merge(good)
                good = []
            if rest:
                recurse(a, b, rest)
            else:
                s, e = strip_span(text, a, b)
                if e > s:
                    out.append((s, e))
        if good:
            merge(good)

    recurse(lo, hi, tuple(separators))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    size=st.integers(1, 40),
    overlap_frac=st.sampled_from([0.0, 0.25, 0.5]),
    tokenizer=st.sampled_from(["cl100k", "words", "chars"]),
    separators=st.sampled_from([CHROMA_SEPARATORS, SUBSENTENCE_SEPARATORS]),
    window=st.tuples(st.floats(0, 0.5), st.floats(0.5, 1)),
)
def test_recursive_spans_match_plain_recursion(text, size, overlap_frac, tokenizer, separators, window):
    tok = get_tokenizer(tokenizer)
    overlap = int(size * overlap_frac)
    lo, hi = int(len(text) * window[0]), int(len(text) * window[1])
    got = recursive_spans(text, tok, size, overlap, separators, lo, hi)
    assert got == _reference(text, tok.count, size, overlap, separators, lo, hi)


def test_a_split_oversized_chunk_with_overlap_keeps_chunks_in_start_order():
    # Found by the tuner's grid: at 32 tokens with an 8-token overlap, enforce_size split a chunk of the narrative
    # sample into a last piece (1463, 1469) that starts after the next, overlapping chunk (1436, 1475).
    from backend.chunkers import make_chunker
    from backend.samples import load_sample

    doc = load_sample("narrative")
    chunking = make_chunker("recursive", {"chunk_size": 32, "chunk_overlap": 8}).chunk(doc)
    starts = [c.start for c in chunking.chunks]
    assert starts == sorted(starts)
    assert all(doc.text[c.start:c.end] == c.text and c.tokens <= 32 for c in chunking.chunks)
    assert (1436, 1475) in [(c.start, c.end) for c in chunking.chunks]
