"""Word documents (.docx) with python-docx.

python-docx is the maintained reader of the OOXML format and exposes paragraphs and
tables as they appear in the body; a hand-written ``document.xml`` walk would have to
re-learn runs, hyperlinks, tabs and breaks. Only the body is read (no headers, footers,
footnotes, comments, text boxes or content controls).

Each body paragraph (headings included) is a paragraph of the document. A table row
becomes one paragraph with its cells separated by tabs; a cell with several paragraphs
has them joined by spaces; merged cells are read once.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator

from backend.errors import CorruptFileError, FileTooLargeError
from backend.loaders.normalize import TextBuilder
from backend.text.document import Document

__all__ = ["load_docx", "MAX_EXPANSION"]

# A .docx is a ZIP; refuse one whose parts would expand past this multiple of the size
# limit, so that a small "zip bomb" cannot exhaust memory.
MAX_EXPANSION = 20


def _check_expansion(data: bytes, name: str, max_bytes: int) -> None:
    """Reject archives that would expand to more than ``MAX_EXPANSION * max_bytes``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise CorruptFileError(f"'{name}' is not a valid .docx file (damaged or not a ZIP archive)") from e
    limit = MAX_EXPANSION * max_bytes
    if expanded > limit:
        raise FileTooLargeError(
            f"'{name}' expands to {expanded / 2**20:.0f} MB when unpacked; the limit is {limit / 2**20:.0f} MB"
        )


def _block_texts(container: object) -> Iterator[str]:
    """Texts of the paragraphs and table rows in a document or cell, in document order."""
    from docx.table import Table

    for block in container.iter_inner_content():  # type: ignore[attr-defined]
        if isinstance(block, Table):
            yield from _table_rows(block)
        else:
            yield block.text


def _table_rows(table: object) -> Iterator[str]:
    """One tab-separated line per table row; nested tables are flattened into their cell."""
    for row in table.rows:  # type: ignore[attr-defined]
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell appears once per grid column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(" ".join(text.split()) for text in _block_texts(cell) if text.strip()))
        if any(cells):
            yield "\t".join(cells)


def load_docx(data: bytes, name: str, max_bytes: int) -> Document:
    """Extract the body text of a Word document.

    Args:
        data: The .docx bytes.
        name: The file name, for the document and for error messages.
        max_bytes: The upload size limit; the unpacked size may be at most ``MAX_EXPANSION`` times it.

    Returns:
        The document, ``kind="docx"``, one page.

    Raises:
        CorruptFileError: Not a ZIP archive, or not a Word document, or damaged.
        FileTooLargeError: The archive would expand to too much data.
        EmptyFileError: The document has no text.
    """
    from docx import Document as open_docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml.etree import LxmlError

    _check_expansion(data, name, max_bytes)
    try:
        word = open_docx(io.BytesIO(data))
        texts = list(_block_texts(word))
    except (PackageNotFoundError, zipfile.BadZipFile, zlib.error, EOFError, KeyError, ValueError, LxmlError) as e:
        raise CorruptFileError(f"'{name}' is not a valid .docx file (damaged, or not a Word document)") from e
    builder = TextBuilder()
    for text in texts:
        builder.add_paragraph(text)
    return builder.to_document(source=name, kind="docx")
