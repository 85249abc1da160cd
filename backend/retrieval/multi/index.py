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

Each distinct text is embedded once per build (:class:`TextVectors`): the same text at several
levels (MoG's odd last entry carried up, a MoGG neighbourhood that stops growing, a sentence that
recurs) and texts the model reads the same way (equal token ids once truncated to its context
length, such as two long MoGG neighbourhoods that begin alike) share one vector. When a level
is missing from the store, the units are embedded (one output-cache entry), then the distinct
texts of every other level in one call (one more entry), before the levels are written; a build
whose levels are all in the store embeds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from backend.chunkers.multi import RetrieverChunker
from backend.chunking import ChunkerConfig, Chunking
from backend.models.cache import OutputCache
from backend.models.embeddings import TextEmbedder, embed_texts
from backend.models.types import ModelInfo
from backend.progress import Progress
from backend.retrieval.multi.freechunker import load_encoder, mean_vectors, windows
from backend.retrieval.multi.graph import Graph, build_graph, merged_ranges, neighbourhood
from backend.retrieval.store import ChunkStore, StoredLevel, entries_level
from backend.text.document import Document
from backend.text.spans import MultiRange
from backend.tokenizers import SpanCounter

__all__ = ["Entry", "Level", "MultiIndex", "CountingEmbedder", "TextVectors", "build_index", "mog_levels"]

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

    def input_keys(self, texts: Sequence[str]) -> list[bytes] | None:
        """The inner embedder's ``input_keys`` (None when it has none): what its model reads of each text."""
        keys = getattr(self.inner, "input_keys", None)
        return keys(texts) if keys is not None else None


