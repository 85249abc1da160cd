"""Scoring through the output cache, with the real bundled SmolLM2 (loaded once for the module).

A counting wrapper around the real scorer proves that reruns are served from the cache and
that only missing (context, continuation) pairs reach the model.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from backend.errors import Cancelled
from backend.models.cache import OutputCache
from backend.models.scoring import (
    SentenceScore,
    cached_token_scores,
    conditional_scores,
    document_token_scores,
    score_sentences,
    sentence_scores,
)
from backend.models.types import ModelInfo, TokenScores
from backend.progress import QUEUED, CancelToken, Progress
from backend.text.document import Document

TEXT = (
    "The clockmaker opened his shop at dawn. Rain tapped against the narrow window. "
    "He wound each clock by hand, one after another, until the room ticked like a heart."
)


class CountingScorer:
    """Delegates to a real scorer and records what reaches the model."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info: ModelInfo = inner.info
        self.token_calls: list[str] = []
        self.pair_calls: list[list[tuple[str, str]]] = []

    def token_nll(self, text, *, window=None, progress=None) -> TokenScores:
        self.token_calls.append(text)
        return self.inner.token_nll(text, window=window, progress=progress)

    def conditional_nll(self, pairs, *, progress=None) -> list[float]:
        self.pair_calls.append(list(pairs))
        return self.inner.conditional_nll(pairs, progress=progress)


@pytest.fixture(scope="module")
def real_scorer():
    from backend.models.scorer import load_scorer

    return load_scorer(device="cpu")


@pytest.fixture()
def scorer(real_scorer) -> CountingScorer:
    return CountingScorer(real_scorer)


@pytest.fixture()
def cache(tmp_path: Path) -> OutputCache:
    return OutputCache(tmp_path / "cache", max_bytes=64 * 1024 * 1024)


@pytest.fixture(scope="module")
def doc() -> Document:
    return Document.from_text(TEXT, language="en")


# -- pure parts ------------------------------------------------------------------------------


def test_score_sentences_means_tokens_starting_in_each_sentence():
    d = Document.from_text("The cat sat down. The dog ran off. It rained.", language="en")
    assert [(s.start, s.end) for s in d.sentences] == [(0, 17), (18, 34), (35, 45)]
    scores = TokenScores(
        starts=np.array([0, 4, 8, 12, 16, 17, 22, 26, 30, 33, 35, 38, 44]),
        ends=np.array([3, 8, 12, 16, 17, 21, 26, 30, 33, 34, 37, 44, 45]),
        nll=np.array([np.nan, 1, 2, 3, 4, 50, 6, 7, 8, 9, np.nan, np.nan, np.nan], dtype=float),
        window=16,
    )
    got = score_sentences(d, scores)
    assert [(s.index, s.start, s.end, s.text, s.tokens) for s in got] == [
        (0, 0, 17, "The cat sat down.", 4),  # the document's first token has no score
        (1, 18, 34, "The dog ran off.", 4),  # " The" starts at 17, before the sentence
        (2, 35, 45, "It rained.", 0),
    ]
    assert got[0].nll_mean == 2.5 and got[0].ppl == pytest.approx(math.exp(2.5))
    assert got[1].nll_mean == 7.5
    assert math.isnan(got[2].nll_mean) and math.isnan(got[2].ppl)


def test_sentence_score_json_has_the_schema_and_null_for_nan():
    s = SentenceScore(3, 10, 20, "Hello.", 0, float("nan"), float("nan"))
    assert s.to_json() == {
        "index": 3, "start": 10, "end": 20, "text": "Hello.", "tokens": 0, "nll_mean": None, "ppl": None,
    }
    assert SentenceScore(0, 0, 1, "x", 1, 800.0, math.inf).to_json()["ppl"] is None
    assert SentenceScore(0, 0, 1, "x", 2, 1.5, math.exp(1.5)).to_json()["ppl"] == pytest.approx(4.4817, rel=1e-4)


# -- with the real model ---------------------------------------------------------------------


