"""Progress that can be trusted (``backend.progress``): units, a measured ETA, parts, "queued behind another run".

The tracker runs on an injected clock, so labels and ETAs are exact. A nested child's counts,
queued state, partial results and cancel checks all reach the bar of a real job. The scorer
tests run a tiny random Llama (two layers, no weights to load) with a real fast tokenizer, so
the model's lock, its layers and the jobs are the real ones.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest

from backend import jobs
from backend.errors import Cancelled
from backend.jobs import start_job
from backend.models.types import ModelInfo
from backend.progress import QUEUED, CancelToken, Progress, acquired


def _clock(*times: float):
    it = iter(times)
    return lambda: next(it)


def _tracker(*times: float, cancel: CancelToken | None = None) -> tuple[Progress, list]:
    seen: list[tuple[float, float | None, str]] = []
    return Progress(lambda f, eta, label: seen.append((f, eta, label)), cancel, clock=_clock(*times)), seen


def test_labels_count_the_unit_and_the_eta_is_the_measured_rate():
    tracker, seen = _tracker(10.0, 12.0, 14.0, 20.0)
    tracker.set_unit("tokens")
    tracker(0, 4152)  # the count starts: no unit done yet, no ETA
    tracker(1038, 4152)  # 1,038 tokens in 2 s: 3,114 left at 519/s
    tracker(2076, 4152)  # 2,076 in 4 s
    tracker(4152, 4152)
    assert seen == [
        (0.0, None, "0 / 4,152 tokens"),
        (0.25, 6.0, "1,038 / 4,152 tokens · ETA 6 s"),
        (0.5, 4.0, "2,076 / 4,152 tokens · ETA 4 s"),
        (1.0, None, "4,152 / 4,152 tokens"),
    ]


def test_the_rate_is_measured_from_the_first_report_and_a_new_count_starts_afresh():
    tracker, seen = _tracker(100.0, 130.0, 131.0, 133.0)
    tracker.set_unit("pairs")
    tracker(10, 40)  # the first report already has 10 done: no rate yet
    tracker(20, 40)  # 10 pairs in 30 s: 20 left, 60 s
    tracker.set_unit("texts")
    tracker(0, 12)  # another count: measured again from here
    tracker(3, 12)  # 3 texts in 2 s: 9 left, 6 s
    assert [(eta, label) for _f, eta, label in seen] == [
        (None, "10 / 40 pairs"),
        (60.0, "20 / 40 pairs · ETA 60 s"),
        (None, "0 / 12 texts"),
        (6.0, "3 / 12 texts · ETA 6 s"),
    ]


def test_queued_says_so_and_the_wait_is_not_counted_in_the_rate():
    token = CancelToken()
    tracker, seen = _tracker(0.0, 1.0, 500.0, 502.0, cancel=token)
    tracker.set_unit("tokens")
    tracker(0, 100)
    tracker(10, 100)  # 10 tokens in 1 s: 90 left, 9 s
    tracker.set_queued(True)
    tracker.set_queued(True)  # still waiting: reported once
    tracker.set_queued(False)  # at 500 s: the count is measured from here (label without an ETA)
    tracker(30, 100)  # 20 tokens in 2 s since the wait ended: 70 left, 7 s
    assert seen == [
        (0.0, None, "0 / 100 tokens"),
        (0.1, 9.0, "10 / 100 tokens · ETA 9 s"),
        (0.1, None, QUEUED),
        (0.1, None, "10 / 100 tokens"),
        (0.3, 7.0, "30 / 100 tokens · ETA 7 s"),
    ]
    assert not tracker.cancelled
    token.cancel()
    assert tracker.cancelled
    with pytest.raises(Cancelled):
        tracker.set_queued(True)  # a cancel ends a wait
    with pytest.raises(Cancelled):
        tracker.check()


def test_parts_keep_their_own_unit_count_and_eta():
    tracker, seen = _tracker(0.0, 4.0, 5.0)
    part = tracker.part(1, 4, "configuration")
    part.set_unit("tokens")
    part(0, 200)
    part(100, 200)  # 100 tokens in 4 s: 100 left, 4 s
    part.set_queued(True)
    part(200, 200)  # reported once the wait is over
    assert seen == [
        (0.25, None, "configuration 2 of 4 · 0 / 200 tokens"),
        (0.375, 4.0, "configuration 2 of 4 · 100 / 200 tokens · ETA 4 s for this one"),
        (0.375, None, "configuration 2 of 4 · " + QUEUED),
    ]


def test_one_part_of_one_is_the_whole_bar_and_unnamed():
    tracker, seen = _tracker(0.0, 2.0)
    whole = tracker.part(0, 1, "configuration")
    whole.set_unit("texts")
    whole(0, 10)
    whole(5, 10)
    assert seen == [(0.0, None, "0 / 10 texts"), (0.5, 2.0, "5 / 10 texts · ETA 2 s")]


def test_parts_nest_their_names_and_their_shares():
    tracker, seen = _tracker(0.0, 10.0)
    level = tracker.part(2, 3, "configuration").part(1, 4, "level")
    level.set_unit("tokens")
    level(0, 1000)
    level(250, 1000)  # 250 tokens in 10 s: 750 left, 30 s
    assert seen == [
        ((2 + (1 + 0.0) / 4) / 3, None, "configuration 3 of 3 · level 2 of 4 · 0 / 1,000 tokens"),
        ((2 + (1 + 0.25) / 4) / 3, 30.0, "configuration 3 of 3 · level 2 of 4 · 250 / 1,000 tokens · ETA 30 s for this one"),
    ]
    assert seen[1][0] == pytest.approx(0.7708333)
    unnamed, seen = _tracker(0.0)
    unnamed.part(1, 2, None)(1, 2)  # no name: no prefix, the share still halves
    assert seen == [(0.75, None, "1 / 2")]


def test_weighted_parts_get_their_weights_share():
    tracker, seen = _tracker(0.0, 1.0, 2.0, 3.0)
    weights = [1, 2, 5]
    tracker.part(0, 3, "step", weights=weights)(1, 1)
    tracker.part(1, 3, "step", weights=weights)(1, 4)
    tracker.part(2, 3, "step", weights=weights)(0, 4)
    tracker.part(2, 3, "step", weights=weights)(2, 4)
    assert [(f, label) for f, _eta, label in seen] == [
        (0.125, "step 1 of 3 · 1 / 1"),
        (0.1875, "step 2 of 3 · 1 / 4"),  # (1 + 2 * 1/4) / 8
        (0.375, "step 3 of 3 · 0 / 4"),
        (0.6875, "step 3 of 3 · 2 / 4"),  # (3 + 5 * 2/4) / 8
    ]
    with pytest.raises(ValueError, match="weights"):
        tracker.part(0, 3, weights=[1, 2])
    with pytest.raises(ValueError, match="weights"):
        tracker.part(0, 2, weights=[1, -1])
    with pytest.raises(ValueError, match="part 3 of 3"):
        tracker.part(3, 3)


def test_a_slice_reports_a_group_as_units_of_the_whole_count_in_its_parents_unit():
    counted = []
    tracker = Progress(counts=lambda d, t: counted.append((d, t)))
    tracker.set_unit("pairs")
    share = tracker.slice(64, 32, 128)
    share.set_unit("tokens")  # the count is the parent's: its unit stays "pairs"
    share(0, 10)
    share(5, 10)
    share(10, 10)
    assert counted == [(64, 128), (80, 128), (96, 128)]
    labelled, seen = _tracker(0.0, 1.0)
    labelled.set_unit("pairs")
    group = labelled.part(1, 2, "configuration").slice(10, 5, 20)
    group.set_unit("tokens")
    group(0, 4)
    group(4, 4)
    assert seen == [
        ((1 + 10 / 20) / 2, None, "configuration 2 of 2 · 10 / 20 pairs"),
        ((1 + 15 / 20) / 2, 1.0, "configuration 2 of 2 · 15 / 20 pairs · ETA 1 s for this one"),
    ]


def test_counts_receives_the_roots_counts_as_they_came():
    counted = []
    tracker = Progress(counts=lambda d, t: counted.append((d, t)))
    tracker(3, 0)  # as given, even a count the bar ignores
    tracker(2, 4)
    tracker.slice(4, 4, 8)(1, 2)
    tracker.part(1, 2)(5, 10)  # a part's count is its own: not the root's
    assert counted == [(3, 0), (2, 4), (6, 8)]


def test_every_child_sends_queued_partial_and_cancel_to_the_root():
    token, published = CancelToken(), []
    tracker = Progress(cancel=token, partial=published.append)
    child = tracker.part(0, 2, "configuration").slice(0, 1, 2).part(1, 3)
    child.publish("half")
    assert published == ["half"]
    child.set_queued(True)
    child.set_queued(False)
    token.cancel()
    assert child.cancelled
    with pytest.raises(Cancelled):
        child.check()
    with pytest.raises(Cancelled):
        child(1, 2)


class _Pauses:
    """Lets a job stop at each step until the test has looked at it."""

    def __init__(self) -> None:
        self.reached, self.go = threading.Event(), threading.Event()

    def pause(self) -> None:
        self.reached.set()
        assert self.go.wait(10)
        self.go.clear()

    def next(self) -> None:
        assert self.reached.wait(10)
        self.reached.clear()

    def resume(self) -> None:
        self.go.set()


def _nested(progress: Progress) -> tuple[Progress, Progress]:
    """Configuration 2 of 2, level 1 of 3, and a slice of that level's count (10 … 15 of 20)."""
    level = progress.part(1, 2, "configuration").part(0, 3, "level")
    return level, level.slice(10, 5, 20)


