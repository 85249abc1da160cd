"""MoG's levels and selection (eq. 1-2), pinned on hand-built indexes."""

from __future__ import annotations

import numpy as np
import pytest

from backend.chunking import ChunkerConfig, Chunk, Chunking
from backend.errors import ParameterError
from backend.retrieval.multi.index import Entry, Level, MultiIndex, mog_levels
from backend.retrieval.multi.select import chosen_level, level_similarities, mog_select
from backend.retrieval.store import EntryHit
from backend.text.document import Document

UNITS = [(0, 10), (10, 20), (20, 30), (30, 40), (40, 50)]


def test_mog_levels_join_two_adjacent_entries():
    levels = mog_levels(UNITS, 3)
    assert levels[0] == [((0,), (0, 10)), ((1,), (10, 20)), ((2,), (20, 30)), ((3,), (30, 40)), ((4,), (40, 50))]
    assert levels[1] == [((0, 1), (0, 20)), ((2, 3), (20, 40)), ((4,), (40, 50))]
    assert levels[2] == [((0, 1, 2, 3), (0, 40)), ((4,), (40, 50))]


def _index(levels: int = 3) -> MultiIndex:
    doc = Document.from_text("x" * 50, source="t.txt")
    chunks = tuple(Chunk(i, s, e, doc.text[s:e], 2) for i, (s, e) in enumerate(UNITS))
    units = Chunking(ChunkerConfig.make("mog"), chunks, 0.0, doc.id, len(doc.text))
    built = []
    for j, level in enumerate(mog_levels(UNITS, levels), 1):
        entries = tuple(Entry(i, us, (r,), 2 * len(us)) for i, (us, r) in enumerate(level))
        parent = tuple(u >> (j - 1) for u in range(len(UNITS)))
        built.append(Level(j, f"L{j}", entries, parent, f"c{j}"))
    return MultiIndex(ChunkerConfig.make("mog"), doc, units, tuple(built), None, 0.0, 0, True)


def _hit(index: int, sim: float, ranges=((0, 1),)) -> EntryHit:
    return EntryHit(rank=1, distance=1.0 - sim, index=index, ranges=ranges, tokens=1)


def test_eq1_scores_units_and_eq2_picks_the_heaviest_level():
    ix = {"a": _index()}
    candidates = [
        [("a", _hit(3, 0.9)), ("a", _hit(0, 0.5))],  # level 1: units 3 and 0
        [("a", _hit(0, 0.6))],  # level 2: units 0, 1
        [("a", _hit(1, 0.4))],  # level 3: unit 4
    ]
    sel = mog_select(ix, candidates, [0.2, 1.0, 0.1], k=5)
    assert sel.level == 2
    scores = {(c, u): s for c, u, s in sel.unit_scores}
    assert scores[("a", 0)] == pytest.approx(0.2 * 0.5 + 1.0 * 0.6)
    assert scores[("a", 1)] == pytest.approx(0.6)
    assert scores[("a", 3)] == pytest.approx(0.2 * 0.9)
    assert scores[("a", 4)] == pytest.approx(0.1 * 0.4)
    # Units by score: 0 (0.7) → parent 0; 1 (0.6) → parent 0 again (skipped); 3 (0.18) → parent 1; 4 → parent 2.
    assert [p.index for p in sel.picks] == [0, 1, 2]
    assert [p.ranges for p in sel.picks] == [((0, 20),), ((20, 40),), ((40, 50),)]
    assert all(p.level == 2 for p in sel.picks)


def test_selection_stops_at_k_distinct_parents():
    ix = {"a": _index()}
    candidates = [[("a", _hit(i, 0.9 - 0.1 * i)) for i in range(5)], [], []]
    sel = mog_select(ix, candidates, [1.0, 0.0, 0.0], k=2)
    assert [p.index for p in sel.picks] == [0, 1]


def test_a_fixed_level_only_counts_units_under_its_own_hits():
    ix = {"a": _index()}
    candidates = [[("a", _hit(4, 0.99))], [("a", _hit(1, 0.3))], []]
    sel = mog_select(ix, candidates, [0.0, 1.0, 0.0], k=3)  # level:2
    assert [p.index for p in sel.picks] == [1]  # unit 4's level-1 hit weighs nothing


def test_parents_are_not_ranked_by_their_own_similarity():
    """Appendix A: a coarse parent with a higher similarity does not jump ahead of the best unit's parent."""
    ix = {"a": _index()}
    candidates = [[("a", _hit(4, 0.8))], [], [("a", _hit(0, 0.95))]]
    sel = mog_select(ix, candidates, [1.0, 0.0, 0.9], k=2)
    assert sel.level == 1
    # unit 4: 1.0*0.8 = 0.8 ; units 0-3: 0.9*0.95 = 0.855 → units 0..3 first, each its own level-1 parent.
    assert [p.index for p in sel.picks] == [0, 1]


def test_chosen_level_breaks_ties_towards_the_finer_level():
    assert chosen_level([1, 1, 1]) == 1
    assert chosen_level([0.1, 0.7, 0.7]) == 2


def test_level_similarities_iou_recall_and_other_corpus():
    cands = [[[("a", _hit(0, 0.9, ((0, 10),)))], [("b", _hit(0, 0.9, ((0, 10),)))], []]]
    iou = level_similarities(cands, ["a"], [[(0, 5)]], "iou")
    assert iou.tolist() == [[0.5, 0.0, 0.0]]
    rec = level_similarities(cands, ["a"], [[(0, 5)]], "recall")
    assert rec.tolist() == [[1.0, 0.0, 0.0]]
    with pytest.raises(ParameterError):
        level_similarities(cands, ["a"], [[(0, 5)]], "bm25")


def test_level_similarities_embedding_uses_vectors():
    cands = [[[("a", _hit(0, 0.9))], [("a", _hit(0, 0.9))]]]
    v = np.eye(3, dtype=np.float32)
    sims = level_similarities(cands, ["a"], [[(0, 1)]], "embedding", entry_vectors=[[v[0], v[1]]], answer_vectors=v[:1])
    assert sims.tolist() == [[1.0, 0.0]]
