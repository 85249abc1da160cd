"""``sentence``: whole sentences packed up to a token limit (LlamaIndex SentenceSplitter style)."""

from __future__ import annotations

from backend.chunkers._packing import pack_units, split_oversized
from backend.chunkers.base import Chunker, Param, register
from backend.document import Document
from backend.tokenizers import SpanCounter
from backend.errors import ParameterError

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
    params = (
        Param("chunk_size", "int", 200, "Maximum tokens per chunk.", min=1, max=100_000),
        Param("chunk_overlap", "int", 0, "Token budget of whole sentences repeated from the previous chunk.", min=0, max=100_000),
    )

    def validate(self) -> None:
        size, overlap = self.values["chunk_size"], self.values["chunk_overlap"]
        if overlap >= size:
            raise ParameterError(f"chunk_overlap ({overlap}) must be smaller than chunk_size ({size})")

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        size = self.values["chunk_size"]
        units = [(s.start, s.end) for s in doc.sentences]
        counter = SpanCounter(self.tokenizer, doc.text)
        units, counts = split_oversized(doc.text, units, counter, size)
        return pack_units(doc.text, units, counts, counter, size, self.values["chunk_overlap"])