def test_a_nested_childs_progress_reaches_the_job(monkeypatch):
    monkeypatch.setattr(jobs, "Progress", functools.partial(Progress, clock=_clock(100.0, 200.0, 202.0, 205.0)))
    steps = _Pauses()
    prefix = "configuration 2 of 2 · level 1 of 3 · "

    def work(progress):
        level, child = _nested(progress)
        level.set_unit("tokens")
        child(0, 10)  # 10 of 20 tokens, at 100 s
        steps.pause()
        child.set_queued(True)
        steps.pause()
        child.set_queued(False)  # at 200 s: the count is measured from here
        child.publish("half")
        steps.pause()
        child(4, 10)  # 12 of 20 at 202 s: 2 tokens in 2 s, 8 left
        steps.pause()
        child(10, 10)  # 15 of 20 at 205 s
        return "scored"

    job = start_job("nested", work)
    try:
        steps.next()
        assert (job.label, job.fraction) == (prefix + "10 / 20 tokens", (1 + (0 + 10 / 20) / 3) / 2)
        steps.resume()
        steps.next()
        assert (job.label, job.fraction, job.running) == (prefix + QUEUED, (1 + (0 + 10 / 20) / 3) / 2, True)
        steps.resume()
        steps.next()
        assert (job.label, job.partial) == (prefix + "10 / 20 tokens", "half")
        steps.resume()
        steps.next()
        assert (job.label, job.fraction) == (prefix + "12 / 20 tokens · ETA 8 s for this one", (1 + (0 + 12 / 20) / 3) / 2)
        steps.resume()
        assert job.wait(10)
    finally:
        steps.resume()
    assert (job.state, job.result, job.label) == ("done", "scored", prefix + "15 / 20 tokens · ETA 5 s for this one")


