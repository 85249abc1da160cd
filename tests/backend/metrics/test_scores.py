"""Scoring chunkings for the quality metrics (backend/metrics/scores.py): the job, the cache-only lookups, the keys.

A deterministic stand-in scorer (tests/support/quality.py) behind a call counter proves what
calls the model and what is served by the output cache alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from backend.metrics.report import QualitySettings, quality_row
from backend.metrics.scores import (
    cached_pair_table,
    cached_vectors,
    pair_table,
    score_chunkings,
    table_key,
    vectors_key,
)
from backend.models.cache import OutputCache
from backend.models.embeddings import embeddings_key
from backend.models.types import ModelInfo
from backend.progress import Progress
from tests.support.quality import TEXTS, Counting, LengthScorer, chunking_of


def test_keys_name_the_document_the_spans_and_the_model() -> None:
    ch = chunking_of(("ab", "cde"))
    assert [table_key(ch, "lm-1", complete=True, window=None), table_key(ch, None, complete=False, window=2),
            vectors_key(ch, "fp-emb")] == [
        ("table", "doc", ((0, 2), (3, 6)), "lm-1", True, None),
        ("table", "doc", ((0, 2), (3, 6)), None, False, 2),
        ("vectors", "doc", ((0, 2), (3, 6)), "fp-emb"),
    ]
    # Another configuration with the same chunks shares the keys; other spans do not.
    assert table_key(chunking_of(("ab", "cde"), name="other"), "lm-1", complete=True, window=None) == \
        table_key(ch, "lm-1", complete=True, window=None)
    assert vectors_key(chunking_of(("abc", "de")), "fp-emb") != vectors_key(ch, "fp-emb")


def test_scores_once_then_k_and_rule_changes_call_no_model(tmp_path) -> None:
    cache = OutputCache(tmp_path / "cache")
    scorer = Counting(LengthScorer())
    ch = chunking_of()
    run = score_chunkings([ch], scorer=scorer, embedder=None, complete=True, window=None, cache=cache)
    ((table, vectors),) = run.results
    calls = scorer.calls  # one per batch of the anytime job
    assert calls >= 1 and vectors is None and run.seconds >= 0
    direct = pair_table(list(TEXTS), LengthScorer(), complete=True)
    np.testing.assert_allclose(table.cond, direct.cond)
    np.testing.assert_allclose(table.uncond, direct.uncond)
    for K in (0.0, 0.2, 0.5, 0.8, 1.2):
        for rule in ("paper", "reference"):
            quality_row(ch.token_counts, table=table, settings=QualitySettings(K=K, cs_rule=rule))
    assert scorer.calls == calls
    # A second scoring of the same chunks is served by the cache alone.
    score_chunkings([ch], scorer=scorer, embedder=None, complete=True, window=None, cache=cache)
    assert scorer.calls == calls


class Refusing:
    """A scorer with LengthScorer's identity that refuses to compute (what a page's lookup uses)."""

    info = LengthScorer.info

    def __init__(self) -> None:
        self.calls = 0

    def conditional_nll(self, pairs, *, progress=None):
        self.calls += 1
        raise LookupError("not cached")


class CountingCache(OutputCache):
    """An output cache that counts its lookups."""

    gets = 0

    def get(self, key):
        self.gets += 1
        return super().get(key)


def test_cache_only_lookup_probes_before_reading_every_pair(tmp_path) -> None:
    texts = [f"Chunk {i} talks about thing {i}." for i in range(12)]
    cache = CountingCache(tmp_path)
    with pytest.raises(LookupError):
        cached_pair_table(texts, Refusing(), complete=True, window=None, cache=cache)
    assert cache.gets <= 3  # the first probe missed: not 12 + 132 reads
    scored = pair_table(texts, LengthScorer(), complete=True, cache=cache)
    refusing = Refusing()
    got = cached_pair_table(texts, refusing, complete=True, window=None, cache=cache)
    assert refusing.calls == 0
    np.testing.assert_array_equal(got.cond, scored.cond)
    np.testing.assert_array_equal(got.uncond, scored.uncond)


def test_window_scores_only_near_pairs(tmp_path) -> None:
    ch = chunking_of()
    ((table, _),) = score_chunkings(
        [ch], scorer=LengthScorer(), embedder=None, complete=True, window=1, cache=OutputCache(tmp_path)
    ).results
    n = len(TEXTS)
    scored = {(i, j) for i in range(n) for j in range(n) if np.isfinite(table.cond[i, j])}
    assert scored == {(i, j) for i in range(n) for j in range(n) if i != j and abs(i - j) <= 1}


def test_progress_reaches_the_end_and_vectors_come_from_the_embedder(tmp_path) -> None:
    class Embedder:
        info = ModelInfo("emb", "tests", "embedder", 0, "cpu", "float32", "fp-emb")

        def embed(self, texts, *, progress=None):
            return np.array([[len(t), t.count(" ") + 1.0, 1.0] for t in texts], dtype=np.float32)

    seen = []
    cache = OutputCache(tmp_path)
    chs = [chunking_of(), chunking_of(TEXTS[:3])]
    out = score_chunkings(
        chs, scorer=LengthScorer(), embedder=Embedder, complete=False, window=None, cache=cache,
        progress=Progress(counts=lambda done, total: seen.append((done, total))),
    ).results
    assert seen[-1][0] == seen[-1][1]
    assert [v.shape for _, v in out] == [(5, 3), (3, 3)]
    np.testing.assert_allclose(cached_vectors(cache, "fp-emb", list(TEXTS)), out[0][1])
    assert cached_vectors(cache, "fp-other", list(TEXTS)) is None


def test_cached_vectors_read_a_plain_entry(tmp_path) -> None:
    cache = OutputCache(tmp_path)
    vec = np.eye(3, dtype=np.float32)
    cache.put(embeddings_key("fp", ["a", "b", "c"]), {"vectors": vec})
    np.testing.assert_array_equal(cached_vectors(cache, "fp", ["a", "b", "c"]), vec)
    assert cached_vectors(cache, "fp", ["a", "b"]) is None


class _PairByPair(LengthScorer):
    """LengthScorer reporting after every pair, as the local scorer does per batch."""

    def conditional_nll(self, pairs, *, progress=None):
        out = super().conditional_nll(pairs)
        for k in range(len(pairs) + 1):
            if progress is not None:
                progress(k, len(pairs))
        return out


def test_the_job_counts_the_pairs_its_cost_estimate_counts(tmp_path) -> None:
    from backend.metrics.cost import cost_estimate

    # The second chunking shares three chunks (and their pairs) with the first: each distinct pair counts once.
    chs = [chunking_of(), chunking_of(TEXTS[:3] + ("A closing line of its own.",))]
    cost = cost_estimate(
        [ch.token_counts for ch in chs], complete=True, window=None, tokens_per_s=100.0,
        chunk_texts=[[c.text for c in ch.chunks] for ch in chs],
    )
    assert cost["pairs"] == (5 + 20) + (1 + 6)  # uncond + ordered pairs of the first; the new chunk's of the second
    labels = []
    tracker = Progress(lambda f, eta, label: labels.append((f, label)))
    score_chunkings(
        chs, scorer=_PairByPair(), embedder=None, complete=True, window=None, cache=OutputCache(tmp_path),
        progress=tracker,
    )
    assert labels[0] == (0.0, "0 / 32 pairs") and labels[-1][1] == "32 / 32 pairs"
    counts = [label.split(" · ")[0] for _f, label in labels]
    assert list(dict.fromkeys(counts)) == [f"{k} / 32 pairs" for k in range(33)]  # pair by pair, in the estimate's unit
    assert [f for f, _ in labels] == sorted(f for f, _ in labels)


def test_embedding_alone_counts_texts(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))  # no embedding speed measured yet: no ETA

    class Embedder:
        info = ModelInfo("emb", "tests", "embedder", 0, "cpu", "float32", "fp-emb-count")

        def embed(self, texts, *, progress=None):
            return np.ones((len(texts), 2), dtype=np.float32)

    labels = []
    score_chunkings(
        [chunking_of(), chunking_of(TEXTS[:3])], scorer=None, embedder=Embedder, complete=False, window=None,
        cache=OutputCache(tmp_path), progress=Progress(lambda f, eta, label: labels.append((f, label))),
    )
    assert labels == [(5 / 8, "5 / 8 texts"), (1.0, "8 / 8 texts")]
