"""The retriever registry: a configuration's name → how it retrieves.

The chunker registry (:mod:`backend.chunkers`) stays the configuration surface: every retriever
is named, parameterised and validated there (``--chunker mog --param router=oracle`` works
everywhere a chunker can be named). This registry says how each name *retrieves*: the
multi-granularity retrievers with levels of their own (:class:`LevelRetriever`), and every other
configuration through the adapter that makes a chunking a one-level retriever
(:class:`ChunkRetriever`). Code that indexes, queries or scores asks this registry, never
whether a name is a retriever.
"""

from __future__ import annotations

from typing import Callable, Sequence

from backend.chunkers.context import ModelContext
from backend.chunking import ChunkerConfig, Chunking
from backend.retrieval.retriever.base import Retriever, RetrieverInfo
from backend.retrieval.retriever.chunks import ChunkRetriever
from backend.retrieval.retriever.levels import LEVEL_RETRIEVERS, LevelRetriever

__all__ = ["RetrieverFactory", "RETRIEVERS", "register_retriever", "make_retriever", "describe"]

RetrieverFactory = Callable[..., Retriever]  # (config, *, context=None, chunkings=()) -> Retriever

RETRIEVERS: dict[str, RetrieverFactory] = {name: LevelRetriever for name in LEVEL_RETRIEVERS}


def register_retriever(name: str, factory: RetrieverFactory) -> None:
    """Make configurations named ``name`` retrieve through ``factory(config, context=…, chunkings=…)``.

    The name must also be a registered chunker (its parameters and finest units live there).
    """
    RETRIEVERS[name] = factory


def make_retriever(
    config: ChunkerConfig, *, context: ModelContext | None = None, chunkings: Sequence[Chunking] = ()
) -> Retriever:
    """The retriever of ``config``: its own when registered here, else its chunking as a one-level retriever.

    Args:
        config: Any registered chunker's configuration.
        context: The models of a model-backed chunker.
        chunkings: Its chunkings (finest units) already made, per document: used instead of chunking again.

    Raises:
        ParameterError: a bad parameter of a retriever of its own.
    """
    factory = RETRIEVERS.get(config.name, ChunkRetriever)
    return factory(config, context=context, chunkings=chunkings)


def describe(config: ChunkerConfig) -> RetrieverInfo:
    """What the retriever of ``config`` says about itself (levels, routing, how outputs name its units)."""
    return make_retriever(config).describe()
