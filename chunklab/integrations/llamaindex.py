"""A LlamaIndex ``NodeParser`` that chunks with any Chunk Lab configuration.

    from chunklab.integrations.llamaindex import ChunkLabNodeParser

    parser = ChunkLabNodeParser("semantic breakpoint=percentile amount=95")   # or a chunklab.Chunker
    nodes = parser.get_nodes_from_documents(documents)   # start_char_idx / end_char_idx: the exact spans

Each node is one chunk of its input node's text, exactly as ``python -m backend chunk`` cuts
the same text. ``start_char_idx``/``end_char_idx`` are the chunk's span in that text: LlamaIndex's
own post-processing finds each node's text by searching the document (a repeated passage then
points at its first occurrence), so this parser does the rest of it (relationships, metadata)
and keeps the spans. The node's metadata also carries ``tokens``, ``chunk_index`` and ``chunker``,
left out of what is embedded and shown to the LLM. Needs
``pip install "chunk-lab[llamaindex]"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship, TextNode
from llama_index.core.utils import get_tqdm_iterable
from pydantic import ConfigDict, PrivateAttr

from chunklab.chunking import Chunker
from chunklab.documents import from_text

__all__ = ["ChunkLabNodeParser"]

_OWN_KEYS = ("tokens", "chunk_index", "chunker")


def _with_own_keys(keys: list[str]) -> list[str]:
    """A new list: ``keys`` and ours, so what is embedded and shown to the LLM stays the chunk's text."""
    return [*keys, *(k for k in _OWN_KEYS if k not in keys)]


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
            chunking = self._chunker.chunk(from_text(node.get_content(metadata_mode=MetadataMode.NONE)))
            # As LlamaIndex's build_nodes_from_splits makes them, with the span and our keys given at once
            # (one validation per node instead of one per assignment).
            source = {NodeRelationship.SOURCE: node.as_related_node_info()}
            embed_keys = _with_own_keys(node.excluded_embed_metadata_keys)
            llm_keys = _with_own_keys(node.excluded_llm_metadata_keys)
            for c in chunking:
                out.append(
                    TextNode(
                        id_=self.id_func(c.index, node),
                        text=c.text,
                        start_char_idx=c.start,
                        end_char_idx=c.end,
                        metadata={"tokens": c.tokens, "chunk_index": c.index, "chunker": chunking.spec},
                        excluded_embed_metadata_keys=embed_keys,
                        excluded_llm_metadata_keys=llm_keys,
                        metadata_seperator=node.metadata_separator,
                        metadata_template=node.metadata_template,
                        text_template=node.text_template,
                        relationships=source,
                    )
                )
        return out

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]) -> list[BaseNode]:
        # What NodeParser's own post-processing does (the parent document's source relationship and metadata,
        # the input node's metadata, previous/next links between chunks of one input), except searching each
        # node's text in its document for its offsets: the spans are known. Each node's link info is made once.
        links = [n.as_related_node_info() for n in nodes] if self.include_prev_next_rel else []
        for i, node in enumerate(nodes):
            parent_doc = parent_doc_map.get(node.ref_doc_id or "")
            if parent_doc is not None:
                if parent_doc.source_node is not None:
                    node.relationships[NodeRelationship.SOURCE] = parent_doc.source_node
                if self.include_metadata:
                    node.metadata = {**parent_doc.metadata, **node.metadata}
            source = node.source_node
            if source is not None and self.include_metadata:
                node.metadata.update({**source.metadata, **node.metadata})
            if not links or source is None:
                continue
            for j, relation in ((i - 1, NodeRelationship.PREVIOUS), (i + 1, NodeRelationship.NEXT)):
                other = nodes[j].source_node if 0 <= j < len(nodes) else None
                if other is not None and other.node_id == source.node_id:
                    node.relationships[relation] = links[j]
        return nodes

    def __repr__(self) -> str:
        return f"ChunkLabNodeParser({self._chunker.spec!r})"
