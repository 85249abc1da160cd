"""The :class:`Span` type: a half-open character range of a document's text.

Its own module because everything that cuts text uses it: the :class:`~backend.text.document.Document`
holds page and paragraph spans, and ``segment`` returns sentence and paragraph spans (which the
document computes on demand), so neither can own it without importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Span", "MultiRange"]


@dataclass(frozen=True, order=True)
class Span:
    """A half-open character range ``[start, end)`` of a document's text."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid span [{self.start}, {self.end})")

    def __len__(self) -> int:
        return self.end - self.start

    def slice(self, text: str) -> str:
        """The text this span covers."""
        return text[self.start : self.end]


class MultiRange:
    """Mixin for a retrieved or indexed piece of text that may cover several ranges.

    The class sets ``ranges``: sorted, disjoint ``(start, end)`` pairs, at least one.
    """

    ranges: tuple[tuple[int, int], ...]

    @property
    def start(self) -> int:
        """Its first character."""
        return self.ranges[0][0]

    @property
    def end(self) -> int:
        """Just past its last character."""
        return self.ranges[-1][1]