class TextVectors:
    """The vectors of one build's texts: each distinct text embedded once, through the output cache.

    Args:
        embedder: The embedder (its ``input_keys``, when it has one, tells texts its model reads alike).
        cache: The output cache (None: no caching).
    """

    def __init__(self, embedder: TextEmbedder, cache: OutputCache | None) -> None:
        self._embedder = embedder
        self._cache = cache
        self._known: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str], *, same_input: bool = False, progress: Progress | None = None) -> np.ndarray:
        """The rows of ``texts``, in order, embedding the distinct texts not seen before in one call.

        Args:
            texts: The texts.
            same_input: Also embed once the texts the model reads alike (equal token ids once
                truncated): asks the embedder for its ``input_keys``, which loads a lazy model.
            progress: ``progress(texts embedded, texts)`` while embedding.
        """
        distinct = list(dict.fromkeys(texts))
        new = [t for t in distinct if t not in self._known]
        if new:
            stand_in = {t: t for t in new}
            input_keys = getattr(self._embedder, "input_keys", None) if same_input else None
            if input_keys is not None:
                known = [t for t in distinct if t in self._known]  # first, so a text embedded before stands in
                keys = input_keys(known + new)
                if keys is not None:
                    first: dict[bytes, str] = {}
                    for t, k in zip(known + new, keys):
                        stand_in[t] = first.setdefault(k, t)
            wanted = [t for t in dict.fromkeys(stand_in.values()) if t not in self._known]
            rows, _ = embed_texts(self._embedder, wanted, cache=self._cache, progress=progress)
            self._known.update(zip(wanted, rows))
            self._known.update((t, self._known[stand_in[t]]) for t in new)
        if not texts:
            return np.zeros((0, int(getattr(self._embedder, "dimension", 0))), dtype=np.float32)
        return np.stack([self._known[t] for t in texts]).astype(np.float32, copy=False)


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
        progress: Embedding the levels' distinct texts (when a level must be written), then one
            part per level (``level 2 of 3 · …``); may raise ``Cancelled``.

    Raises:
        ParameterError: a bad parameter.
        StoreError, ModelError: the store or the embedder fails.
    """
    progress = progress or Progress()
    config = chunker.config
    t0 = time.perf_counter()
    counting = CountingEmbedder(embedder)
    vectors = TextVectors(counting, cache)
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
        graph, plans = _mogg_plans(chunker, units, vectors)
    else:
        plans = _freechunker_plans(chunker, units, vectors)

    spec = chunker.level_spec()
    stored: list[StoredLevel] = []
    level_tokens: list[list[int]] = []
    for j, (entries, _, kind, make_vectors, _) in enumerate(plans, 1):
        ranges = [r for _, r in entries]
        tokens = [
            units.chunks[us[0]].tokens if len(us) == 1 else sum(counter.count_many(list(r)))
            for us, r in entries
        ]
        level_tokens.append(tokens)
        stored.append(entries_level(doc, _level_key(spec, j, kind), ranges, tokens, counting.info, vectors=make_vectors))
    embedded = _embed_once(stored, store, vectors, progress)
    stored = [replace(level, vectors=_rows_of(vectors, level.texts)) if embedded and level.vectors is None else level
              for level in stored]

    levels = []
    reused = True
    writing = progress.part(1, 2, None, weights=_STEP_WEIGHTS) if embedded else progress
    for j, ((entries, parent, _, _, size), level, tokens) in enumerate(zip(plans, stored, level_tokens), 1):
        part = writing.part(j - 1, len(plans), "level")
        info = store.write_level(level, counting, cache=cache, progress=part)
        part(1, 1)  # a level found complete in the store reports nothing of its own: it is done all the same
        reused = reused and info.reused
        name = names[j - 1] if not size else ("unit" if size == 1 else f"{size} units")
        levels.append(Level(
            number=j, name=name,
            entries=tuple(Entry(i, us, r, t) for i, ((us, r), t) in enumerate(zip(entries, tokens))),
            parent=parent, collection=info.name, size=size,
        ))
    return MultiIndex(config, doc, units, tuple(levels), graph, time.perf_counter() - t0, counting.texts, reused)


_STEP_WEIGHTS = (9.0, 1.0)  # of the bar: embedding every level's texts, then writing the levels


def _embed_once(stored: list[StoredLevel], store: ChunkStore, vectors: TextVectors, progress: Progress) -> bool:
    """Embed the distinct texts of every text level into ``vectors``, if some text level must be written.

    Level 1 (the units) first, as a list of its own: the output-cache entry whose stored parts
    the Retrieval page counts to say an interrupted indexing run left work. Then the other
    levels' distinct texts at once, texts the model reads alike once. All text levels, not only
    the missing ones, so that the cache entry (and a run cut short's checkpoints) stay the same
    whichever levels are missing. Returns whether it embedded (False: every text level is
    complete in the store, and nothing was read or embedded).
    """
    text_levels = [level for level in stored if level.vectors is None]
    if all(store.is_indexed(level) for level in text_levels):
        return False
    units = list(stored[0].texts) if stored[0].vectors is None else []
    rest = [t for level in text_levels for t in level.texts]
    embedding = progress.part(0, 2, None, weights=_STEP_WEIGHTS)
    weights = (len(set(units)), len(set(rest)) - len(set(units)))
    vectors(units, progress=embedding.part(0, 2, None, weights=weights))
    vectors(rest, same_input=True, progress=embedding.part(1, 2, None, weights=weights))
    return True


def _rows_of(vectors: TextVectors, texts: Sequence[str]) -> Callable[[], np.ndarray]:
    """A level's ``vectors``: its texts' rows, already embedded."""
    return lambda: vectors(texts)


def _mogg_plans(chunker: RetrieverChunker, units: Chunking, vectors: TextVectors) -> tuple[Graph, list[Any]]:
    v = chunker.values
    spans = [(c.start, c.end) for c in units.chunks]
    if v["edge"] == "cosine":
        graph = build_graph(k_graph=v["k_graph"], t_graph=v["t_graph"], edge="cosine",
                            vectors=vectors([c.text for c in units.chunks]))
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


def _freechunker_plans(chunker: RetrieverChunker, units: Chunking, vectors: TextVectors) -> list[Any]:
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
            rows = vectors([c.text for c in units.chunks])
            return encoder.encode(rows, group) if encoder is not None else mean_vectors(rows, group)

        kind = "mean" if encoder is None else f"model:{encoder.fingerprint}"
        plans.append((entries, (), kind, make, g))
    return plans
