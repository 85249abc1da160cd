"""Deterministic per-token NLLs without a model, for tests of what is computed from token scores."""

from __future__ import annotations

import re

import numpy as np

from backend.models.types import TokenScores

__all__ = ["fake_token_scores"]


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