def test_a_cancel_reaches_a_nested_child_of_the_job():
    steps, children = _Pauses(), []

    def work(progress):
        _level, child = _nested(progress)
        children.append(child)
        steps.pause()
        child(1, 10)  # cancelled by now: raises
        return "not reached"

    job = start_job("nested", work)
    try:
        steps.next()
        (child,) = children
        assert not child.cancelled
        job.cancel()
        assert child.cancelled
        with pytest.raises(Cancelled):
            child.check()
        with pytest.raises(Cancelled):
            child.set_queued(True)
        steps.resume()
        assert job.wait(10)
    finally:
        steps.resume()
    assert (job.state, job.result, job.error) == ("cancelled", None, None)


def test_acquired_reports_the_wait_only_while_another_thread_holds_the_lock():
    lock = threading.RLock()
    states: list[bool] = []

    class Recorder(Progress):
        def set_queued(self, queued):
            states.append(queued)
            super().set_queued(queued)

    with acquired(lock, Recorder()):
        with acquired(lock, Recorder()):  # the same thread again: no wait
            pass
    assert states == []
    held, release = threading.Event(), threading.Event()

    def holder():
        with lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(10)
    timer = threading.Timer(0.5, release.set)
    timer.start()
    with acquired(lock, Recorder(), poll=0.05):
        pass
    t.join(10)
    assert states[0] is True and states[-1] is False and set(states) == {True, False}


