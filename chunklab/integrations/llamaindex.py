"""A LlamaIndex ``NodeParser`` that chunks with any Chunk Lab configuration.

    from chunklab.integrations.llamaindex import ChunkLabNodeParser

    parser = ChunkLabNodeParser("semantic breakpoint=percentile amount=95")   # or a chunklab.Chunker
    nodes = parser.get_nodes_from_documents(documents)   # start_char_idx / end_char_idx: the exact spans

Each node is one chunk of its input node's text, exactly as ``python -m backend chunk`` cuts
the same text. ``start_char_idx``/``end_char_idx`` are the chunk's span in that text, and stay
so: LlamaIndex's post-processing, which re-finds each node's text by searching the document,
is kept for relationships and metadata but its offsets are replaced by the spans. The node's
metadata also carries ``tokens``, ``chunk_index`` and ``chunker``. Needs
``pip install "chunk-lab[llamaindex]"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.node_parser import NodeParser
from llama_index.core.node_parser.node_utils import build_nodes_from_splits
from llama_index.core.schema import BaseNode, Document, MetadataMode, TextNode
from llama_index.core.utils import get_tqdm_iterable
from pydantic import ConfigDict, PrivateAttr

from chunklab.chunking import Chunker
from chunklab.documents import from_text

__all__ = ["ChunkLabNodeParser"]

_OWN_KEYS = ("tokens", "chunk_index", "chunker")


class ChunkLabNodeParser(NodeParser):
    """LlamaIndex's ``NodeParser`` over a Chunk Lab chunker.

    Args:
        chunker: A spec string (``"recursive chunk_size=200"``) or a :class:`chunklab.Chunker`.
        **kwargs: With a spec string, the :class:`chunklab.Chunker` settings (``lm``, ``embedder``,
            ``device``, ``window``, ``cache``); LlamaIndex's own ``NodeParser`` fields
            (``include_metadata``, ``include_prev_next_rel``, ``callback_manager``, ``id_func``) also.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _chunker: Chunker = PrivateAttr()
    _spans: dict[str, tuple[int, int]] = PrivateAttr(default_factory=dict)

    def __init__(self, chunker: str | Chunker, **kwargs: Any) -> None:
        settings = {k: kwargs.pop(k) for k in ("lm", "embedder", "device", "window", "cache") if k in kwargs}
        super().__init__(**kwargs)
        self._chunker = chunker if isinstance(chunker, Chunker) else Chunker(chunker, **settings)

    @classmethod
    def class_name(cls) -> str:
        return "ChunkLabNodeParser"

    @property
    def chunker(self) -> Chunker:
        """The wrapped :class:`chunklab.Chunker`."""
        return self._chunker

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Chunking with Chunk Lab"):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            chunking = self._chunker.chunk(from_text(text))
            built = build_nodes_from_splits(chunking.texts, node, id_func=self.id_func)
            for child, c in zip(built, chunking):
                child.start_char_idx, child.end_char_idx = c.start, c.end
                child.metadata.update(tokens=c.tokens, chunk_index=c.index, chunker=chunking.spec)
                for keys in (child.excluded_embed_metadata_keys, child.excluded_llm_metadata_keys):
                    keys.extend(k for k in _OWN_KEYS if k not in keys)  # what is embedded and shown stays the text
                self._spans[child.node_id] = (c.start, c.end)
            out.extend(built)
        return out

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]) -> list[BaseNode]:
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node in nodes:  # the base re-finds offsets by searching the text: put the exact spans back
            span = self._spans.pop(node.node_id, None)
            if span is not None and isinstance(node, TextNode):
                node.start_char_idx, node.end_char_idx = span
        return nodes

    def __repr__(self) -> str:
        return f"ChunkLabNodeParser({self._chunker.spec!r})"
