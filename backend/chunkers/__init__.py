"""Chunkers: the registry and every registered chunker (importing this package registers them)."""

from backend.chunkers.base import REGISTRY, Chunker, Param, chunker_specs, make_chunker, register, run_chunker
from backend.chunkers import fixed_token, paragraph, recursive, sentence  # noqa: F401  (registers)

__all__ = ["REGISTRY", "Chunker", "Param", "chunker_specs", "make_chunker", "register", "run_chunker"]
