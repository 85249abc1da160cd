"""Model-free stand-ins for the quality-metric tests: a deterministic scorer, a call counter, small chunkings and scores."""

from __future__ import annotations

import numpy as np

from backend.chunking import Chunk, ChunkerConfig, Chunking
from backend.metrics.formulas import PairTable
from backend.metrics.report import QualityData
from backend.models.types import ModelInfo

__all__ = ["TEXTS", "Counting", "LengthScorer", "SeededEmbedder", "chunking_of", "quality_data", "random_table"]

TEXTS = (
    "The cat sat on the mat.",
    "It was warm by the <b>fire</b> & quiet.",
    "Stock prices fell sharply on Monday.",
    "Investors worried about inflation.",
    "The cat went back to sleep.",
)


class LengthScorer:
    """A deterministic stand-in scorer: a pair's "NLL" depends on the two texts' shared words."""

    info = ModelInfo("length-scorer", "tests", "lm", 0, "cpu", "float32", "fp-length-scorer", 4096)

    def conditional_nll(self, pairs, *, progress=None):
        out = []
        for d, q in pairs:
            shared = len(set(d.lower().split()) & set(q.lower().split()))
            out.append(2.0 + 0.01 * len(q) - 0.4 * shared)
        if progress is not None:
            progress(len(pairs), len(pairs))
        return out


class SeededEmbedder:
    """A model-free embedder: a seeded unit vector per text; counts its calls."""

    info = ModelInfo("seeded-embedder", "tests", "embedder", 0, "cpu", "float32", "fp-seeded-embedder")

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts, *, progress=None):
        self.calls += 1
        rows = [np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts]
        vectors = np.array(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Counting:
    """Wraps a scorer and counts its model calls."""

    def __init__(self, inner) -> None:
        self.inner, self.info, self.calls = inner, inner.info, 0

    def conditional_nll(self, pairs, *, progress=None):
        self.calls += 1
        return self.inner.conditional_nll(pairs, progress=progress)


def chunking_of(texts=TEXTS, name: str = "fixed") -> Chunking:
    """``texts`` as the chunks of one document (joined by single spaces), one token per word."""
    chunks, pos = [], 0
    for i, t in enumerate(texts):
        chunks.append(Chunk(i, pos, pos + len(t), t, len(t.split())))
        pos += len(t) + 1
    return Chunking(ChunkerConfig(name, (("chunk_size", 10),)), tuple(chunks), 0.0, "doc", pos)


def random_table(seed: int, n: int = 6) -> PairTable:
    """A complete pair table of seeded random NLLs (context mostly helps)."""
    rng = np.random.default_rng(seed)
    uncond = rng.uniform(2.0, 4.0, n)
    cond = uncond[None, :] + rng.uniform(-1.5, 0.3, (n, n))
    np.fill_diagonal(cond, np.nan)
    return PairTable(uncond=uncond, cond=cond)


def quality_data(tag: str, seed: int, n: int = 6, vectors: bool = True) -> QualityData:
    """Configuration ``tag`` with ``n`` chunks of HTML-ish text, a random complete table and random vectors."""
    texts = tuple(f"chunk {tag}{i} <i>text</i> & more" for i in range(n))
    vec = np.random.default_rng(seed + 100).normal(size=(n, 8)) if vectors else None
    return QualityData(tag, ChunkerConfig(f"c{tag}"), chunking_of(texts), random_table(seed, n), vec)
