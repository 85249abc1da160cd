"""Chunk Lab backend: documents, segmentation, tokenizers, chunkers and the CLI.

Pure Python; never imports streamlit. Heavy libraries (torch, transformers, chromadb) load
lazily, on first use, so ``import backend`` is fast.
"""

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.errors import ChunkLabError, InputError, ParameterError
from backend.text.document import Document
from backend.text.spans import Span


def _version() -> str:
    """The app's version: ``pyproject.toml``'s in a checkout, else the installed distribution's, else ``unknown``.

    The checkout's file comes first because an editable install's metadata keeps the version
    it was installed with; nothing here touches the network.
    """
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        with pyproject.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return version("chunk-lab")
    except PackageNotFoundError:
        return "unknown"


__version__ = _version()

__all__ = [
    "__version__",
    "Chunk",
    "ChunkerConfig",
    "Chunking",
    "Document",
    "Span",
    "ChunkLabError",
    "InputError",
    "ParameterError",
]