def test_sentence_scores_with_the_real_model(doc: Document, scorer: CountingScorer, cache: OutputCache):
    got = sentence_scores(doc, scorer, cache=cache)
    assert len(got) == len(doc.sentences) == 3
    direct = scorer.inner.token_nll(doc.text)
    stats = direct.span_stats([(s.start, s.end) for s in doc.sentences])
    for s, span, (mean, n) in zip(got, doc.sentences, stats, strict=True):
        assert (s.start, s.end) == (span.start, span.end) and s.text == doc.text[s.start : s.end]
        assert s.tokens == n > 0
        assert s.nll_mean == pytest.approx(mean, abs=1e-6) and 0 < s.nll_mean < 20
        assert s.ppl == pytest.approx(math.exp(s.nll_mean))
    starting_in_first = int(((direct.starts >= 0) & (direct.starts < doc.sentences[0].end)).sum())
    assert got[0].tokens == starting_in_first - 1  # the document's first token is never scored


def test_rerun_is_served_from_the_cache(doc: Document, scorer: CountingScorer, cache: OutputCache):
    first = sentence_scores(doc, scorer, cache=cache)
    assert len(scorer.token_calls) == 1
    second = sentence_scores(doc, scorer, cache=cache)
    restarted = sentence_scores(doc, scorer, cache=OutputCache(cache.directory))  # as after a restart
    assert len(scorer.token_calls) == 1
    assert [s.to_json() for s in second] == [s.to_json() for s in first] == [s.to_json() for s in restarted]
    scores, hit = document_token_scores(doc.text, scorer, cache=cache)
    assert hit and len(scorer.token_calls) == 1
    # The cached entry is found from the fingerprint alone (what the CLI does before loading a model).
    alone = cached_token_scores(cache, scorer.info.fingerprint, doc.text, None)
    assert alone is not None and np.array_equal(alone.nll, scores.nll, equal_nan=True)


def test_cache_key_follows_text_window_and_model(doc: Document, scorer: CountingScorer, cache: OutputCache):
    document_token_scores(doc.text, scorer, cache=cache)
    _, hit = document_token_scores(doc.text + " And then it stopped.", scorer, cache=cache)
    assert not hit
    scores, hit = document_token_scores(doc.text, scorer, window=16, cache=cache)
    assert not hit and scores.window == 16
    assert cached_token_scores(cache, "another-model", doc.text, None) is None
    assert len(scorer.token_calls) == 3


def test_without_a_cache_the_model_runs_every_time(doc: Document, scorer: CountingScorer):
    sentence_scores(doc, scorer)
    sentence_scores(doc, scorer)
    assert len(scorer.token_calls) == 2


def test_conditional_scores_only_compute_missing_pairs(scorer: CountingScorer, cache: OutputCache):
    d1, d2, d3 = "The shop opened at dawn.", "It rained all day.", "The clocks ticked."
    q1, q2, q3 = "When did the shop open?", "What was the weather?", "What ticked?"
    first = conditional_scores([(d1, q1), (d2, q2)], scorer, cache=cache)
    assert scorer.pair_calls == [[(d1, q1), (d2, q2)]]
    second = conditional_scores([(d1, q1), (d3, q3), (d3, q3), (d2, q2)], scorer, cache=cache)
    assert scorer.pair_calls[1:] == [[(d3, q3)]]  # one call, the missing pair once
    assert second[0] == first[0] and second[3] == first[1] and second[1] == second[2]
    assert all(0 < v < 20 for v in second)
    uncached = scorer.inner.conditional_nll([(d1, q1), (d3, q3)])
    assert second[0] == pytest.approx(uncached[0], abs=1e-5) and second[1] == pytest.approx(uncached[1], abs=1e-5)
    conditional_scores([(d2, q2), (d1, q1)], scorer, cache=cache)
    assert len(scorer.pair_calls) == 2  # everything cached: no model call
    assert conditional_scores([], scorer, cache=cache) == [] and len(scorer.pair_calls) == 2


