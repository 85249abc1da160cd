"""Progress that can be trusted (``backend.models.types``): units, a measured ETA, parts, "queued behind another run".

The tracker runs on an injected clock, so labels and ETAs are exact. The scorer tests run a
tiny random Llama (two layers, no weights to load) with a real fast tokenizer, so the
model's lock, its layers and the jobs are the real ones.
"""

from __future__ import annotations

import threading
import time

import pytest

from backend.errors import Cancelled
from backend.jobs import scaled_progress, start_job
from backend.models.types import QUEUED, CancelToken, ModelInfo, ProgressTracker, Share, acquired, set_unit


def _clock(*times: float):
    it = iter(times)
    return lambda: next(it)


def _tracker(*times: float, cancel: CancelToken | None = None) -> tuple[ProgressTracker, list]:
    seen: list[tuple[float, float | None, str]] = []
    return ProgressTracker(lambda f, eta, label: seen.append((f, eta, label)), cancel, clock=_clock(*times)), seen


def test_labels_count_the_unit_and_the_eta_is_the_measured_rate():
    tracker, seen = _tracker(10.0, 12.0, 14.0, 20.0)
    set_unit(tracker, "tokens")
    tracker(0, 4152)  # the count starts: no unit done yet, no ETA
    tracker(1038, 4152)  # 1,038 tokens in 2 s: 3,114 left at 519/s
    tracker(2076, 4152)  # 2,076 in 4 s
    tracker(4152, 4152)
    assert seen == [
        (0.0, None, "0 / 4,152 tokens"),
        (0.25, 6.0, "1,038 / 4,152 tokens · ETA 6s"),
        (0.5, 4.0, "2,076 / 4,152 tokens · ETA 4s"),
        (1.0, None, "4,152 / 4,152 tokens"),
    ]


def test_the_rate_is_measured_from_the_first_report_and_a_new_count_starts_afresh():
    tracker, seen = _tracker(100.0, 130.0, 131.0, 133.0)
    set_unit(tracker, "pairs")
    tracker(10, 40)  # the first report already has 10 done: no rate yet
    tracker(20, 40)  # 10 pairs in 30 s: 20 left, 60 s
    set_unit(tracker, "texts")
    tracker(0, 12)  # another count: measured again from here
    tracker(3, 12)  # 3 texts in 2 s: 9 left, 6 s
    assert [(eta, label) for _f, eta, label in seen] == [
        (None, "10 / 40 pairs"),
        (60.0, "20 / 40 pairs · ETA 60s"),
        (None, "0 / 12 texts"),
        (6.0, "3 / 12 texts · ETA 6s"),
    ]


def test_queued_says_so_and_the_wait_is_not_counted_in_the_rate():
    token = CancelToken()
    tracker, seen = _tracker(0.0, 1.0, 500.0, 502.0, cancel=token)
    set_unit(tracker, "tokens")
    tracker(0, 100)
    tracker(10, 100)  # 10 tokens in 1 s: 90 left, 9 s
    tracker.set_queued(True)
    tracker.set_queued(True)  # still waiting: reported once
    tracker.set_queued(False)  # at 500 s: the count is measured from here (label without an ETA)
    tracker(30, 100)  # 20 tokens in 2 s since the wait ended: 70 left, 7 s
    assert seen == [
        (0.0, None, "0 / 100 tokens"),
        (0.1, 9.0, "10 / 100 tokens · ETA 9s"),
        (0.1, None, QUEUED),
        (0.1, None, "10 / 100 tokens"),
        (0.3, 7.0, "30 / 100 tokens · ETA 7s"),
    ]
    token.cancel()
    with pytest.raises(Cancelled):
        tracker.set_queued(True)  # a cancel ends a wait


def test_parts_keep_their_own_unit_count_and_eta():
    tracker, seen = _tracker(0.0, 4.0, 5.0)
    part = scaled_progress(tracker, 1, 4, "configuration")
    set_unit(part, "tokens")
    part(0, 200)
    part(100, 200)  # 100 tokens in 4 s: 100 left, 4 s
    part.set_queued(True)
    part(200, 200)  # reported once the wait is over
    assert seen == [
        (0.25, None, "configuration 2 of 4 · 0 / 200 tokens"),
        (0.375, 4.0, "configuration 2 of 4 · 100 / 200 tokens · ETA 4s for this one"),
        (0.375, None, "configuration 2 of 4 · " + QUEUED),
    ]
    assert scaled_progress(tracker, 0, 1) is tracker  # one part: the whole bar


def test_a_share_reports_a_group_as_units_of_the_whole_count():
    seen = []
    share = Share(lambda d, t: seen.append((d, t)), 64, 32, 128)
    share(0, 10)
    share(5, 10)
    share(10, 10)
    assert seen == [(64, 128), (80, 128), (96, 128)]


def test_acquired_reports_the_wait_only_while_another_thread_holds_the_lock():
    lock = threading.RLock()
    states: list[bool] = []

    class Recorder:
        def __call__(self, done, total):
            pass

        def set_queued(self, queued):
            states.append(queued)

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
    scores = tiny_scorer.token_nll(TEXT, progress=lambda d, t: seen.append((d, t)))
    n = len(scores) - 1  # every token but the first is scored
    assert len(tiny_scorer.lm.tokenizer(TEXT, add_special_tokens=False)["input_ids"]) <= 512  # one window, one call
    # Two layers of three shares (the last is the logits): n/3, 2n/3 during the call, n at its end.
    assert seen == [(0, n), (n // 3, n), (2 * n // 3, n), (n, n)]


def test_a_second_job_says_it_is_queued_while_the_first_holds_the_model(tiny_scorer):
    from backend.models.scoring import document_token_scores

    holding, release = threading.Event(), threading.Event()

    def first(progress):
        def hold(done, total):
            progress(done, total)
            if 0 < done < total and not holding.is_set():
                holding.set()  # inside the forward pass, the model's lock held
                release.wait(10)

        return document_token_scores(TEXT, tiny_scorer, progress=hold)[0]

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
