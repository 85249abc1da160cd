"""The :class:`Document` type: normalized text plus exact page and paragraph spans.

Every offset in Chunk Lab indexes ``Document.text``; nothing downstream rewrites it. Spans
are :class:`~backend.text.spans.Span`; sentences come from :mod:`backend.text.segment`.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from backend.text.language import detect_language
from backend.text.segment import paragraph_spans, sentence_spans
from backend.text.spans import Span

__all__ = ["Document"]


@dataclass(frozen=True, eq=False)
class Document:
    """A loaded document.

    Attributes:
        text: The normalized text; every span indexes it.
        source: The file name the user gave (no directories).
        kind: The format it was read from: ``pdf``, ``txt``, ``md``, ``html`` or ``docx``.
        pages: One span per page (a single page for formats without pages).
        paragraphs: One span per paragraph, in order, without surrounding whitespace.
        language: A language code (``en``, ``zh``, …; ``und`` when unknown).
        encoding: The detected text encoding, for text formats.
    """

    text: str
    source: str
    kind: str
    pages: tuple[Span, ...]
    paragraphs: tuple[Span, ...]
    language: str = "und"
    encoding: str | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def id(self) -> str:
        """A content hash: equal text gives an equal id."""
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    @cached_property
    def sentences(self) -> tuple[Span, ...]:
        """Sentence spans (computed on first use and kept)."""
        return tuple(sentence_spans(self.text, language=self.language))

    @cached_property
    def page_starts(self) -> tuple[int, ...]:
        """Where each page begins (computed once: :meth:`page_of` runs once per chunk)."""
        return tuple(p.start for p in self.pages)

    def page_of(self, offset: int) -> int:
        """The 1-based page number holding ``offset`` (the last page for offsets past the end)."""
        return max(1, bisect.bisect_right(self.page_starts, offset))

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Document) and other.id == self.id and other.source == self.source

    @classmethod
    def from_text(
        cls,
        text: str,
        source: str = "text",
        kind: str = "txt",
        language: str | None = None,
        encoding: str | None = None,
    ) -> Document:
        """Build a single-page document from already-normalized text (text loaders, tests)."""
        return cls(
            text=text,
            source=source,
            kind=kind,
            pages=(Span(0, len(text)),),
            paragraphs=tuple(paragraph_spans(text)),
            language=language or detect_language(text),
            encoding=encoding,
        )
