"""What a multi-granularity retriever returns for one query, given each level's candidates.

- :func:`mog_select` — MoG's eq. 1–2 (also MoGG's): every unit under a candidate gets
  ``t_rs(c)[g]``, the similarity of the level-g candidate holding it (0 when none was
  retrieved at level g; the best one when several hold it, as MoGG's neighbourhoods can);
  ``score(c) = w · t_rs(c)``; the chosen level is ``argmax w`` (the finer level on ties);
  units are walked by score and each one's parent at the chosen level is emitted, duplicates
  skipped, until ``k`` distinct entries. Parents are never ranked by their own weighted
  score (Appendix A: coarse levels score higher).
- :func:`freechunker_select` — the top ``k`` entries over all levels (units and windows), merged
  per corpus into maximal runs of units, ranked by their best entry.
- :func:`level_similarities` — for each question and level, how well that level's top-1
  entry matches the answer (token IoU, recall, or the embedding cosine): what soft labels and
  the oracle are made of.

Candidates are ``(corpus_id, EntryHit)`` pairs: a question set may span several corpora.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from backend.errors import ParameterError
from backend.retrieval.metrics import span_scores
from backend.retrieval.multi.freechunker import Window, assemble_runs
from backend.retrieval.multi.index import MultiIndex
from backend.retrieval.store import EntryHit
from backend.text.spans import MultiRange

__all__ = ["Pick", "Selection", "Candidates", "mog_select", "freechunker_select", "level_similarities", "chosen_level"]

Range = tuple[int, int]
Candidates = Sequence[Sequence[tuple[str, "EntryHit"]]]  # per level: (corpus_id, hit), best first


@dataclass(frozen=True)
class Pick(MultiRange):
    """One entry a retriever returns for a query.

    Attributes:
        corpus_id: The corpus (document) it is in.
        level: Its level, 1 = finest (FreeChunker runs: the largest window size merged into it).
        index: Its index in its level (FreeChunker: the run's first unit).
        ranges: Its exact character ranges.
        tokens: Tokens of its ranges (FreeChunker: of its units).
        score: MoG(G): the weighted score ``w · t_rs`` of the unit that pulled it in;
            FreeChunker: the best similarity among the entries merged into the run.
        units: The units it covers.
    """

    corpus_id: str
    level: int
    index: int
    ranges: tuple[Range, ...]
    tokens: int
    score: float
    units: tuple[int, ...]


@dataclass(frozen=True)
class Selection:
    """A retriever's answer to one query.

    Attributes:
        picks: What it returns, best first.
        level: The chosen level (1-based; None for FreeChunker).
        weights: The router's weight per level (None for FreeChunker).
        unit_scores: ``(corpus_id, unit, score)`` of every unit under a candidate, best first.
    """

    picks: tuple[Pick, ...]
    level: int | None
    weights: tuple[float, ...] | None
    unit_scores: tuple[tuple[str, int, float], ...]


def chosen_level(weights: Sequence[float]) -> int:
    """MoG's eq. 2: the level (1-based) with the largest weight; the finer one on ties."""
    return int(np.argmax(np.asarray(weights, dtype=np.float64))) + 1


def mog_select(
    indexes: Mapping[str, MultiIndex], candidates: Candidates, weights: Sequence[float], k: int
) -> Selection:
    """MoG's selection (eq. 1–2; see the module docstring).

    Args:
        indexes: Each corpus's index (its levels give units, entries and parents).
        candidates: Per level, the top ``k_r`` ``(corpus_id, hit)`` pairs.
        weights: One weight per level.
        k: Distinct entries to return at most.
    """
    w = np.asarray(weights, dtype=np.float64)
    t: dict[tuple[str, int], np.ndarray] = {}
    for g, hits in enumerate(candidates):
        for cid, h in hits:
            entry = indexes[cid].levels[g].entries[h.index]
            for u in entry.units:
                vec = t.setdefault((cid, u), np.zeros(len(w)))
                vec[g] = max(vec[g], h.similarity)
    scored = sorted(((float(w @ vec), cid, u) for (cid, u), vec in t.items()), key=lambda x: (-x[0], x[1], x[2]))
    level = chosen_level(w)
    picks: list[Pick] = []
    seen: set[tuple[str, int]] = set()
    for score, cid, u in scored:
        if len(picks) >= k or score <= 0:
            break
        lv = indexes[cid].levels[level - 1]
        parent = lv.parent[u]
        if (cid, parent) in seen:
            continue
        seen.add((cid, parent))
        e = lv.entries[parent]
        picks.append(Pick(cid, level, parent, e.ranges, e.tokens, score, e.units))
    return Selection(tuple(picks), level, tuple(float(x) for x in w), tuple((c, u, s) for s, c, u in scored))


def freechunker_select(indexes: Mapping[str, MultiIndex], candidates: Candidates, k: int) -> Selection:
    """FreeChunker's query: the top ``k`` entries of all levels, merged into maximal runs per corpus.

    Args:
        indexes: Each corpus's index.
        candidates: Per level (units, then each window size), the top ``k`` ``(corpus_id, hit)`` pairs.
        k: Entries taken before merging (the runs are at most ``k``).
    """
    pooled = sorted(
        ((h.distance, g, cid, h) for g, hits in enumerate(candidates) for cid, h in hits),
        key=lambda x: (x[0], x[1], x[2], x[3].index),
    )[:k]
    by_corpus: dict[str, list[tuple[Window, float, int]]] = {}
    for _, g, cid, h in pooled:
        level = indexes[cid].levels[g]
        units = level.entries[h.index].units
        by_corpus.setdefault(cid, []).append((Window(level.size, units[0], units[-1] + 1), h.similarity, level.size))
    picks = []
    for cid, hits in by_corpus.items():
        index = indexes[cid]
        unit_chunks = index.units.chunks
        runs = assemble_runs([(win, sim) for win, sim, _ in hits], index.unit_ranges())
        for run in runs:
            size = max(hits[i][2] for i in run.entries)
            units = tuple(range(run.first, run.last))
            picks.append(Pick(cid, size, run.first, ((run.start, run.end),),
                              sum(unit_chunks[u].tokens for u in units), run.score, units))
    picks.sort(key=lambda p: (-p.score, p.corpus_id, p.index))
    scores = [(p.corpus_id, u, p.score) for p in picks for u in p.units]
    return Selection(tuple(picks), None, None, tuple(scores))


def level_similarities(
    candidates: Sequence[Candidates],
    corpus_ids: Sequence[str],
    excerpts: Sequence[Sequence[Range]],
    label: str,
    *,
    entry_vectors: Sequence[Sequence[np.ndarray | None]] | None = None,
    answer_vectors: np.ndarray | None = None,
    top: int = 1,
) -> np.ndarray:
    """How well each level's top-1 entry matches each question's answer: MoG's ``sim_best``.

    Args:
        candidates: Per question, its per-level candidates (best first).
        corpus_ids: Per question, its corpus (a top-1 entry of another corpus scores 0).
        excerpts: Per question, its answer's character ranges.
        label: ``iou`` (token IoU of the entry's ranges with the excerpts, as the Chroma
            report's metric), ``recall`` (share of the excerpts' characters it holds) or
            ``embedding`` (cosine of its vector with the answer's).
        entry_vectors: For ``embedding``: per question and level, the top-1 entry's vector.
        answer_vectors: For ``embedding``: per question, the answer's vector.
        top: ``iou`` and ``recall`` score the union of the level's ``top`` best entries (1:
            the paper's top-1); ``embedding`` always compares the top-1 entry.

    Returns:
        A ``(questions, levels)`` array; 0 where a level returned nothing.
    """
    if label not in {"iou", "recall", "embedding"}:
        raise ParameterError(f"label must be iou, recall or embedding, got {label!r}")
    levels = max((len(c) for c in candidates), default=0)
    out = np.zeros((len(candidates), levels), dtype=np.float64)
    for i, per_level in enumerate(candidates):
        for g, hits in enumerate(per_level):
            if not hits:
                continue
            if label == "embedding":
                vec = entry_vectors[i][g] if entry_vectors is not None else None
                if vec is not None and answer_vectors is not None:
                    out[i, g] = max(0.0, float(np.dot(vec, answer_vectors[i])))
                continue
            ranges = [r for c, h in hits[:top] if c == corpus_ids[i] for r in h.ranges]
            other = sum(e - b for c, h in hits[:top] if c != corpus_ids[i] for b, e in h.ranges)
            if not ranges:
                continue
            s = span_scores(ranges, list(excerpts[i]), other_chars=other)
            out[i, g] = s.iou if label == "iou" else s.recall
    return out
