"""Bridges to pipeline frameworks: each takes a spec string or a :class:`chunklab.Chunker`.

- :mod:`chunklab.integrations.langchain`: :class:`~chunklab.integrations.langchain.ChunkLabTextSplitter`,
  a LangChain ``TextSplitter`` (``pip install "chunk-lab[langchain]"``);
- :mod:`chunklab.integrations.llamaindex`: :class:`~chunklab.integrations.llamaindex.ChunkLabNodeParser`,
  a LlamaIndex ``NodeParser`` (``pip install "chunk-lab[llamaindex]"``).

Import the module you need; each imports its framework, which this package does not.
"""
