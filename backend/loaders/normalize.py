"""Text normalization and offset-tracking assembly shared by every loader.

:func:`normalize_text` defines what "the extracted document text" is: every loader
passes each piece it extracts (a page paragraph, an HTML block, a whole text file)
through it, so the same bytes always give the same text. :class:`TextBuilder` then
joins the normalized pieces with blank lines and records page and paragraph spans as
it goes, so offsets are never recovered afterwards with ``str.find``.
"""

from __future__ import annotations

import re
import unicodedata

from backend.errors import EmptyFileError
from backend.text.document import Document
from backend.text.language import detect_language
from backend.text.spans import Span

__all__ = ["normalize_text", "TextBuilder", "PARAGRAPH_BREAK"]

PARAGRAPH_BREAK = "\n\n"

# Line-break-like characters: carriage return, vertical tab, form feed, NEL, line separator.
_LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x85", "\u2028")
# Removed outright: C0 controls but tab and newline, DEL and the C1 controls; zero-width
# space, word joiner, BOM / zero-width no-break space and soft hyphen (invisible, and they
# break tokenizers and exact-match search; ZWJ/ZWNJ stay for emoji and Indic scripts);
# noncharacters; lone surrogates, which cannot be encoded as UTF-8.
_DELETE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b\u2060\ufeff\ufffe\uffff\ud800-\udfff]")
_MANY_NEWLINES = re.compile(r"\n{3,}")


def normalize_text(text: str) -> str:
    """Normalize one extracted piece of text.

    Steps, in order: line breaks (``\\r\\n``, ``\\r``, form feed, vertical tab, NEL, U+2028)
    become ``\\n`` and U+2029 becomes a blank line; control characters other than ``\\n`` and
    ``\\t`` are removed, with zero-width spaces, word joiners, soft hyphens, BOMs, noncharacters
    and lone surrogates; Unicode NFC; trailing whitespace of each line is stripped; three or
    more newlines collapse to two; leading and trailing whitespace of the piece is stripped.

    The function is idempotent, and after it a blank line is always exactly ``"\\n\\n"``.
    It is written with ``str`` methods and simple patterns so that a 50 MB text takes
    about a second.

    Args:
        text: Raw extracted text.

    Returns:
        The normalized text (possibly empty).
    """
    text = text.replace("\r\n", "\n")
    for mark in _LINE_BREAKS:
        if mark in text:
            text = text.replace(mark, "\n")
    text = text.replace("\u2029", "\n\n")
    text = _DELETE.sub("", text)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    # str.rstrip strips exactly what the regex class [^\S\n] would, much faster.
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    if "\n\n\n" in text:
        text = _MANY_NEWLINES.sub("\n\n", text)
    return text.strip()


class TextBuilder:
    """Concatenates normalized paragraphs with blank lines, recording page and paragraph spans.

    Loaders that know the structure (PDF pages, HTML blocks, DOCX paragraphs) call
    :meth:`add_paragraph` per piece and :meth:`start_page` / :meth:`end_page` around pages;
    a piece whose normalized text contains a blank line becomes several paragraphs, so
    paragraphs are always the blocks separated by blank lines.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._paragraphs: list[Span] = []
        self._pages: list[Span] = []
        self._page_first_paragraph: int | None = None

    def add_paragraph(self, raw: str) -> None:
        """Normalize ``raw`` and append it as one or more paragraphs (nothing if it is blank)."""
        piece = normalize_text(raw)
        if not piece:
            return
        for block in piece.split(PARAGRAPH_BREAK):
            lead = len(block) - len(block.lstrip())
            if lead == len(block):
                continue
            if self._length:
                self._parts.append(PARAGRAPH_BREAK)
                self._length += len(PARAGRAPH_BREAK)
            start = self._length + lead
            self._parts.append(block)
            self._length += len(block)
            self._paragraphs.append(Span(start, self._length))

    def start_page(self) -> None:
        """Mark the start of a page."""
        self._page_first_paragraph = len(self._paragraphs)

    def end_page(self) -> None:
        """Close the current page: its span runs from its first to its last paragraph."""
        first = self._page_first_paragraph
        if first is None:
            raise RuntimeError("end_page() called without start_page()")
        if first < len(self._paragraphs):
            self._pages.append(Span(self._paragraphs[first].start, self._paragraphs[-1].end))
        else:  # a page without text: an empty span where it would have been
            self._pages.append(Span(self._length, self._length))
        self._page_first_paragraph = None

    @property
    def has_text(self) -> bool:
        """Whether any paragraph has been added."""
        return self._length > 0

    @property
    def text(self) -> str:
        """The text assembled so far."""
        return "".join(self._parts)

    @property
    def paragraphs(self) -> tuple[Span, ...]:
        """Paragraph spans recorded so far."""
        return tuple(self._paragraphs)

    @property
    def pages(self) -> tuple[Span, ...]:
        """Page spans; a single page covering the text if no pages were marked."""
        if self._pages:
            return tuple(self._pages)
        return (Span(0, self._length),)

    def to_document(self, source: str, kind: str, encoding: str | None = None) -> Document:
        """The finished :class:`Document`, with its language detected.

        Raises:
            EmptyFileError: No text was added.
        """
        if not self.has_text:
            raise EmptyFileError(f"'{source}' contains no text")
        text = self.text
        return Document(
            text=text,
            source=source,
            kind=kind,
            pages=self.pages,
            paragraphs=self.paragraphs,
            language=detect_language(text),
            encoding=encoding,
        )
