"""Building and storing a multi-granularity index: a retriever's levels of entries, each level one Chroma collection.

- **MoG**: level 1 is the retriever's units (the document cut at ``chunk_size`` tokens); a
  level-j entry joins two adjacent level-(j−1) entries, so it spans from the first one's start
  to the second one's end (the whitespace between them included, exact spans).
- **MoGG**: the units are nodes of 1–2 sentences; the node graph
  (:func:`backend.retrieval.multi.graph.build_graph`) links similar nodes; a level-g entry is
  the neighbourhood within g−1 hops of a centre node, capped at ``max_tokens``; identical
  neighbourhoods are stored once. An entry's ranges are its nodes, consecutive nodes merged.
- **FreeChunker**: the units, then for each window size g the windows of
  :func:`backend.retrieval.multi.freechunker.windows`; window vectors come from the unit
  vectors (``encoder=mean``/``model:PATH``) or from the window texts (``exact``).

Every level records, for each unit, its *parent* at that level: the entry MoG's selection
returns for that unit (MoG: the level-j chunk holding it; MoGG: the neighbourhood centred on
it). Each level is written by the store's one indexing path
(:func:`backend.retrieval.store.entries_level`, :meth:`~backend.retrieval.store.ChunkStore.write_level`).
Vectors go through the output cache and collections are reused when complete, so a rerun over an
indexed document makes no embedder call (:attr:`MultiIndex.texts_embedded`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from backend.chunkers.multi import RetrieverChunker
from backend.chunking import ChunkerConfig, Chunking
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder, embed_texts
from backend.models.types import ModelInfo
from backend.progress import Progress
from backend.retrieval.multi.freechunker import load_encoder, mean_vectors, windows
from backend.retrieval.multi.graph import Graph, build_graph, merged_ranges, neighbourhood
from backend.retrieval.store import ChunkStore, entries_level
from backend.text.document import Document
from backend.text.spans import MultiRange
from backend.tokenizers import SpanCounter

__all__ = ["Entry", "Level", "MultiIndex", "CountingEmbedder", "build_index", "mog_levels"]

Range = tuple[int, int]


@dataclass(frozen=True)
class Entry(MultiRange):
    """One indexed text of a level: the units it covers and its exact character ranges."""

    index: int
    units: tuple[int, ...]
    ranges: tuple[Range, ...]
    tokens: int


@dataclass(frozen=True)
class Level:
    """One granularity level: its entries, each unit's parent entry, and its collection.

    Attributes:
        number: 1 for the finest level.
        name: A short name (``L2 (~100 tok)``, ``1 hop``, ``4 units``).
        entries: The entries, in index order.
        parent: For each unit, the index of the entry MoG's selection returns at this level
            (empty for FreeChunker, which has no parents).
        collection: The Chroma collection holding this level.
        size: FreeChunker's window size g (1 for units); 0 elsewhere.
    """

    number: int
    name: str
    entries: tuple[Entry, ...]
    parent: tuple[int, ...]
    collection: str
    size: int = 0

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class MultiIndex:
    """A retriever's index of one document: the units, the levels, the graph (MoGG) and what building cost.

    Attributes:
        config: The retriever's configuration.
        doc: The document.
        units: The finest units as a :class:`Chunking` (what the registry's ``split`` cuts).
        levels: The levels, finest first.
        graph: MoGG's node graph (None for the others).
        seconds: Wall time of :func:`build_index`.
        texts_embedded: Texts the embedder embedded during this build (0 when all came from the cache or the store).
        reused: True when every level's collection was already complete.
    """

    config: ChunkerConfig
    doc: Document
    units: Chunking
    levels: tuple[Level, ...]
    graph: Graph | None
    seconds: float
    texts_embedded: int
    reused: bool

    @property
    def entries(self) -> int:
        """Entries over all levels."""
        return sum(len(lv) for lv in self.levels)

    def unit_ranges(self) -> list[Range]:
        """The units' character spans."""
        return [(c.start, c.end) for c in self.units.chunks]

    def to_json(self) -> dict[str, Any]:
        """What ``python -m backend index`` prints of it: each level's collection, the units, the cost."""
        out: dict[str, Any] = {
            "levels": [{"level": lv.number, "name": lv.name, "name_in_store": lv.collection, "entries": len(lv)}
                       for lv in self.levels],
            "units": len(self.units),
            "texts_embedded": self.texts_embedded,
            "reused": self.reused,
            "seconds": round(self.seconds, 3),
        }
        if self.graph is not None:
            out["graph_edges"] = len(self.graph.edges)
        return out


class CountingEmbedder:
    """An embedder that counts the texts it is asked to embed (cache hits never reach it)."""

    def __init__(self, inner: TextEmbedder) -> None:
        self.inner = inner
        self.info: ModelInfo = inner.info
        self.texts = 0

    @property
    def dimension(self) -> int:
        """The inner embedder's dimension (0 when it does not say)."""
        return int(getattr(self.inner, "dimension", 0))

    def embed(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        """Embed with the inner model, counting."""
        self.texts += len(texts)
        return self.inner.embed(texts, progress=progress)


def mog_levels(units: Sequence[Range], levels: int) -> list[list[tuple[tuple[int, ...], Range]]]:
    """MoG's levels over ``units``: level j joins two adjacent level-(j−1) entries.

    Returns:
        For each level, finest first, ``(unit indices, (start, end))`` per entry. An odd last
        entry of a level carries up alone.
    """
    out = [[((i,), (s, e)) for i, (s, e) in enumerate(units)]]
    for _ in range(1, levels):
        prev = out[-1]
        level = []
        for i in range(0, len(prev), 2):
            pair = prev[i : i + 2]
            level.append((tuple(u for p in pair for u in p[0]), (pair[0][1][0], pair[-1][1][1])))
        out.append(level)
    return out


def _level_key(spec: dict[str, Any], level: int, vectors: str) -> dict[str, Any]:
    """What names a level in the store: the retriever's shaping parameters, the level and its kind of vectors."""
    return {**spec, "level": level, "vectors": vectors}


def build_index(
    doc: Document,
    chunker: RetrieverChunker,
    units: Chunking,
    store: ChunkStore,
    embedder: TextEmbedder,
    *,
    cache: OutputCache | None = None,
    progress: Progress | None = None,
) -> MultiIndex:
    """Build a retriever's levels over its units of ``doc`` and make sure each is indexed in ``store``.

    Args:
        doc: The document.
        chunker: A registered retriever's entry (``mog``, ``mogg``, ``freechunker``), validated.
        units: Its finest units of ``doc`` (``chunker.chunk(doc)``).
        store: The Chroma store.
        embedder: The embedder (vectors and collection names depend on it).
        cache: The output cache of embeddings (None: no caching).
        progress: One part per level (``level 2 of 3 · …``); may raise ``Cancelled``.

    Raises:
        ParameterError: a bad parameter.
        StoreError, ModelError: the store or the embedder fails.
    """
    progress = progress or Progress()
    config = chunker.config
    t0 = time.perf_counter()
    counting = CountingEmbedder(embedder)
    spans = [(c.start, c.end) for c in units.chunks]
    names = chunker.level_names()
    counter = SpanCounter(chunker.tokenizer, doc.text)
    graph = None
    plans: list[tuple[list[tuple[tuple[int, ...], tuple[Range, ...]]], tuple[int, ...], str, Any, int]] = []
    if config.name == "mog":
        for j, level in enumerate(mog_levels(spans, chunker.values["levels"]), 1):
            parent = tuple(u >> (j - 1) for u in range(len(spans)))
            plans.append(([(us, (r,)) for us, r in level], parent, "text", None, 0))
    elif config.name == "mogg":
        graph, plans = _mogg_plans(doc, chunker, units, counting, cache)
    else:
        plans = _freechunker_plans(doc, chunker, units, counting, cache)

    levels = []
    reused = True
    spec = chunker.level_spec()
    for j, (entries, parent, kind, make_vectors, size) in enumerate(plans, 1):
        ranges = [r for _, r in entries]
        tokens = [
            units.chunks[us[0]].tokens if len(us) == 1 else sum(counter.count_many(list(r)))
            for us, r in entries
        ]
        stored = entries_level(doc, _level_key(spec, j, kind), ranges, tokens, counting.info, vectors=make_vectors)
        info = store.write_level(stored, counting, cache=cache, progress=progress.part(j - 1, len(plans), "level"))
        reused = reused and info.reused
        name = names[j - 1] if not size else ("unit" if size == 1 else f"{size} units")
        levels.append(Level(
            number=j, name=name,
            entries=tuple(Entry(i, us, r, t) for i, ((us, r), t) in enumerate(zip(entries, tokens))),
            parent=parent, collection=info.name, size=size,
        ))
    return MultiIndex(config, doc, units, tuple(levels), graph, time.perf_counter() - t0, counting.texts, reused)


def unit_vectors(doc: Document, units: Chunking, embedder: TextEmbedder, cache: OutputCache | None) -> np.ndarray:
    """The units' embeddings (the same cache entry as level 1's texts, so level 1 reuses them)."""
    vectors, _ = embed_texts(embedder, [c.text for c in units.chunks], cache=cache)
    return vectors


def _mogg_plans(
    doc: Document, chunker: RetrieverChunker, units: Chunking, embedder: TextEmbedder, cache: OutputCache | None
) -> tuple[Graph, list[Any]]:
    v = chunker.values
    spans = [(c.start, c.end) for c in units.chunks]
    if v["edge"] == "cosine":
        graph = build_graph(k_graph=v["k_graph"], t_graph=v["t_graph"], edge="cosine",
                            vectors=unit_vectors(doc, units, embedder, cache))
    else:
        graph = build_graph(k_graph=v["k_graph"], t_graph=v["t_graph"], edge="bm25",
                            texts=[c.text for c in units.chunks])
    adjacency = graph.neighbours()
    node_tokens = [c.tokens for c in units.chunks]
    plans = []
    for g in range(1, v["levels"] + 1):
        seen: dict[tuple[int, ...], int] = {}
        entries: list[tuple[tuple[int, ...], tuple[Range, ...]]] = []
        parent = []
        for centre in range(len(spans)):
            nodes = neighbourhood(adjacency, centre, g - 1, node_tokens, v["max_tokens"])
            if nodes not in seen:
                seen[nodes] = len(entries)
                entries.append((nodes, tuple(merged_ranges(spans, nodes))))
            parent.append(seen[nodes])
        plans.append((entries, tuple(parent), "text", None, 0))
    return graph, plans


def _freechunker_plans(
    doc: Document, chunker: RetrieverChunker, units: Chunking, embedder: TextEmbedder, cache: OutputCache | None
) -> list[Any]:
    spans = [(c.start, c.end) for c in units.chunks]
    encoder_spec = str(chunker.values["encoder"]).strip()
    plans: list[Any] = [([((i,), ((s, e),)) for i, (s, e) in enumerate(spans)], (), "text", None, 1)]
    wins = [w for w in windows(len(spans), chunker.sizes, include_units=False)]
    encoder = load_encoder(encoder_spec) if encoder_spec.startswith("model:") else None
    sizes = sorted({w.size for w in wins})
    for g in sizes:
        group = [w for w in wins if w.size == g]
        entries = [(tuple(range(w.first, w.last)), ((spans[w.first][0], spans[w.last - 1][1]),)) for w in group]
        if encoder_spec == "exact":
            plans.append((entries, (), "text", None, g))
            continue

        def make(group: list[Any] = group) -> np.ndarray:
            vectors = unit_vectors(doc, units, embedder, cache)
            return encoder.encode(vectors, group) if encoder is not None else mean_vectors(vectors, group)

        kind = "mean" if encoder is None else f"model:{encoder.fingerprint}"
        plans.append((entries, (), kind, make, g))
    return plans
