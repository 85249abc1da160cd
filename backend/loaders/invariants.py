"""The invariants every loaded :class:`~backend.text.document.Document` satisfies.

Loaders guarantee them and tests check them (for loaders here, and for any code that
builds documents): a violation is a bug, so this module reports problems rather than
raising a user-facing error.
"""

from __future__ import annotations

from backend.loaders.normalize import PARAGRAPH_BREAK, normalize_text
from backend.text.document import Document
from backend.text.spans import Span

__all__ = ["document_problems"]


def _span_problems(label: str, spans: tuple[Span, ...], text: str) -> list[str]:
    """Bounds and order of a span sequence."""
    problems = []
    for i, span in enumerate(spans):
        if span.end > len(text):
            problems.append(f"{label}[{i}] {span} ends past the text ({len(text)} chars)")
        if i and span.start < spans[i - 1].end:
            problems.append(f"{label}[{i}] {span} overlaps or precedes {label}[{i - 1}] {spans[i - 1]}")
    return problems


def _uncovered(spans: tuple[Span, ...], text: str) -> str | None:
    """The first non-whitespace text outside every span, if any."""
    position = 0
    for span in list(spans) + [Span(len(text), len(text))]:
        gap = text[position : span.start]
        if gap.strip():
            return gap.strip()[:40]
        position = max(position, span.end)
    return None


def document_problems(document: Document) -> list[str]:
    """List the ways a document breaks the loader invariants.

    Checked: the text is normalized (:func:`~backend.loaders.normalize.normalize_text` leaves
    it unchanged); page and paragraph spans are in bounds, in order and disjoint; pages
    cover every non-whitespace character; every paragraph is non-empty, has no surrounding
    whitespace and no blank line inside, lies within one page, and together the paragraphs
    cover every non-whitespace character.

    Args:
        document: The document to check.

    Returns:
        One message per problem; empty when the document is sound.
    """
    text = document.text
    problems: list[str] = []
    if normalize_text(text) != text:
        problems.append("text is not normalized")
    if not document.pages:
        problems.append("no pages")
    problems += _span_problems("pages", document.pages, text)
    problems += _span_problems("paragraphs", document.paragraphs, text)
    missing = _uncovered(document.pages, text)
    if missing is not None:
        problems.append(f"text outside every page: {missing!r}")
    missing = _uncovered(document.paragraphs, text)
    if missing is not None:
        problems.append(f"text outside every paragraph: {missing!r}")
    for i, span in enumerate(document.paragraphs):
        piece = span.slice(text)
        if not piece or piece != piece.strip():
            problems.append(f"paragraphs[{i}] {span} is empty or has surrounding whitespace: {piece[:40]!r}")
        if PARAGRAPH_BREAK in piece:
            problems.append(f"paragraphs[{i}] {span} contains a blank line")
        if not any(page.start <= span.start and span.end <= page.end for page in document.pages):
            problems.append(f"paragraphs[{i}] {span} is not inside a single page")
    return problems
