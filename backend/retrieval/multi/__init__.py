"""Multi-granularity retrieval: MoG, MoGG and FreeChunker (query-time retrievers over several indexes)."""
