"""``paragraph``: whole paragraphs packed up to a token limit."""

from __future__ import annotations

import bisect

from backend.chunkers.base import TOKEN_LENGTHS, Chunker, register, size_params
from backend.chunkers.packing import pack_units, split_oversized
from backend.text.document import Document
from backend.tokenizers import SpanCounter

__all__ = ["ParagraphChunker"]


@register
class ParagraphChunker(Chunker):
    """Paragraphs packed greedily up to ``chunk_size`` tokens.

    A paragraph longer than ``chunk_size`` is replaced by its sentences (and a sentence
    longer than that by clause, word or character pieces), so the limit holds everywhere.
    """

    name = "paragraph"
    family = "baseline"
    params = size_params(400, size_search=TOKEN_LENGTHS)

    def split(self, doc: Document) -> list[tuple[int, int, int]]:
        size = self.values["chunk_size"]
        text = doc.text
        paras = [(p.start, p.end) for p in doc.paragraphs]
        counter = SpanCounter(self.tokenizer, text)
        counts = counter.count_many(paras)
        units: list[tuple[int, int]] = []
        sentences = None
        for (s, e), n in zip(paras, counts):
            if n <= size:
                units.append((s, e))
                continue
            if sentences is None:
                sentences = doc.sentences
                sent_starts = [x.start for x in sentences]
            k = bisect.bisect_left(sent_starts, s)
            inside = []
            while k < len(sentences) and sentences[k].end <= e:
                inside.append((sentences[k].start, sentences[k].end))
                k += 1
            units.extend(inside if inside else [(s, e)])
        units, unit_counts = split_oversized(text, units, counter, size)
        return pack_units(text, units, unit_counts, counter, size)
