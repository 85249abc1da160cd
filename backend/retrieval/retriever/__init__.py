"""Retrievers of their own: the protocol, the registry, the chunking adapter and the multi-granularity retrievers.

- ``base``: :class:`~backend.retrieval.retriever.base.Retriever` (what every retriever does) and the
  plain data it answers with;
- ``registry``: :func:`~backend.retrieval.retriever.registry.make_retriever` (a configuration's
  retriever) and :func:`~backend.retrieval.retriever.registry.register_retriever`;
- ``chunks``: :class:`~backend.retrieval.retriever.chunks.ChunkRetriever`, any chunking as a one-level retriever;
- ``levels``: :class:`~backend.retrieval.retriever.levels.LevelRetriever`, ``mog``, ``mogg`` and ``freechunker``.

Import what you need from its module.
"""

__all__ = ["base", "chunks", "levels", "registry"]
