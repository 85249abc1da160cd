"""Deterministic per-token NLLs and margins without a model, for tests of what is computed from model outputs."""

from __future__ import annotations

import re

import numpy as np

from backend.models.rates import RateKey, rate_store
from backend.models.scoring import pair_work
from backend.models.types import ModelInfo, TokenScores

__all__ = ["ClockedPairScorer", "FakeScorer", "fake_token_scores"]


def fake_token_scores(text: str, *, pattern: str = r"\S+", seed: int = 7, window: int | None = None) -> TokenScores:
    """One "token" per match of ``pattern`` with a gamma-distributed NLL (a bumpy PPL curve); the first is nan."""
    spans = [(m.start(), m.end()) for m in re.finditer(pattern, text)]
    nll = np.random.default_rng(seed).gamma(2.0, 1.5, size=len(spans))
    if len(spans):
        nll[0] = np.nan
    return TokenScores(
        starts=np.array([a for a, _ in spans], dtype=np.int64),
        ends=np.array([b for _, b in spans], dtype=np.int64),
        nll=nll,
        window=window or 8192,
    )


class FakeScorer:
    """A model-free scorer: token NLLs per character (a bumpy PPL curve), margins seeded by the prompt; counts calls.

    Enough of :class:`~backend.models.types.Scorer` for the PPL and margin-sampling chunkers.
    """

    info = ModelInfo("fake", "", "lm", 0, "cpu", "float32", "fake-curves")

    def __init__(self) -> None:
        self.calls = 0

    def token_nll(self, text, *, window=None, progress=None):
        """Fake token scores of ``text`` (one "token" per non-space character)."""
        self.calls += 1
        return fake_token_scores(text, pattern=r"\S", seed=11, window=window)

    def next_token_probs(self, messages, candidates):
        """``{"1": p, "2": 1 - p}`` with ``p`` drawn from a seed of the last message."""
        self.calls += 1
        seed = sum(map(ord, messages[-1]["content"])) % 1000
        p = np.random.default_rng(seed).uniform()
        return {"1": p, "2": 1 - p}


class ClockedPairScorer:
    """A pair scorer on a scripted clock: each pair takes its weight (``pair_work``) / ``chars_per_s`` seconds.

    It reports pair by pair with the pairs' work and records its speed in the rate store after
    each call, as the local scorer does; :meth:`clock` is the clock to give a ``Progress``, so a
    test knows every moment's time left exactly.
    """

    info = ModelInfo("clocked-scorer", "tests", "lm", 0, "cpu", "float32", "fp-clocked-scorer", 4096)

    def __init__(self, chars_per_s: float) -> None:
        self.chars_per_s = chars_per_s
        self.now = 0.0

    def clock(self) -> float:
        """The scripted time: the seconds of the pairs scored so far."""
        return self.now

    def conditional_nll(self, pairs, *, progress=None):
        weights = pair_work([(str(d), str(q)) for d, q in pairs])
        total, done = float(sum(weights)), 0.0
        for i, w in enumerate(weights):
            self.now += w / self.chars_per_s
            done += w
            if progress is not None:
                progress(i + 1, len(pairs), work=(done, total))
        rate_store().record(RateKey.of(self.info, "pairs"), len(pairs), total, total / self.chars_per_s)
        return [2.0 + 0.01 * len(q) for _d, q in pairs]
