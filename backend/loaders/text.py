"""Plain text and Markdown: decode, normalize, split paragraphs at blank lines.

Markdown is kept as its source text (headings keep their ``#``, code fences their
backticks): chunkers see what the author wrote, and rendering it would lose the structure
that Markdown-aware chunkers split on.
"""

from __future__ import annotations

from backend.errors import EmptyFileError
from backend.loaders.encoding import decode_text
from backend.loaders.normalize import normalize_text
from backend.text.document import Document

__all__ = ["load_text"]


def load_text(data: bytes, name: str, kind: str) -> Document:
    """Load a plain-text or Markdown file.

    Args:
        data: The file's bytes (not empty).
        name: The file name, for the document and for error messages.
        kind: ``"txt"`` or ``"md"``.

    Returns:
        The document: one page; paragraphs are the blocks separated by blank lines.

    Raises:
        BinaryDataError: The bytes are not text.
        EmptyFileError: Nothing but whitespace once decoded.
    """
    raw, encoding = decode_text(data, name)
    text = normalize_text(raw)
    if not text:
        raise EmptyFileError(f"'{name}' contains no text")
    return Document.from_text(text, source=name, kind=kind, encoding=encoding)
