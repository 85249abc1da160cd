"""Loading a document: a file path, a file's bytes, or a string.

Every offset a chunk carries indexes the loaded document's ``text``: a PDF's extracted text,
a Markdown or text file's normalized text (``python -m backend text FILE`` prints the same
string), or, for :func:`from_text`, the string exactly as given.
"""

from __future__ import annotations

import os
from pathlib import Path

from backend.errors import InputError
from backend.loaders import SUPPORTED_EXTENSIONS, load_bytes, load_document
from backend.text.document import Document

__all__ = ["Document", "SUPPORTED_EXTENSIONS", "load", "from_text", "as_document"]


def load(source: str | os.PathLike[str] | bytes, *, name: str | None = None, max_bytes: int | None = None) -> Document:
    """Load a document from a path or from a file's bytes.

    Args:
        source: A file path (PDF, DOCX, HTML, Markdown or text), or the file's bytes.
        name: With bytes, the file's name: its extension picks the format (required then).
        max_bytes: Size limit; None: ``CHUNKLAB_MAX_FILE_MB`` (default 50 MB).

    Raises:
        chunklab.InputError: missing or unreadable file, unsupported type, empty, corrupt,
            encrypted or scanned PDF (the message is one line).
        TypeError: ``source`` is neither a path nor bytes, or bytes without ``name``.

    >>> load("report.pdf").pages  # doctest: +SKIP
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not name:
            raise TypeError("load(bytes) needs name=, whose extension picks the format (e.g. name='report.pdf')")
        return load_bytes(bytes(source), name, max_bytes)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"load() takes a path or bytes, not {type(source).__name__}; for a string use from_text()")
    path = Path(source).expanduser()
    if not path.exists():  # the loader would say so too; this line also catches a string meant as text
        raise InputError(f"{source}: no such file (to chunk a string, use chunklab.from_text)")
    return load_document(path, max_bytes)  # a directory, no permission…: its one-line InputError


def from_text(text: str, *, name: str = "text", language: str | None = None) -> Document:
    """A one-page document over ``text`` exactly as given: chunk offsets index this very string.

    Args:
        text: The text (not normalized: what a pipeline passes is what the offsets index).
        name: What the document is called in reports.
        language: A language code (``en``, ``zh``…); None detects it.
    """
    if not isinstance(text, str):
        raise TypeError(f"from_text() takes a str, not {type(text).__name__}")
    kind = "md" if name.lower().endswith((".md", ".markdown")) else "txt"
    return Document.from_text(text, source=name, kind=kind, language=language)


def as_document(doc: Document | str) -> Document:
    """``doc`` itself, or a string as :func:`from_text` reads it (what the chunkers' ``chunk`` accepts)."""
    if isinstance(doc, Document):
        return doc
    if isinstance(doc, str):
        return from_text(doc)
    raise TypeError(f"expected a chunklab Document or a str, not {type(doc).__name__}")
