"""Chunk Lab backend: documents, segmentation, tokenizers, chunkers and the CLI.

Pure Python; never imports streamlit. Heavy libraries (torch, transformers, chromadb) load
lazily, on first use, so ``import backend`` is fast.
"""

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.errors import ChunkLabError, InputError, ParameterError
from backend.text.document import Document
from backend.text.spans import Span

__all__ = [
    "Chunk",
    "ChunkerConfig",
    "Chunking",
    "Document",
    "Span",
    "ChunkLabError",
    "InputError",
    "ParameterError",
]
