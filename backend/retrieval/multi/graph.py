"""MoGG's graph: nodes of one or two sentences, similarity edges, hop neighbourhoods as granularity levels.

MoGG (MoG paper, section 3.3 and Figure 3) splits a document into small nodes of one or two
sentences, links each node to its ``k_graph`` most similar nodes whose similarity reaches a
threshold ``t_graph``, and replaces MoG's granularity levels by *hopping ranges*: level ``g`` of
a centre node is its neighbourhood within ``g - 1`` hops, each node counted once. This module
builds that graph and those neighbourhoods; embedding and retrieving them is the caller's job.

- :func:`node_spans`: sentence ranges → node ranges (1 or 2 sentences a node);
- :func:`build_graph`: the edges, by cosine similarity of embeddings or by BM25 (the paper's);
- :func:`neighbourhood` / :func:`hop_levels`: the hop neighbourhoods, capped at ``max_tokens``;
- :func:`merged_ranges`: a neighbourhood's character ranges, consecutive nodes merged.

Edges are undirected: ``i–j`` exists when ``j`` is among ``i``'s top ``k_graph`` or ``i`` among
``j``'s, with similarity ``>= t_graph`` in a direction that selected it; its weight is the larger
similarity of the directions that selected it. Ties in a top-k are broken by the lower node index,
so a graph is a pure function of its inputs. Because the top-k sets do not depend on the
threshold, raising the threshold afterwards (:meth:`Graph.with_threshold`) gives exactly the graph
a rebuild would.

BM25 comes from ``bm25s`` (a maintained, numpy/scipy-only implementation with an in-package
English stopword list; no stemmer, so nothing is downloaded) rather than being hand-written here.
It is imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backend.errors import ParameterError

__all__ = [
    "Range",
    "Graph",
    "node_spans",
    "build_graph",
    "neighbourhood",
    "hop_levels",
    "merged_ranges",
]

Range = tuple[int, int]

EDGE_KINDS = ("cosine", "bm25")
# Rows of the similarity matrix computed at once: a block holds at most this many entries,
# so 20,000 nodes never need an n x n matrix (about 16M floats, 64 MB in float32).
_BLOCK_ENTRIES = 1 << 24


def node_spans(sentences: Sequence[Range], per_node: int) -> list[Range]:
    """Group consecutive sentences into graph nodes.

    Args:
        sentences: The sentences' ``(start, end)`` character ranges, in document order.
        per_node: Sentences per node, 1 or 2 (the paper's "one or two sentences"); the last
            node may hold fewer.

    Returns:
        One range per node, from its first sentence's start to its last sentence's end (the
        characters between two grouped sentences belong to the node).

    Raises:
        ParameterError: ``per_node`` is not 1 or 2.
    """
    if per_node not in (1, 2):
        raise ParameterError(f"per_node ({per_node!r}) must be 1 or 2")
    spans = [(int(s), int(e)) for s, e in sentences]
    return [(group[0][0], group[-1][1]) for group in (spans[i : i + per_node] for i in range(0, len(spans), per_node))]


@dataclass(frozen=True)
class Graph:
    """An undirected similarity graph over a document's nodes.

    Attributes:
        n: Number of nodes (0 … n-1, in document order).
        edges: ``(i, j, weight)`` with ``i < j``, sorted; the weight is the similarity that
            selected the edge (the larger one when both directions did).
        edge_kind: ``"cosine"`` or ``"bm25"``.
        k_graph: Neighbours each node chose.
        t_graph: Similarity threshold the edges were built with.
    """

    n: int
    edges: tuple[tuple[int, int, float], ...]
    edge_kind: str
    k_graph: int
    t_graph: float

    def neighbours(self) -> list[tuple[int, ...]]:
        """Adjacency lists: for each node, its neighbours sorted by index."""
        adjacency: list[list[int]] = [[] for _ in range(self.n)]
        for i, j, _ in self.edges:
            adjacency[i].append(j)
            adjacency[j].append(i)
        return [tuple(sorted(a)) for a in adjacency]

    def degrees(self) -> np.ndarray:
        """Number of neighbours of each node (int64, length ``n``)."""
        deg = np.zeros(self.n, dtype=np.int64)
        if self.edges:
            pairs = np.asarray([(i, j) for i, j, _ in self.edges], dtype=np.int64)
            np.add.at(deg, pairs.ravel(), 1)
        return deg

    def to_json(self) -> dict:
        """A JSON-ready dict (``edges`` as ``[i, j, weight]`` lists); :meth:`from_json` reads it back."""
        return {
            "n": self.n,
            "edge_kind": self.edge_kind,
            "k_graph": self.k_graph,
            "t_graph": self.t_graph,
            "edges": [[i, j, w] for i, j, w in self.edges],
        }

    @classmethod
    def from_json(cls, data: dict) -> Graph:
        """The graph :meth:`to_json` wrote.

        Raises:
            ParameterError: A field is missing or an edge does not name two distinct nodes.
        """
        try:
            n = int(data["n"])
            edges = tuple(sorted((int(i), int(j), float(w)) for i, j, w in data["edges"]))
            graph = cls(n, edges, str(data["edge_kind"]), int(data["k_graph"]), float(data["t_graph"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ParameterError(f"graph JSON is malformed: {e}") from e
        bad = [(i, j) for i, j, _ in edges if not 0 <= i < j < n]
        if bad:
            raise ParameterError(f"graph JSON edge {bad[0]} is not i < j within {n} nodes")
        return graph

    def with_threshold(self, t_graph: float) -> Graph:
        """The same graph keeping only edges with weight ``>= t_graph`` (no recomputation).

        Equal to rebuilding with the higher threshold, since each node's top ``k_graph`` does not
        depend on it; a lower threshold would need edges that were never kept.

        Raises:
            ParameterError: ``t_graph`` is below the threshold this graph was built with.
        """
        t = float(t_graph)
        if t < self.t_graph:
            raise ParameterError(
                f"t_graph ({t_graph}) is below the graph's {self.t_graph}: rebuild the graph to lower the threshold"
            )
        return Graph(self.n, tuple(e for e in self.edges if e[2] >= t), self.edge_kind, self.k_graph, t)


def build_graph(
    *,
    k_graph: int,
    t_graph: float,
    edge: str = "cosine",
    vectors: np.ndarray | None = None,
    texts: Sequence[str] | None = None,
) -> Graph:
    """Link each node to its ``k_graph`` most similar nodes whose similarity is at least ``t_graph``.

    ``edge="cosine"``: ``vectors`` holds one L2-normalised row per node and the similarity is the
    dot product. Rows are compared in blocks of at most 1,024 (never an n x n matrix for a large
    ``n``), each row's top ``k_graph`` found with ``np.partition``.

    ``edge="bm25"`` (the paper's): each node's text is a query against all nodes, with ``bm25s``
    (Lucene BM25, k1=1.5, b=0.75), tokenised by ``bm25s.tokenize`` (lowercase, English stopwords,
    no stemmer). Raw BM25 scores are unbounded and grow with the query's length, so each query's
    scores are divided by the node's score against itself: similarity 1 means "as good a match as
    the node itself", and ``t_graph`` means the same for long and short nodes (a very short node,
    such as a citation, reaches high similarities from a single shared term). A shorter node that
    repeats the query's terms can score above the node itself; such similarities rank first and
    their weight is clipped to 1. Only nodes sharing a term (score > 0) are linked, even at
    ``t_graph=0``, and a node without tokens (only stopwords or punctuation) gets no edges.

    Args:
        k_graph: Neighbours each node chooses (at least 1).
        t_graph: Minimum similarity of an edge: in [-1, 1] for cosine, [0, 1] for bm25.
        edge: ``"cosine"`` or ``"bm25"``.
        vectors: ``(n, dim)`` array, required for cosine.
        texts: The nodes' texts, required for bm25.

    Returns:
        The :class:`Graph`; an edge's weight is the larger similarity of the directions that chose it.

    Raises:
        ParameterError: Unknown ``edge``, ``k_graph < 1``, ``t_graph`` out of range, missing or
            malformed ``vectors``/``texts``.
    """
    if edge not in EDGE_KINDS:
        raise ParameterError(f"edge ({edge!r}) must be one of {', '.join(EDGE_KINDS)}")
    if isinstance(k_graph, bool) or not isinstance(k_graph, (int, np.integer)) or k_graph < 1:
        raise ParameterError(f"k_graph ({k_graph!r}) must be an integer of at least 1")
    low = -1.0 if edge == "cosine" else 0.0
    if not low <= float(t_graph) <= 1.0:
        raise ParameterError(f"t_graph ({t_graph}) must be in [{low:g}, 1] for {edge} edges")
    k, t = int(k_graph), float(t_graph)
    if edge == "cosine":
        if vectors is None:
            raise ParameterError("vectors are required for cosine edges")
        x = np.asarray(vectors)
        if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
            raise ParameterError(f"vectors (shape {x.shape}) must be a 2-D numeric array, one row per node")
        if texts is not None and len(texts) != x.shape[0]:
            raise ParameterError(f"texts ({len(texts)}) and vectors ({x.shape[0]} rows) differ in length")
        if not np.issubdtype(x.dtype, np.floating):
            x = x.astype(np.float64)
        if not np.isfinite(x).all():
            raise ParameterError("vectors contain NaN or infinite values")
        directed = _cosine_top_k(x, k, t)
        n = x.shape[0]
    else:
        if texts is None:
            raise ParameterError("texts are required for bm25 edges")
        if vectors is not None and len(np.asarray(vectors)) != len(texts):
            raise ParameterError(f"texts ({len(texts)}) and vectors ({len(np.asarray(vectors))} rows) differ in length")
        directed = _bm25_top_k([str(s) for s in texts], k, t)
        n = len(texts)
    return Graph(n, _undirected(directed), edge, k, t)


def _block_rows(n: int) -> int:
    """Rows per similarity block for ``n`` columns."""
    return max(1, min(1024, _BLOCK_ENTRIES // max(n, 1)))


def _row_top_k(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's top ``k`` finite entries (value descending, lower column first on ties) as (rows, cols)."""
    b, n = block.shape
    k = min(k, n)
    if k == 0 or b == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if k < n:
        # The k-th largest value of each row; every entry reaching it is a candidate, so ties at the
        # boundary are all kept and resolved by index below (argpartition would pick among them arbitrarily).
        kth = np.partition(block, n - k, axis=1)[:, n - k]
        rows, cols = np.nonzero((block >= kth[:, None]) & np.isfinite(block))
    else:
        rows, cols = np.nonzero(np.isfinite(block))
    vals = block[rows, cols]
    order = np.lexsort((cols, -vals, rows))
    rows, cols = rows[order], cols[order]
    # Position of each candidate within its row: keep the first k.
    starts = np.searchsorted(rows, rows, side="left")
    first = (np.arange(rows.size) - starts) < k
    return rows[first], cols[first]


def _cosine_top_k(x: np.ndarray, k: int, t: float) -> list[tuple[int, int, float]]:
    """Directed edges ``(i, j, sim)``: j among i's top k others by dot product, sim >= t."""
    n = x.shape[0]
    out: list[tuple[int, int, float]] = []
    step = _block_rows(n)
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = x[start:stop] @ x.T
        block[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        rows, cols = _row_top_k(block, k)
        sims = block[rows, cols]
        ok = sims >= t
        out.extend(zip((rows[ok] + start).tolist(), cols[ok].tolist(), sims[ok].tolist()))
    return out


def _top_k_1d(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest values, largest first, the lower position first on ties."""
    m = values.size
    if m > k:
        kth = np.partition(values, m - k)[m - k]
        pos = np.flatnonzero(values >= kth)  # every tie at the boundary, resolved by position below
    else:
        pos = np.arange(m)
    return pos[np.lexsort((pos, -values[pos]))][:k]


def _bm25_top_k(texts: list[str], k: int, t: float) -> list[tuple[int, int, float]]:
    """Directed edges ``(i, j, sim)`` with sim = BM25(i → j) / BM25(i → i), clipped to 1."""
    import bm25s

    if not texts:
        return []
    tokens = bm25s.tokenize(texts, lower=True, stopwords="english", stemmer=None, return_ids=True, show_progress=False)
    if not any(tokens.ids):
        return []
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    out: list[tuple[int, int, float]] = []
    for i, query in enumerate(tokens.ids):
        if not query:
            continue
        scores = np.asarray(retriever.get_scores(list(query)), dtype=np.float64)
        own = scores[i]
        if own <= 0:
            continue
        # Only nodes sharing a term (score > 0) are candidates, even at t_graph = 0; the row is
        # sparse, so its top-k is taken among those few rather than over all n.
        cand = np.flatnonzero(scores > 0)
        cand = cand[cand != i]
        sims = scores[cand] / own
        best = _top_k_1d(sims, k)
        out.extend((i, int(j), min(float(s), 1.0)) for j, s in zip(cand[best], sims[best]) if s >= t)
    return out


def _undirected(directed: list[tuple[int, int, float]]) -> tuple[tuple[int, int, float], ...]:
    """Union of directed edges as sorted ``(i, j, w)`` with i < j, w the larger of both directions."""
    best: dict[tuple[int, int], float] = {}
    for i, j, w in directed:
        key = (i, j) if i < j else (j, i)
        if key not in best or w > best[key]:
            best[key] = float(w)
    return tuple((i, j, best[(i, j)]) for i, j in sorted(best))


def _check_tokens(node_tokens: Sequence[int], n: int, max_tokens: int) -> None:
    """ParameterError unless there is one token count per node and a positive cap."""
    if len(node_tokens) != n:
        raise ParameterError(f"node_tokens ({len(node_tokens)}) must have one count per node ({n})")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or max_tokens < 1:
        raise ParameterError(f"max_tokens ({max_tokens!r}) must be an integer of at least 1")


def _bfs(
    graph_neighbours: Sequence[Sequence[int]], centre: int, hops: int, node_tokens: Sequence[int], max_tokens: int
) -> list[tuple[int, int]]:
    """``(node, hop)`` in BFS order (hop, then index) up to ``hops``, stopping before the first node over the cap."""
    taken = [(centre, 0)]
    seen = {centre}
    total = int(node_tokens[centre])
    frontier = [centre]
    for hop in range(1, hops + 1):
        layer = sorted({m for v in frontier for m in graph_neighbours[v] if m not in seen})
        if not layer:
            break
        for m in layer:
            total += int(node_tokens[m])
            if total > max_tokens:
                return taken
            taken.append((m, hop))
        seen.update(layer)
        frontier = layer
    return taken


def neighbourhood(
    graph_neighbours: Sequence[Sequence[int]],
    centre: int,
    hops: int,
    node_tokens: Sequence[int],
    max_tokens: int,
) -> tuple[int, ...]:
    """The nodes within ``hops`` hops of ``centre``, capped at ``max_tokens``.

    Nodes are taken in BFS order (by hop, then by node index), each once, and taking stops at the
    first node that would bring the token total over ``max_tokens``: the result is always every
    node of the nearer hops plus a prefix of the last one, so it stays connected. The centre is
    always included, alone if it is over the cap by itself.

    Args:
        graph_neighbours: Adjacency lists (:meth:`Graph.neighbours`).
        centre: The centre node.
        hops: Hopping range (0: the centre alone).
        node_tokens: Token count of each node.
        max_tokens: Cap on the neighbourhood's total tokens.

    Returns:
        The node indices, sorted (document order).

    Raises:
        ParameterError: ``centre`` out of range, ``hops < 0``, ``max_tokens < 1`` or a
            ``node_tokens`` length that is not the number of nodes.
    """
    n = len(graph_neighbours)
    if not 0 <= centre < n:
        raise ParameterError(f"centre ({centre}) must be a node index in [0, {n})")
    if hops < 0:
        raise ParameterError(f"hops ({hops}) must be at least 0")
    _check_tokens(node_tokens, n, max_tokens)
    return tuple(sorted(v for v, _ in _bfs(graph_neighbours, centre, hops, node_tokens, max_tokens)))


def hop_levels(graph: Graph, levels: int, node_tokens: Sequence[int], max_tokens: int) -> list[list[tuple[int, ...]]]:
    """MoGG's granularity levels: the distinct capped neighbourhoods for hopping ranges 0 … levels-1.

    Level ``g`` (1-based) holds :func:`neighbourhood` of every centre with ``hops = g - 1``,
    identical node sets once, in order of first appearance by centre. Level 1 is every node
    alone. One BFS per centre serves all levels (a capped BFS at fewer hops is a prefix of it).

    Args:
        graph: The graph.
        levels: Number of levels (at least 1).
        node_tokens: Token count of each node.
        max_tokens: Cap on a neighbourhood's total tokens.

    Returns:
        ``levels`` lists of sorted node tuples.

    Raises:
        ParameterError: ``levels < 1``, ``max_tokens < 1`` or a ``node_tokens`` length that is not ``graph.n``.
    """
    if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or levels < 1:
        raise ParameterError(f"levels ({levels!r}) must be an integer of at least 1")
    _check_tokens(node_tokens, graph.n, max_tokens)
    adjacency = graph.neighbours()
    seen: list[dict[tuple[int, ...], None]] = [{} for _ in range(levels)]
    for centre in range(graph.n):
        order = _bfs(adjacency, centre, levels - 1, node_tokens, max_tokens)
        for g in range(levels):
            seen[g].setdefault(tuple(sorted(v for v, hop in order if hop <= g)), None)
    return [list(s) for s in seen]


def merged_ranges(node_ranges: Sequence[Range], nodes: Sequence[int]) -> tuple[Range, ...]:
    """The character ranges of a set of nodes, runs of consecutive node indices merged.

    A run of nodes ``i, i+1, …, j`` becomes one range from node ``i``'s start to node ``j``'s
    end; a node given twice counts once.

    Args:
        node_ranges: Every node's ``(start, end)`` range, by node index.
        nodes: The nodes, in any order.

    Returns:
        The ranges, sorted.

    Raises:
        ParameterError: A node index is out of range.
    """
    n = len(node_ranges)
    chosen = sorted(set(int(v) for v in nodes))
    if chosen and not (0 <= chosen[0] and chosen[-1] < n):
        bad = chosen[0] if chosen[0] < 0 else chosen[-1]
        raise ParameterError(f"node ({bad}) must be an index in [0, {n})")
    out: list[Range] = []
    run_start = prev = None
    for v in chosen + [None]:
        if run_start is not None and (v is None or v != prev + 1):
            out.append((int(node_ranges[run_start][0]), int(node_ranges[prev][1])))
            run_start = None
        if v is not None and run_start is None:
            run_start = v
        prev = v
    return tuple(sorted(out))
