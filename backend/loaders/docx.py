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

__all__ = ["load_docx", "MAX_EXPANSION", "MAX_XML_EXPANSION"]

# A .docx is a ZIP; refuse one whose parts would expand past this multiple of the size
# limit, so that a small "zip bomb" cannot exhaust memory. The XML parts, which are parsed
# into a tree several times their size, get a tighter bound. The sizes are the ones the
# archive declares; zipfile never reads past them (a part that lies fails its CRC check).
MAX_EXPANSION = 20
MAX_XML_EXPANSION = 5
# libxml2's safety limits, which python-docx's parser keeps (entities are not resolved):
# what each of its messages means for the user.
_XML_LIMITS = (
    ("amplification", "its XML defines entities that expand too much (an XML bomb)"),
    ("entity", "its XML defines entities that expand too much (an XML bomb)"),
    ("Text node too long", "it has a run of text longer than 10 MB"),
    ("Excessive depth", "its XML is nested more than 256 levels deep"),
)


def _check_expansion(data: bytes, name: str, max_bytes: int) -> None:
    """Reject archives that would expand to more than ``MAX_EXPANSION * max_bytes``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise CorruptFileError(f"'{name}' is not a valid .docx file (damaged or not a ZIP archive)") from e
    expanded = sum(info.file_size for info in infos)
    limit = MAX_EXPANSION * max_bytes
    if expanded > limit:
        raise FileTooLargeError(
            f"'{name}' expands to {_mb(expanded)} when unpacked; the limit is {_mb(limit)}"
        )
    xml = sum(info.file_size for info in infos if info.filename.lower().endswith((".xml", ".rels")))
    limit = MAX_XML_EXPANSION * max_bytes
    if xml > limit:
        raise FileTooLargeError(f"'{name}' holds {_mb(xml)} of XML when unpacked; the limit is {_mb(limit)}")


def _mb(n_bytes: int) -> str:
    """A byte count in MB, with a decimal for small ones."""
    mb = n_bytes / 2**20
    return f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB"


def _xml_limit_reason(error: Exception) -> str | None:
    """What a libxml2 safety limit that stopped the parse means, or ``None`` for other errors."""
    message = str(error)
    for fragment, reason in _XML_LIMITS:
        if fragment.lower() in message.lower():
            return reason
    return None


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
        FileTooLargeError: The archive would expand to too much data, or too much XML.
        CorruptFileError: The XML goes past the parser's safety limits (entity expansion,
            nesting depth, a text run over 10 MB).
        EmptyFileError: The document has no text.
    """
    from docx import Document as open_docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml.etree import LxmlError, XMLSyntaxError

    _check_expansion(data, name, max_bytes)
    try:
        word = open_docx(io.BytesIO(data))
        texts = list(_block_texts(word))
    except XMLSyntaxError as e:
        reason = _xml_limit_reason(e)
        if reason is not None:
            raise CorruptFileError(f"'{name}' cannot be read: {reason}") from e
        raise CorruptFileError(f"'{name}' is not a valid .docx file (damaged, or not a Word document)") from e
    except (PackageNotFoundError, zipfile.BadZipFile, zlib.error, EOFError, KeyError, ValueError, LxmlError) as e:
        raise CorruptFileError(f"'{name}' is not a valid .docx file (damaged, or not a Word document)") from e
    builder = TextBuilder()
    for text in texts:
        builder.add_paragraph(text)
    return builder.to_document(source=name, kind="docx")
