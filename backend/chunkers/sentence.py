"""``sentence``: whole sentences packed up to a token limit (LlamaIndex SentenceSplitter style)."""

from __future__ import annotations

from backend.chunkers.base import OVERLAP_FRACTIONS, TOKEN_LENGTHS, Chunker, register, size_params
from backend.chunkers.packing import pack_units, split_oversized
from backend.text.document import Document
from backend.tokenizers import SpanCounter

__all__ = ["SentenceChunker"]


@register
class SentenceChunker(Chunker):
    """Sentences packed greedily up to ``chunk_size`` tokens, with whole-sentence overlap.

    Like LlamaIndex's SentenceSplitter: a chunk never ends inside a sentence unless that
    sentence alone exceeds ``chunk_size`` (it is then split at clause marks, then words).
    ``chunk_overlap`` is a token budget filled with whole trailing sentences of the previous
    chunk.
    """

    name = "sentence"
    family = "baseline"
    params = size_params(200, "Token budget of whole sentences repeated from the previous chunk.",
                         size_search=TOKEN_LENGTHS, overlap_search=OVERLAP_FRACTIONS)

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        size = self.values["chunk_size"]
        units = [(s.start, s.end) for s in doc.sentences]
        counter = SpanCounter(self.tokenizer, doc.text)
        units, counts = split_oversized(doc.text, units, counter, size)
        return pack_units(doc.text, units, counts, counter, size, self.values["chunk_overlap"])
