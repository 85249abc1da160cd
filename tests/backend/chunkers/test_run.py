"""The one loop over configurations (``backend.chunkers.run``) and the cache-only model context.

Pinned exactly: the app's pages and the CLI read these outcomes, so a change shows here first.
The language model is a deterministic fake (no model loads); its outputs go to a private cache.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from backend.chunkers import ModelContext, make_chunker, run_chunker
from backend.chunkers.context import unloaded_model_info
from backend.chunkers.run import ChunkOutcome, chunk_all, needs_model, run_configs
from backend.chunking import ChunkerConfig
from backend.errors import Cancelled, NotCached
from backend.models.cache import OutputCache
from backend.models.types import ModelInfo
from backend.progress import CancelToken, Progress
from backend.text.document import Document
from tests.support.fake_scores import fake_token_scores

TEXT = (
    "The lighthouse was built in 1851. Its lamp burned whale oil. Keepers climbed the steps at dusk. "
    "Bread is made from flour and water. The dough must rest. A hot oven gives the crust its colour."
)
DOC = Document.from_text(TEXT, source="run.txt")
RECURSIVE = make_chunker("recursive", {"chunk_size": 20, "chunk_overlap": 0}).config
BAD = ChunkerConfig.make("recursive", {"chunk_size": 10, "chunk_overlap": 20})  # never validated: fails when run
PPL = make_chunker("ppl", {"threshold": 0.0}).config
SENTENCE = make_chunker("sentence", {"chunk_size": 30}).config


class _FakeScorer:
    """Deterministic token NLLs per word; counts its calls."""

    info = ModelInfo("fake", "", "lm", 0, "cpu", "float32", "fake-run-loop")

    def __init__(self) -> None:
        self.calls = 0

    def token_nll(self, text, *, window=None, progress=None):
        """Reports its tokens in steps of 10, as a scorer does per batch or layer."""
        self.calls += 1
        scores = fake_token_scores(text, seed=5, window=window)
        n = len(scores) - 1
        if progress is not None:
            for done in [*range(0, n, 10), n]:
                progress(done, n)
        return scores


def _spans(outcome: ChunkOutcome) -> list[tuple[int, int]] | None:
    return None if outcome.chunking is None else [(c.start, c.end) for c in outcome.chunking.chunks]


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> OutputCache:
    """A private default output cache (the one ``ModelContext`` opens)."""
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    return ModelContext().cache


def _lookup() -> ModelContext:
    """A cache-only context for the fake scorer's model, as a page builds one."""
    return ModelContext.cache_only(unloaded_model_info("fake", _FakeScorer.info.fingerprint))


def test_needs_model_reads_the_registry():
    assert [needs_model(c) for c in (RECURSIVE, PPL, make_chunker("semantic").config, make_chunker("moc").config)] == [
        False, True, True, True,
    ]
    assert needs_model(ChunkerConfig.make("no_such_chunker")) is False


def test_chunk_all_gives_one_outcome_per_configuration_in_order(cache):
    lookup = _lookup()
    outcomes = chunk_all(DOC, [RECURSIVE, BAD, PPL, SENTENCE], with_model=lambda d, c: run_chunker(d, c, lookup))
    assert [(o.config, o.state, o.error, _spans(o)) for o in outcomes] == [
        (RECURSIVE, "done", None, [(0, 59), (59, 130), (130, 191)]),
        (BAD, "failed", "chunk_overlap (20) must be smaller than chunk_size (10)", None),
        (PPL, "pending", None, None),  # the language model has not scored this text: no model call
        (SENTENCE, "done", None, [(0, 95), (96, 191)]),
    ]


def test_chunk_all_reports_an_unexpected_exception_on_one_line_and_logs_it(caplog):
    def chunk(doc, config):
        if config == SENTENCE:
            raise RuntimeError("boom\nsecond line")
        return run_chunker(doc, config)

    with caplog.at_level(logging.ERROR, logger="backend.chunkers.run"):
        outcomes = chunk_all(DOC, [SENTENCE, RECURSIVE], chunk)
    assert [(o.state, o.error) for o in outcomes] == [("failed", "RuntimeError: boom second line"), ("done", None)]
    assert caplog.records[0].exc_info is not None  # the traceback goes to the log