def test_progress_reaches_the_end_and_cancel_stops_before_the_model(
    doc: Document, scorer: CountingScorer, cache: OutputCache
):
    seen: list[tuple[int, int]] = []
    document_token_scores(doc.text, scorer, cache=cache, progress=Progress(counts=lambda done, total: seen.append((done, total))))
    assert seen and seen[-1][0] == seen[-1][1]
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        sentence_scores(doc, scorer, cache=None, progress=Progress(cancel=token))
    with pytest.raises(Cancelled):
        conditional_scores([("a", "b")], scorer, cache=cache, progress=Progress(cancel=token))
    assert len(scorer.token_calls) == 1 and scorer.pair_calls == []


class _ArithmeticScorer:
    """No model: the value of (d, q) is len(d) + len(q) / 1000; raises Cancelled on call ``cancel_on``."""

    info = ModelInfo("arith", "", "lm", 0, "cpu", "float32", "arith-fingerprint")

    def __init__(self, cancel_on: int | None = None) -> None:
        self.calls: list[list[tuple[str, str]]] = []
        self.cancel_on = cancel_on

    def conditional_nll(self, pairs, *, progress=None) -> list[float]:
        self.calls.append(list(pairs))
        if self.cancel_on is not None and len(self.calls) == self.cancel_on:
            raise Cancelled("stopped")
        if progress is not None:
            progress(len(pairs), len(pairs))
        return [len(d) + len(q) / 1000 for d, q in pairs]


def test_long_pair_runs_are_cached_group_by_group_and_a_cancel_keeps_what_was_done(tmp_path):
    from backend.models.scoring import GROUP_PAIRS

    cache = OutputCache(tmp_path / "groups")
    contexts = [f"context {i} " + "x" * i for i in range(12)]
    pairs = [(d, f"q{j}") for d in contexts for j in range(12)]  # 144 pairs, 12 per context
    first = _ArithmeticScorer(cancel_on=2)
    with pytest.raises(Cancelled):
        conditional_scores(pairs, first, cache=cache)
    assert len(first.calls[0]) <= GROUP_PAIRS
    assert {d for d, _ in first.calls[0]}.isdisjoint({d for d, _ in first.calls[1]})  # whole contexts per call
    # The rerun asks only for what the cancelled run had not finished.
    second = _ArithmeticScorer()
    seen: list[float] = []
    values = conditional_scores(pairs, second, cache=cache, progress=Progress(counts=lambda d, t: seen.append(d / t)))
    asked = [p for call in second.calls for p in call]
    assert sorted(asked) == sorted(p for p in pairs if p not in first.calls[0])
    assert values == [len(d) + len(q) / 1000 for d, q in pairs]
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0)


# -- two sessions at once ----------------------------------------------------------------------


class _HoldingScorer(CountingScorer):
    """A counting scorer whose first pass waits for ``release`` once it has started (the model busy)."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.started, self.release = threading.Event(), threading.Event()

    def token_nll(self, text, *, window=None, progress=None) -> TokenScores:
        self.started.set()
        assert self.release.wait(30), "the test never released the first pass"
        return super().token_nll(text, window=window, progress=progress)


def test_two_sessions_asking_for_the_same_scores_at_once_compute_them_once(real_scorer, tmp_path, monkeypatch):
    """The pages' path (a job's ``ModelContext.token_scores`` on the process's default cache): the second waits."""
    from backend.chunkers import ModelContext
    from backend.jobs import start_job

    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "shared"))  # default_cache() follows it
    text = TEXT + " Two sessions opened this page at the same moment."
    scorer = _HoldingScorer(real_scorer)

    def session(progress):
        return ModelContext(scorer=scorer, progress=progress).token_scores(text)

    first = start_job("first session", session)
    assert scorer.started.wait(30)
    second = start_job("second session", session)
    deadline = time.monotonic() + 30
    while second.label != QUEUED and second.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (second.label, second.running) == (QUEUED, True)  # waiting for the first's cache entry
    scorer.release.set()
    assert first.wait(60) and second.wait(60)
    assert (first.state, second.state) == ("done", "done")
    assert scorer.token_calls == [text]  # one pass for both sessions
    assert np.array_equal(first.result.nll, second.result.nll, equal_nan=True)
    assert np.array_equal(first.result.starts, second.result.starts)
