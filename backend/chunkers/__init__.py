"""Chunkers: the registry and every registered chunker (importing this package registers them)."""

from backend.chunkers.base import (
    REGISTRY,
    Chunker,
    Param,
    chunker_specs,
    config_needs,
    make_chunker,
    register,
    run_chunker,
)
from backend.chunkers import fixed_token, paragraph, recursive, semantic, sentence  # noqa: F401  (registers)
from backend.chunkers.llm import chunkers as llm_chunkers  # noqa: F401  (registers llm_split, lumber, moc)
from backend.chunkers.meta import chunkers as meta_chunkers  # noqa: F401  (registers ppl, margin_sampling…)
from backend.chunkers import multi  # noqa: F401  (registers the retrievers mog, mogg, freechunker)
from backend.chunkers import manual  # noqa: F401  (registers manual: edited copies of any configuration)
from backend.chunkers.context import ModelContext

__all__ = ["REGISTRY", "Chunker", "ModelContext", "Param", "chunker_specs", "config_needs", "make_chunker", "register", "run_chunker"]
