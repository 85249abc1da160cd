"""The tuning/held-out split of a question set: seeded, per corpus, disjoint.

A tuning run chooses its configuration on the *tuning* questions and reports the choice's score
on the *held-out* ones, which no trial ever saw: the search's winner's curse (the best of many
noisy scores is biased upwards) stays out of the reported number. The split is stratified by
corpus, so every document of a folder is on both sides: about two thirds of each corpus's
questions tune, the rest are held out, and a corpus with at least two questions holds out at
least one (and tunes on at least one).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from backend.errors import ParameterError

__all__ = ["HELD_OUT_SHARE", "Split", "split_questions", "subset"]

HELD_OUT_SHARE = 1 / 3


@dataclass(frozen=True)
class Split:
    """Indices (into the question set) of the tuning and the held-out questions, each sorted, disjoint."""

    tuning: tuple[int, ...]
    held_out: tuple[int, ...]

    def to_json(self) -> dict[str, list[int]]:
        """``{"tuning": [...], "held_out": [...]}``."""
        return {"tuning": list(self.tuning), "held_out": list(self.held_out)}


def split_questions(corpus_ids: Sequence[str], seed: int = 0, held_out: float = HELD_OUT_SHARE) -> Split:
    """Split questions, given each one's corpus id in set order, into tuning and held-out indices.

    Per corpus, its questions are shuffled with ``seed`` and ``round(n * held_out)`` of them
    (at least one when ``n >= 2``, at most ``n - 1``) are held out. A corpus of one question tunes.

    Raises:
        ParameterError: fewer than two questions in all (nothing could be held out).

    >>> split_questions(["a"] * 6 + ["b"] * 3, seed=0).held_out
    (0, 5, 7)
    """
    if len(corpus_ids) < 2:
        raise ParameterError(f"tuning needs at least 2 questions to hold some out (the set has {len(corpus_ids)})")
    by_corpus: dict[str, list[int]] = {}
    for i, cid in enumerate(corpus_ids):
        by_corpus.setdefault(cid, []).append(i)
    held: list[int] = []
    for cid, idx in by_corpus.items():
        n = len(idx)
        if n < 2:
            continue
        k = min(n - 1, max(1, round(n * held_out)))
        rng = random.Random(f"{seed}|{cid}")
        held += rng.sample(idx, k)
    held_set = set(held)
    if not held_set:
        raise ParameterError("tuning needs a corpus with at least 2 questions to hold some out")
    return Split(tuple(i for i in range(len(corpus_ids)) if i not in held_set), tuple(sorted(held_set)))


def subset(indices: Sequence[int], seed: int = 0, share: float = 1 / 3) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A seeded ``share`` of ``indices`` (at least one) and the rest, both sorted: the pruner's cheap first look.

    >>> subset(range(6), seed=0)
    ((1, 4), (0, 2, 3, 5))
    """
    idx = list(indices)
    if not idx:
        return (), ()
    k = max(1, round(len(idx) * share))
    first = set(random.Random(f"subset|{seed}").sample(idx, k))
    return tuple(sorted(first)), tuple(i for i in idx if i not in first)
