"""A LangChain ``TextSplitter`` that chunks with any Chunk Lab configuration.

    from chunklab.integrations.langchain import ChunkLabTextSplitter

    splitter = ChunkLabTextSplitter("ppl threshold=0.4")       # or a chunklab.Chunker
    docs = splitter.create_documents([text])                    # metadata["start_index"] == chunk start
    chunks = splitter.split_documents(loader.load())            # keeps each document's metadata

The chunks are exactly the ones ``python -m backend chunk`` prints for the same text and spec:
``split_text`` returns their texts, and ``create_documents`` / ``split_documents`` set
``start_index`` (and ``end_index``, ``tokens``, ``chunk_index``, ``chunker``) from the spans
themselves rather than by searching the text, so repeated passages and overlaps get their true
offsets. Needs ``pip install "chunk-lab[langchain]"``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document as LCDocument
from langchain_text_splitters import TextSplitter

from chunklab.chunking import Chunker, Chunking
from chunklab.documents import from_text

__all__ = ["ChunkLabTextSplitter"]


class ChunkLabTextSplitter(TextSplitter):
    """LangChain's ``TextSplitter`` over a Chunk Lab chunker.

    Args:
        chunker: A spec string (``"recursive chunk_size=200"``) or a :class:`chunklab.Chunker`.
        add_start_index: Put ``start_index`` (the chunk's first character) in each document's metadata
            (default True; LangChain's own splitters default to False).
        **settings: With a spec string, the :class:`chunklab.Chunker` settings (``lm``, ``embedder``,
            ``device``, ``window``, ``cache``).
    """

    def __init__(self, chunker: str | Chunker, *, add_start_index: bool = True, **settings: Any) -> None:
        # LangChain's size and overlap are unused (the spec sizes the chunks); its stripping is off,
        # so every text is the exact span.
        super().__init__(chunk_size=1, chunk_overlap=0, add_start_index=add_start_index, strip_whitespace=False)
        self.chunker = chunker if isinstance(chunker, Chunker) else Chunker(chunker, **settings)

    def chunking(self, text: str) -> Chunking:
        """The full chunking of ``text`` (spans, tokens) through the wrapped chunker."""
        return self.chunker.chunk(from_text(text))

    def split_text(self, text: str) -> list[str]:
        """The chunks' texts, in order."""
        return self.chunking(text).texts

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None) -> list[LCDocument]:
        """One LangChain ``Document`` per chunk; each text's metadata copied, with the chunk's own added."""
        metadatas = metadatas or [{}] * len(texts)
        out = []
        for text, base in zip(texts, metadatas):
            chunking = self.chunking(text)
            for c in chunking:
                metadata = copy.deepcopy(base) if base else {}  # as LangChain copies it; an empty one costs nothing
                if self._add_start_index:
                    metadata["start_index"] = c.start
                metadata.update(end_index=c.end, tokens=c.tokens, chunk_index=c.index, chunker=chunking.spec)
                out.append(LCDocument(page_content=c.text, metadata=metadata))
        return out

    def split_documents(self, documents: Iterable[LCDocument]) -> list[LCDocument]:
        """Split each document; its metadata is kept on every chunk."""
        documents = list(documents)
        return self.create_documents([d.page_content for d in documents], [d.metadata for d in documents])

    def __repr__(self) -> str:
        return f"ChunkLabTextSplitter({self.chunker.spec!r})"
