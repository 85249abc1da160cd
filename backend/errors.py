"""Exception types for Chunk Lab.

Every error a user can cause has its own type and a one-line message that names the
bad value. The CLI maps :class:`InputError` to exit code 1 and :class:`ParameterError`
to exit code 2; the app shows ``str(error)`` (through :func:`one_line`) and goes on.
"""

from __future__ import annotations

__all__ = [
    "ChunkLabError",
    "InputError",
    "EmptyFileError",
    "UnsupportedTypeError",
    "CorruptFileError",
    "EncryptedPDFError",
    "NoTextLayerError",
    "BinaryDataError",
    "FileTooLargeError",
    "ParameterError",
    "ModelError",
    "StoreError",
    "Cancelled",
    "NotCached",
    "one_line",
]


class ChunkLabError(Exception):
    """Base class of every error Chunk Lab raises on purpose."""


class InputError(ChunkLabError):
    """A document cannot be read (CLI exit code 1)."""


class EmptyFileError(InputError):
    """The file has no bytes, or no text once extracted."""


class UnsupportedTypeError(InputError):
    """The file type is not one Chunk Lab reads."""


class CorruptFileError(InputError):
    """The file is damaged or truncated."""


class EncryptedPDFError(InputError):
    """The PDF is encrypted and cannot be opened without a password."""


class NoTextLayerError(InputError):
    """The PDF has pages but no extractable text (scanned images)."""


class BinaryDataError(InputError):
    """A file with a text extension holds binary data."""


class FileTooLargeError(InputError):
    """The file is over the configured size limit."""


class ParameterError(ChunkLabError, ValueError):
    """A chunker, tokenizer or CLI argument is invalid (CLI exit code 2)."""


class ModelError(ChunkLabError):
    """A model cannot be loaded or run (missing files, unreachable server, out of memory at batch 1)."""


class StoreError(ChunkLabError):
    """The vector store (Chroma) cannot be reached or used: server down, wrong port, timeout (CLI exit code 1)."""


class Cancelled(ChunkLabError):
    """The user cancelled a long computation."""


class NotCached(ChunkLabError):
    """A cache-only lookup missed: computing the result needs a model run (see ``ModelContext.cache_only``)."""


def one_line(message: str, limit: int = 300) -> str:
    """``message`` on a single line (whitespace runs collapsed), shortened to ``limit`` characters."""
    flat = " ".join(message.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
