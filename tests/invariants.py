"""The chunk invariants every chunker must keep, shared by the tests."""

from __future__ import annotations

from backend.chunking import Chunking
from backend.text.document import Document


def check_invariants(doc: Document, chunking: Chunking, size: int | None, overlap_allowed: bool, tokenizer) -> None:
    text = doc.text
    prev_start, prev_end = -1, -1
    covered = bytearray(len(text))
    for i, c in enumerate(chunking.chunks):
        assert c.index == i
        assert 0 <= c.start < c.end <= len(text)
        assert c.text == text[c.start : c.end]
        assert c.start >= prev_start and c.end >= prev_end, "chunks out of order"
        if not overlap_allowed:
            assert c.start >= prev_end, f"unexpected overlap at chunk {i}"
        assert c.tokens == tokenizer.count(c.text)
        if size is not None:
            assert c.tokens <= size or len(c.text) == 1, f"chunk {i} has {c.tokens} > {size} tokens"
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
        prev_start, prev_end = c.start, c.end
    missing = [i for i, ch in enumerate(text) if not covered[i] and not ch.isspace()]
    assert not missing, f"non-whitespace characters not covered: {missing[:10]}"
