"""Document loading: bytes or a file in, a normalized :class:`~backend.text.document.Document` out.

One module per format (``pdf``, ``text``, ``html``, ``docx``), with encoding detection and
text normalization shared (``encoding``, ``normalize``). This module only dispatches: the
extension picks the loader, and content sniffing catches mismatches (a file that starts
with a PDF header is read as a PDF whatever its name; a ``.pdf`` without one is reported
as not a PDF; a text file that holds an image or an executable is rejected).

Sizes are checked before anything is parsed, and for files before they are read.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType

from backend.config import max_file_bytes
from backend.errors import EmptyFileError, FileTooLargeError, InputError, ParameterError, UnsupportedTypeError
from backend.loaders.docx import load_docx
from backend.loaders.html import load_html
from backend.loaders.pdf import PDF_MAGIC, load_pdf
from backend.loaders.text import load_text
from backend.text.document import Document

__all__ = ["SUPPORTED_EXTENSIONS", "KIND_BY_EXTENSION", "load_bytes", "load_document"]

KIND_BY_EXTENSION: MappingProxyType[str, str] = MappingProxyType({
    ".pdf": "pdf",
    ".txt": "txt",
    ".text": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".docx": "docx",
})
SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(KIND_BY_EXTENSION)


def _base_name(name: str) -> str:
    """The file name without directories (browsers on Windows may send ``C:\\...`` paths)."""
    return name.replace("\\", "/").rsplit("/", 1)[-1] or name


def _kind_of(name: str) -> str:
    """The loader kind for a file name, from its extension."""
    extension = os.path.splitext(name)[1].lower()
    kind = KIND_BY_EXTENSION.get(extension)
    if kind is None:
        shown = extension or "(no extension)"
        raise UnsupportedTypeError(
            f"unsupported file type '{shown}' for '{name}'; supported: {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    return kind


def _megabytes(n_bytes: int) -> str:
    """A byte count in MB, with enough digits to tell small limits apart."""
    mb = n_bytes / 2**20
    if mb >= 0.1:
        return f"{mb:.1f} MB"
    return f"{mb:.6f}".rstrip("0").rstrip(".") + " MB"


def _limit(max_bytes: int | None) -> int:
    """The size limit to apply."""
    if max_bytes is None:
        return max_file_bytes()
    if max_bytes <= 0:
        raise ParameterError(f"max_bytes must be positive, got {max_bytes}")
    return max_bytes


def _check_size(size: int, name: str, limit: int) -> None:
    """Reject empty and oversized files."""
    if size == 0:
        raise EmptyFileError(f"'{name}' is empty (0 bytes)")
    if size > limit:
        raise FileTooLargeError(
            f"'{name}' is {_megabytes(size)}, over the {_megabytes(limit)} limit (CHUNKLAB_MAX_FILE_MB)"
        )


def load_bytes(data: bytes, name: str, max_bytes: int | None = None) -> Document:
    """Load a document from its bytes.

    Args:
        data: The file's content.
        name: The original file name; its extension picks the format, and its base name
            becomes ``Document.source``.
        max_bytes: Size limit in bytes; ``None`` means ``CHUNKLAB_MAX_FILE_MB`` (default 50 MB).

    Returns:
        The loaded, normalized document.

    Raises:
        UnsupportedTypeError: The extension is not one of :data:`SUPPORTED_EXTENSIONS`.
        EmptyFileError: No bytes, or no text once extracted.
        FileTooLargeError: Over the size limit.
        CorruptFileError: A damaged or truncated PDF or DOCX.
        EncryptedPDFError: A password-protected PDF.
        NoTextLayerError: A PDF without a text layer (a scan).
        BinaryDataError: A text-format file holding binary data.
        ParameterError: ``max_bytes`` is not positive.
    """
    name = _base_name(name)
    kind = _kind_of(name)
    limit = _limit(max_bytes)
    _check_size(len(data), name, limit)
    if kind == "pdf" or data[:1024].lstrip().startswith(PDF_MAGIC):
        return load_pdf(data, name)
    if kind == "docx":
        return load_docx(data, name, limit)
    if kind == "html":
        return load_html(data, name)
    return load_text(data, name, kind)


def load_document(path: str | os.PathLike[str], max_bytes: int | None = None) -> Document:
    """Load a document from a file.

    The type and size are checked before the file is read.

    Args:
        path: The file to read.
        max_bytes: Size limit in bytes; ``None`` means ``CHUNKLAB_MAX_FILE_MB`` (default 50 MB).

    Returns:
        The loaded document; ``Document.source`` is the file's base name.

    Raises:
        InputError: The file cannot be read (missing, a directory, no permission), or any
            error :func:`load_bytes` raises.
    """
    path = Path(path)
    name = path.name
    if path.is_dir():  # before the type check: a folder is not "a file without an extension"
        raise InputError(f"cannot read '{name}': Is a directory")
    _kind_of(name)
    limit = _limit(max_bytes)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(path))
        _check_size(size, name, limit)
        with path.open("rb") as handle:
            data = handle.read(limit + 1)  # the file may grow between stat and read
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e.strerror or e}") from e
    return load_bytes(data, name, max_bytes=limit)