def test_chunk_all_stops_at_a_cancel():
    seen = []

    def chunk(doc, config):
        seen.append(config)
        raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        chunk_all(DOC, [RECURSIVE, SENTENCE], chunk)
    assert seen == [RECURSIVE]


def test_run_configs_fills_the_cache_a_cache_only_context_reads_back(cache):
    scorer = _FakeScorer()
    done = []
    outcomes = run_configs(DOC, [PPL, BAD], scorer, Progress(lambda f, eta, label: done.append((f, label))))
    assert [(o.config, o.state, o.error) for o in outcomes] == [
        (PPL, "done", None),
        (BAD, "failed", "chunk_overlap (20) must be smaller than chunk_size (10)"),  # the other still ran
    ]
    assert scorer.calls == 1
    assert done[-1] == (0.5, "configuration 1 of 2 · 35 / 35 tokens")  # each configuration reports its half of one bar
    again = chunk_all(DOC, [PPL], with_model=lambda d, c: run_chunker(d, c, _lookup()))
    assert [(o.state, _spans(o)) for o in again] == [("done", _spans(outcomes[0]))]
    assert scorer.calls == 1


def test_one_model_configuration_counts_its_tokens_as_it_goes(cache):
    seen = []
    tracker = Progress(lambda f, eta, label: seen.append((f, eta, label)), clock=iter(range(100)).__next__)
    (outcome,) = run_configs(DOC, [PPL], _FakeScorer(), tracker)
    assert outcome.state == "done"
    n = len(fake_token_scores(TEXT)) - 1  # 35 tokens scored: reported at 0, 10, 20, 30, 35, one second apart
    assert n == 35
    assert seen == [
        (0.0, None, "0 / 35 tokens"),
        (10 / 35, 2.5, "10 / 35 tokens · ETA 3 s"),  # 25 left at 10 tokens/s (seconds rounded up)
        (20 / 35, 1.5, "20 / 35 tokens · ETA 2 s"),
        (30 / 35, 0.5, "30 / 35 tokens · ETA 1 s"),
        (1.0, None, "35 / 35 tokens"),
    ]


def test_several_configurations_keep_the_inner_unit(cache):
    seen = []
    run_configs(DOC, [PPL, SENTENCE], _FakeScorer(), Progress(lambda f, eta, label: seen.append((f, label))))
    assert seen[0] == (0.0, "configuration 1 of 2 · 0 / 35 tokens")
    assert seen[-1][1].startswith("configuration 1 of 2 · 35 / 35 tokens") and seen[-1][0] == 0.5


def test_run_configs_stops_all_at_a_cancel(cache):
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        run_configs(DOC, [PPL, PPL], _FakeScorer(), Progress(cancel=token))


def test_cache_only_context_refuses_every_model_call(cache):
    lookup = _lookup()
    assert lookup.scorer.info.fingerprint == "fake-run-loop"
    with pytest.raises(NotCached, match="has not been scored by fake yet"):
        lookup.token_scores(TEXT)
    with pytest.raises(NotCached, match="not in the output cache for fake"):
        lookup.scorer.token_nll(TEXT)
    with pytest.raises(NotCached, match="embeddings are not in the output cache"):
        lookup.get_embedder()
    ModelContext(scorer=_FakeScorer()).token_scores(TEXT)  # scored once, through the cache
    np.testing.assert_array_equal(lookup.token_scores(TEXT).nll, fake_token_scores(TEXT, seed=5).nll)


def test_cache_only_chat_keeps_the_identity_and_refuses():
    class Chat:
        fingerprint, name = "chat-fp", "scripted-model"

        def complete(self, *args, **kwargs):
            raise AssertionError("a cache-only context never asks the chat model")

    chat = ModelContext.cache_only(unloaded_model_info("fake", "fp"), chat=Chat()).get_chat()
    assert (chat.fingerprint, chat.name) == ("chat-fp", "scripted-model")
    with pytest.raises(NotCached, match="these answers of scripted-model are not in the output cache yet"):
        chat.complete([{"role": "user", "content": "hi"}])
