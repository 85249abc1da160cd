"""Work cut short is kept: a cancelled scoring pass and an interrupted embedding list go on from where they stopped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend.errors import Cancelled
from backend.models.cache import OutputCache
from backend.models.embeddings import embed_texts, embedded_in_parts, embeddings_key
from backend.models.scoring import document_token_scores, scoring_checkpoint
from backend.models.types import ModelInfo, PartialTokenScores
from backend.progress import CancelToken, Progress

TEXT = "The cat sat on the mat. It was warm by the fire. Stock prices fell sharply on Monday. Gluons bind quarks."


@pytest.fixture(scope="module")
def scorer():
    from backend.models.scorer import load_scorer

    return load_scorer(device="cpu")


@pytest.fixture(scope="module")
def full(scorer):
    """TEXT scored in one uninterrupted pass with a 4-token window (2 scored per later window, 8 windows per
    CPU batch): several batches on a short text."""
    return scorer.token_nll(TEXT, window=4)


def test_a_cancelled_pass_keeps_its_windows_and_the_next_one_scores_only_the_rest(scorer, full, tmp_path: Path):
    cache = OutputCache(tmp_path / "cache")
    token = CancelToken()

    def first_batch_then_cancel(partial: PartialTokenScores) -> None:
        token.cancel()

    with pytest.raises(Cancelled):
        document_token_scores(TEXT, scorer, window=4, cache=cache,
                              progress=Progress(cancel=token, partial=first_batch_then_cancel))
    left = scoring_checkpoint(cache, scorer.info.fingerprint, TEXT, 4)
    assert left is not None and 1 < left.scored < len(full)
    np.testing.assert_array_equal(left.scores.nll[1 : left.scored], full.nll[1 : left.scored])

    counts: list[int] = []
    scores, hit = document_token_scores(TEXT, scorer, window=4, cache=cache, progress=Progress(counts=lambda d, t: counts.append(d)))
    assert not hit
    assert counts[0] == left.scored - 1  # the count starts at the kept tokens: only the rest was scored
    np.testing.assert_array_equal(scores.nll, full.nll)
    assert scoring_checkpoint(cache, scorer.info.fingerprint, TEXT, 4) is None  # done: the checkpoint is gone
    assert cache.stats()["entries"] == 1


def test_a_checkpoint_that_does_not_fit_is_ignored(scorer, full):
    wrong = PartialTokenScores(type(full)(full.starts + 1, full.ends + 1, np.zeros(len(full)), 4), 9)
    np.testing.assert_array_equal(scorer.token_nll(TEXT, window=4, resume=wrong).nll, full.nll)


class CountingEmbedder:
    """A deterministic embedder that counts what it embeds, and fails on request."""

    def __init__(self) -> None:
        self.info = ModelInfo("counting", "", "embedder", 0, "cpu", "float32", "counting-v1")
        self.embedded = 0
        self.fail_after: int | None = None

    def embed(self, texts, *, progress=None) -> np.ndarray:
        if self.fail_after is not None and self.embedded + len(texts) > self.fail_after:
            raise RuntimeError("killed")
        self.embedded += len(texts)
        rows = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_an_interrupted_embedding_list_reuses_its_finished_parts(tmp_path: Path, monkeypatch):
    from backend.models import embeddings

    monkeypatch.setattr(embeddings, "EMBED_PART", 4)
    texts = [f"chunk number {i}" for i in range(10)]  # parts of 4, 4 and 2
    cache = OutputCache(tmp_path / "cache")
    emb = CountingEmbedder()
    emb.fail_after = 9  # dies in the third part
    with pytest.raises(RuntimeError, match="killed"):
        embed_texts(emb, texts, cache=cache)
    assert embedded_in_parts(cache, emb.info.fingerprint, texts) == 8

    emb.fail_after, emb.embedded = None, 0
    vectors, hit = embed_texts(emb, texts, cache=cache)
    assert not hit and emb.embedded == 2  # only the last part
    np.testing.assert_allclose(vectors, CountingEmbedder().embed(texts))
    assert embedded_in_parts(cache, emb.info.fingerprint, texts) == 0  # one whole entry now, the parts gone
    # The whole list's entry, and each text's own (what an edited list reuses: backend.models.embeddings).
    assert cache.stats()["entries"] == 1 + len(texts) and cache.contains(embeddings_key(emb.info.fingerprint, texts))