# --- a tiny real model ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_scorer():
    """A LocalScorer over a random two-layer Llama and the MiniLM fast tokenizer (offsets)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from backend.models.lm import LanguageModel
    from backend.models.scorer import LocalScorer
    from backend.tokenizers import minilm_dir

    tok = PreTrainedTokenizerFast(tokenizer_file=str(minilm_dir() / "tokenizer.json"))
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512,
    )
    model = LlamaForCausalLM(cfg).eval()
    model.requires_grad_(False)
    info = ModelInfo("tiny", "random", "lm", 0, "cpu", "float32", "tiny-random-llama", context_length=512)
    return LocalScorer(LanguageModel(model, tok, info))


TEXT = " ".join(f"Sentence {i} tells of the harbour and its boats." for i in range(12))


def test_one_forward_pass_reports_tokens_layer_by_layer(tiny_scorer):
    seen: list[tuple[int, int]] = []
    scores = tiny_scorer.token_nll(TEXT, progress=Progress(counts=lambda d, t: seen.append((d, t))))
    n = len(scores) - 1  # every token but the first is scored
    assert len(tiny_scorer.lm.tokenizer(TEXT, add_special_tokens=False)["input_ids"]) <= 512  # one window, one call
    # Two layers of three shares (the last is the logits): n/3, 2n/3 during the call, n at its end.
    assert seen == [(0, n), (n // 3, n), (2 * n // 3, n), (n, n)]


def test_a_second_job_says_it_is_queued_while_the_first_holds_the_model(tiny_scorer):
    from backend.models.scoring import document_token_scores

    holding, release = threading.Event(), threading.Event()

    def first(progress):
        def hold(done, total):
            if 0 < done < total and not holding.is_set():
                holding.set()  # inside the forward pass, the model's lock held
                release.wait(10)

        return document_token_scores(TEXT, tiny_scorer, progress=Progress(counts=hold))[0]

    one = start_job("first", first)
    assert holding.wait(10)
    two = start_job("second", lambda progress: document_token_scores(TEXT, tiny_scorer, progress=progress)[0])
    deadline = time.monotonic() + 10
    while two.label != QUEUED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (two.label, two.running) == (QUEUED, True)
    release.set()
    assert one.wait(10) and two.wait(10)
    n = len(two.result) - 1
    assert (one.state, two.state, two.label, two.fraction) == ("done", "done", f"{n:,} / {n:,} tokens", 1.0)


def test_a_queued_job_can_be_cancelled(tiny_scorer):
    from backend.models.scoring import document_token_scores

    with tiny_scorer.lm.lock:
        job = start_job("waiting", lambda progress: document_token_scores(TEXT, tiny_scorer, progress=progress))
        deadline = time.monotonic() + 10
        while job.label != QUEUED and time.monotonic() < deadline:
            time.sleep(0.01)
        assert job.label == QUEUED
        job.cancel()
        assert job.wait(10)  # ended while the lock is still held
    assert job.state == "cancelled"
