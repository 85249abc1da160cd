"""MoGG's graph: node spans, cosine and BM25 edges, hop neighbourhoods and merged ranges, on exact small cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backend.errors import ParameterError
from backend.retrieval.multi.graph import (
    Graph,
    build_graph,
    hop_levels,
    merged_ranges,
    neighbourhood,
    node_spans,
)


def unit(*degrees: float) -> np.ndarray:
    """Unit vectors in the plane at the given angles."""
    a = np.radians(degrees)
    return np.stack([np.cos(a), np.sin(a)], axis=1)


# Angles 0, 10, 30, 90, 180 degrees: cosine similarity is the cosine of the angle between.
FIVE = unit(0, 10, 30, 90, 180)


def pairs(graph: Graph) -> list[tuple[int, int]]:
    return [(i, j) for i, j, _ in graph.edges]


# --- node_spans ---------------------------------------------------------------------------------


def test_node_spans_one_and_two_sentences_per_node():
    sentences = [(0, 5), (6, 12), (13, 20)]
    assert node_spans(sentences, 1) == [(0, 5), (6, 12), (13, 20)]
    assert node_spans(sentences, 2) == [(0, 12), (13, 20)]
    assert node_spans(sentences[:2], 2) == [(0, 12)]
    assert node_spans([], 2) == []


def test_node_spans_rejects_other_group_sizes():
    with pytest.raises(ParameterError, match="per_node"):
        node_spans([(0, 5)], 3)


# --- cosine edges --------------------------------------------------------------------------------


def test_cosine_k1_links_each_node_to_its_nearest():
    g = build_graph(k_graph=1, t_graph=-1.0, vectors=FIVE)
    # 0→1, 1→0, 2→1, 3→2 (cos 60°), 4→3 (cos 90° beats the others' negative cosines)
    assert pairs(g) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    weights = [w for _, _, w in g.edges]
    assert weights == pytest.approx([np.cos(np.radians(10)), np.cos(np.radians(20)), 0.5, 0.0], abs=1e-12)
    assert (g.n, g.edge_kind, g.k_graph, g.t_graph) == (5, "cosine", 1, -1.0)


def test_cosine_threshold_drops_weak_choices():
    g = build_graph(k_graph=1, t_graph=0.6, vectors=FIVE)
    assert pairs(g) == [(0, 1), (1, 2)]


def test_cosine_k2_is_the_union_of_both_directions():
    g = build_graph(k_graph=2, t_graph=-1.0, vectors=FIVE)
    # 0→{1,2} 1→{0,2} 2→{0,1} 3→{1,2} 4→{2,3}: (1,3) and (2,4) exist although 1 and 2 did not choose them.
    assert pairs(g) == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4)]
    assert build_graph(k_graph=2, t_graph=0.4, vectors=FIVE).edges == g.with_threshold(0.4).edges
    assert pairs(g.with_threshold(0.4)) == [(0, 1), (0, 2), (1, 2), (2, 3)]


def test_cosine_ties_go_to_the_lower_index():
    x = np.array([[1.0, 0.0], [0.6, 0.8], [0.6, -0.8]])  # 0·1 == 0·2 == 0.6
    g = build_graph(k_graph=1, t_graph=-1.0, vectors=x)
    # 0 picks 1 (tie, lower index); 2 picks 0, so (0, 2) comes from 2's side.
    assert pairs(g) == [(0, 1), (0, 2)]


def test_k_graph_larger_than_the_graph_links_everything():
    g = build_graph(k_graph=10, t_graph=-1.0, vectors=FIVE[:3])
    assert pairs(g) == [(0, 1), (0, 2), (1, 2)]
    assert build_graph(k_graph=3, t_graph=0.0, vectors=FIVE[:1]).edges == ()
    assert build_graph(k_graph=3, t_graph=0.0, vectors=np.zeros((0, 4))).n == 0


def brute_force(x: np.ndarray, k: int, t: float) -> dict[tuple[int, int], float]:
    s = x @ x.T
    np.fill_diagonal(s, -np.inf)
    best: dict[tuple[int, int], float] = {}
    for i in range(len(x)):
        order = np.lexsort((np.arange(len(x)), -s[i]))[:k]
        for j in order:
            if s[i, j] >= t:
                key = (min(i, j), max(i, j))
                best[key] = max(best.get(key, -np.inf), s[i, j])
    return best


def test_blocked_top_k_equals_brute_force_on_a_random_graph():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2000, 64))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for k, t in [(3, -1.0), (5, 0.2)]:
        g = build_graph(k_graph=k, t_graph=t, vectors=x)
        expected = brute_force(x, k, t)
        assert pairs(g) == sorted(expected)
        assert [w for _, _, w in g.edges] == pytest.approx([expected[p] for p in sorted(expected)], abs=1e-9)


def test_with_threshold_equals_a_rebuild_and_refuses_to_lower():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    g = build_graph(k_graph=4, t_graph=0.0, vectors=x)
    for t in (0.1, 0.3, 0.5):
        assert g.with_threshold(t) == build_graph(k_graph=4, t_graph=t, vectors=x)
    with pytest.raises(ParameterError, match="rebuild"):
        g.with_threshold(-0.1)


# --- BM25 edges ----------------------------------------------------------------------------------

TEXTS = [
    "Photosynthesis converts sunlight into chemical energy.",
    "Chlorophyll absorbs sunlight during photosynthesis.",
    "The stock market fell sharply on Monday.",
    "Investors sold shares as the market fell.",
    "This is not that, or is it?",  # only stopwords and one-letter words: no tokens
]


def test_bm25_links_texts_that_share_rare_words():
    g = build_graph(k_graph=1, t_graph=0.0, edge="bm25", texts=TEXTS)
    assert pairs(g) == [(0, 1), (2, 3)]
    assert all(0.0 < w <= 1.0 for _, _, w in g.edges)
    assert g.degrees().tolist() == [1, 1, 1, 1, 0]
    # k_graph 3 still finds no partner for the stopword-only node nor across topics (no shared term).
    assert pairs(build_graph(k_graph=3, t_graph=0.0, edge="bm25", texts=TEXTS)) == [(0, 1), (2, 3)]


def test_bm25_similarity_is_relative_to_the_self_score():
    # Identical texts match each other as well as themselves: similarity 1.
    g = build_graph(k_graph=1, t_graph=0.0, edge="bm25", texts=["red apples ripen", "red apples ripen", "blue sea"])
    assert g.edges == ((0, 1, pytest.approx(1.0)),)
    weak = build_graph(k_graph=2, t_graph=0.0, edge="bm25", texts=TEXTS[:2] + ["sunlight"] + TEXTS[2:])
    assert weak.with_threshold(0.99).edges == ()  # nothing here is a near-duplicate


def test_bm25_with_threshold_equals_a_rebuild():
    g = build_graph(k_graph=2, t_graph=0.0, edge="bm25", texts=TEXTS)
    for t in (0.1, 0.25, 0.5):
        assert g.with_threshold(t) == build_graph(k_graph=2, t_graph=t, edge="bm25", texts=TEXTS)


def test_bm25_without_any_token_has_no_edges():
    g = build_graph(k_graph=2, t_graph=0.0, edge="bm25", texts=["the and of", "it is a"])
    assert (g.n, g.edges) == (2, ())
    assert build_graph(k_graph=2, t_graph=0.0, edge="bm25", texts=[]).n == 0


# --- the Graph value -----------------------------------------------------------------------------


def test_graph_neighbours_degrees_and_json_round_trip():
    g = build_graph(k_graph=2, t_graph=-1.0, vectors=FIVE)
    assert g.neighbours() == [(1, 2), (0, 2, 3), (0, 1, 3, 4), (1, 2, 4), (2, 3)]
    assert g.degrees().tolist() == [2, 3, 4, 3, 2]
    data = json.loads(json.dumps(g.to_json()))
    assert set(data) == {"n", "edge_kind", "k_graph", "t_graph", "edges"}
    assert Graph.from_json(data) == g
    with pytest.raises(ParameterError, match="edge"):
        Graph.from_json({**data, "edges": [[2, 2, 0.5]]})


# --- neighbourhoods ------------------------------------------------------------------------------

# 0 - 1 - 3 - 5
#  \
#   2 - 4
TREE = [(1, 2), (0, 3), (0, 4), (1, 5), (2,), (3,)]


def test_neighbourhood_takes_whole_hops_then_lower_indices():
    tens = [10] * 6
    assert neighbourhood(TREE, 0, 0, tens, 100) == (0,)
    assert neighbourhood(TREE, 0, 1, tens, 100) == (0, 1, 2)
    assert neighbourhood(TREE, 0, 2, tens, 100) == (0, 1, 2, 3, 4)
    assert neighbourhood(TREE, 0, 9, tens, 100) == (0, 1, 2, 3, 4, 5)
    assert neighbourhood(TREE, 0, 2, tens, 35) == (0, 1, 2)  # hop 2 starts with 3, which would make 40
    assert neighbourhood(TREE, 3, 1, tens, 20) == (1, 3)  # of hop 1's {1, 5}, the lower index first
    assert neighbourhood(TREE, 5, 3, tens, 30) == (1, 3, 5)


def test_neighbourhood_stops_at_the_first_node_over_the_cap():
    # 1 does not fit; the BFS stops there rather than skipping to 2 (which would leave a gap).
    assert neighbourhood(TREE, 0, 2, [10, 50, 5, 5, 5, 5], 40) == (0,)


def test_neighbourhood_keeps_the_centre_alone_over_the_cap():
    assert neighbourhood(TREE, 0, 2, [500, 1, 1, 1, 1, 1], 100) == (0,)


def test_hop_levels_deduplicate_and_level_one_is_every_node():
    g = Graph(n=4, edges=((0, 1, 0.9), (1, 2, 0.8)), edge_kind="cosine", k_graph=1, t_graph=0.5)
    ones = [1, 1, 1, 1]
    assert hop_levels(g, 3, ones, 100) == [
        [(0,), (1,), (2,), (3,)],
        [(0, 1), (0, 1, 2), (1, 2), (3,)],
        [(0, 1, 2), (3,)],
    ]
    assert hop_levels(g, 3, ones, 2) == [
        [(0,), (1,), (2,), (3,)],
        [(0, 1), (1, 2), (3,)],  # centre 1 takes 0 and then is full
        [(0, 1), (1, 2), (3,)],
    ]


def test_hop_levels_agree_with_neighbourhood():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((200, 8))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    g = build_graph(k_graph=3, t_graph=0.0, vectors=x)
    tokens = rng.integers(5, 60, size=200).tolist()
    levels = hop_levels(g, 4, tokens, 150)
    adjacency = g.neighbours()
    for hops, level in enumerate(levels):
        expected = list(dict.fromkeys(neighbourhood(adjacency, c, hops, tokens, 150) for c in range(200)))
        assert level == expected
        assert all(sum(tokens[v] for v in nodes) <= 150 or len(nodes) == 1 for nodes in level)


# --- merged ranges -------------------------------------------------------------------------------


def test_merged_ranges_joins_consecutive_nodes():
    ranges = [(0, 10), (11, 20), (21, 30), (31, 40)]
    assert merged_ranges(ranges, [3, 0, 1]) == ((0, 20), (31, 40))
    assert merged_ranges(ranges, [2, 1, 2, 3]) == ((11, 40),)
    assert merged_ranges(ranges, [0, 2]) == ((0, 10), (21, 30))
    assert merged_ranges(ranges, []) == ()


# --- argument checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k_graph": 1, "t_graph": 0.0, "edge": "jaccard", "vectors": FIVE}, "edge"),
        ({"k_graph": 0, "t_graph": 0.0, "vectors": FIVE}, "k_graph"),
        ({"k_graph": 1, "t_graph": 1.5, "vectors": FIVE}, "t_graph"),
        ({"k_graph": 1, "t_graph": -0.1, "edge": "bm25", "texts": TEXTS}, "t_graph"),
        ({"k_graph": 1, "t_graph": 0.0}, "vectors"),
        ({"k_graph": 1, "t_graph": 0.0, "edge": "bm25"}, "texts"),
        ({"k_graph": 1, "t_graph": 0.0, "vectors": FIVE, "texts": TEXTS[:2]}, "length"),
        ({"k_graph": 1, "t_graph": 0.0, "edge": "bm25", "texts": TEXTS, "vectors": FIVE[:2]}, "length"),
        ({"k_graph": 1, "t_graph": 0.0, "vectors": FIVE[0]}, "2-D"),
        ({"k_graph": 1, "t_graph": 0.0, "vectors": np.array([[np.nan, 1.0]])}, "NaN"),
    ],
)
def test_build_graph_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        build_graph(**kwargs)


def test_neighbourhood_and_levels_reject_bad_arguments():
    tens = [10] * 6
    with pytest.raises(ParameterError, match="centre"):
        neighbourhood(TREE, 6, 1, tens, 100)
    with pytest.raises(ParameterError, match="hops"):
        neighbourhood(TREE, 0, -1, tens, 100)
    with pytest.raises(ParameterError, match="max_tokens"):
        neighbourhood(TREE, 0, 1, tens, 0)
    with pytest.raises(ParameterError, match="node_tokens"):
        neighbourhood(TREE, 0, 1, tens[:5], 100)
    g = Graph(n=2, edges=((0, 1, 1.0),), edge_kind="cosine", k_graph=1, t_graph=0.0)
    with pytest.raises(ParameterError, match="levels"):
        hop_levels(g, 0, [1, 1], 10)
    with pytest.raises(ParameterError, match="node_tokens"):
        hop_levels(g, 2, [1], 10)
    with pytest.raises(ParameterError, match="node"):
        merged_ranges([(0, 5)], [1])


def test_importing_the_module_does_not_load_bm25s():
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = "import sys, backend.retrieval.multi.graph\nprint('bm25s' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
