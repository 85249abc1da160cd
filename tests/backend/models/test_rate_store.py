"""The measured-rate store (backend/models/rates.py): per model, device, precision and work; kept across restarts."""

from __future__ import annotations

import json
import time

import pytest

from backend.models.rates import HORIZON_SECONDS, RATES_FILE, Rate, RateKey, RateStore, rate_store
from backend.models.types import ModelInfo

LM = ModelInfo("SmolLM2", "bundled", "lm", 135, "cpu", "float32", "fp-smol", 8192)
KEY = RateKey.of(LM, "pairs")


def test_rates_are_persisted_and_reloaded(tmp_path) -> None:
    path = tmp_path / RATES_FILE
    store = RateStore(path, clock=lambda: 1000.0)
    assert store.get(KEY) is None and not path.exists()  # nothing measured: no figure at all
    store.record(KEY, units=10, work=400.0, seconds=5.0, chars=400.0)
    store.record(KEY, units=30, work=800.0, seconds=15.0, chars=800.0)
    assert store.get(KEY) == Rate(40, 1200.0, 20.0, 1200.0, 1000.0)
    assert (store.get(KEY).units_per_s, store.get(KEY).work_per_s, store.get(KEY).chars_per_s) == (2.0, 60.0, 60.0)
    again = RateStore(path)  # a restart reads the file
    assert again.get(KEY) == store.get(KEY)
    assert json.loads(path.read_text())["pairs|lm|fp-smol|cpu|float32"]["units"] == 40


def test_rates_are_kept_per_device_precision_and_work(tmp_path) -> None:
    clock = iter([1.0, 2.0, 3.0])
    store = RateStore(tmp_path / RATES_FILE, clock=lambda: next(clock))
    half = RateKey("fp-smol", "lm", "cpu", "bfloat16", "pairs")
    store.record(KEY, units=10, work=100.0, seconds=10.0)
    store.record(half, units=10, work=100.0, seconds=5.0)
    store.record(RateKey.of(LM, "token_nll"), units=1000, work=2000.0, seconds=10.0)
    assert store.get(KEY).work_per_s == 10.0 and store.get(half).work_per_s == 20.0
    # A page that has not loaded the model yet: the latest measurement of its pair scoring, any precision.
    assert store.find("fp-smol", "pairs") == store.get(half)
    assert store.find("fp-smol", "pairs", dtype="float32") == store.get(KEY)
    assert store.find("fp-smol", "embed") is None and store.find("fp-other", "pairs") is None
    unloaded = ModelInfo("SmolLM2", "bundled", "lm", 0, "", "", "fp-smol")
    assert store.of_model(unloaded, "token_nll").units == 1000 and store.of_model(LM, "pairs") == store.get(KEY)


def test_old_measurements_fade_so_the_rate_follows_the_machine(tmp_path) -> None:
    store = RateStore(tmp_path / RATES_FILE)
    store.record(KEY, units=100, work=1000.0, seconds=HORIZON_SECONDS)  # a quiet machine: 1000 / 300 s
    store.record(KEY, units=10, work=100.0, seconds=HORIZON_SECONDS / 2)  # busy now: half the speed
    rate = store.get(KEY)
    assert rate.seconds == pytest.approx(HORIZON_SECONDS)
    assert rate.work == pytest.approx(500.0 + 100.0)  # half of the old work kept, all of the new


def test_nothing_measured_changes_nothing_and_a_bad_file_is_empty(tmp_path) -> None:
    path = tmp_path / RATES_FILE
    path.write_text('{"pairs|lm|fp-smol|cpu|float32": {"units": -1, "work": 1, "seconds": 1}, "x": 3}')
    store = RateStore(path)
    assert store.get(KEY) is None
    assert store.record(KEY, units=0, work=0.0, seconds=1.0) is None
    assert store.record(KEY, units=5, work=5.0, seconds=0.0) is None
    path.write_text("not json")
    assert RateStore(path).get(KEY) is None
    with pytest.raises(ValueError, match="work 'typing' is not one of"):
        RateKey("fp", "lm", "cpu", "float32", "typing")


def test_the_process_store_lives_in_the_data_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    store = rate_store()
    assert store.path == tmp_path / "data" / RATES_FILE and rate_store() is store
    store.record(KEY, units=1, work=2.0, seconds=1.0)
    assert (tmp_path / "data" / RATES_FILE).is_file()


def test_a_local_scorer_records_its_speed_as_it_goes(tmp_path, monkeypatch) -> None:
    """The bundled SmolLM2 scores pairs and a text: both speeds are in the store, under its device and precision.

    The first call of each kind after the model loaded pays the warm-up and is not recorded, so each is
    called twice and the second call's measurement is checked.
    """
    from backend.models.scorer import load_scorer

    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    scorer = load_scorer(None)
    pairs = [("The cat sat.", " It slept."), ("A dog ran.", " It barked loudly.")]
    key = RateKey.of(scorer.info, "pairs")
    scorer.conditional_nll(pairs)
    before = rate_store().get(key) or Rate(0, 0, 0)
    scorer.conditional_nll(pairs)
    after = rate_store().get(key)
    assert after.units - before.units == 2
    assert after.work - before.work == pytest.approx(len(" It slept.") + 12 + len(" It barked loudly.") + 10)
    text = "One sentence here. Another one follows it. " * 3
    key = RateKey.of(scorer.info, "token_nll")
    scorer.token_nll(text, window=16, block=8)
    before = rate_store().get(key) or Rate(0, 0, 0)
    scores = scorer.token_nll(text, window=16, block=8)
    after = rate_store().get(key)
    assert after.units - before.units == len(scores) - 1  # every token but the first is scored once
    assert after.work - before.work > len(scores) - 1  # windows feed context they do not score
    assert after.chars > before.chars


def test_a_later_window_costs_about_twice_per_token_scored() -> None:
    """SmolLM2's work model: 30 layers of width 576 attend over a span of 3,072 tokens per token's weights."""
    from backend.models.scorer import load_scorer

    scorer = load_scorer(None)
    assert scorer.window_work(3072, 0) == pytest.approx(3072 + 3072 / 2)  # attention over the window: half again
    first = scorer.window_work(8192, 8191) / 8191  # the first window scores every token it feeds
    later = scorer.window_work(8192, 4096) / 4096  # a later one feeds 4,096 tokens of context for 4,096 scored
    assert (round(first, 2), round(later, 2), round(later / first, 2)) == (2.6, 4.93, 1.9)


def test_a_chat_reply_records_the_chat_models_speed(tmp_path, monkeypatch) -> None:
    from backend.models.chat import cached_reply

    class SlowModel:
        fingerprint = "fp-chat"

        def complete(self, messages, *, max_tokens, temperature, progress=None):
            time.sleep(0.01)
            return "a reply of 20 chars"[:max_tokens * 4]

    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    cached_reply(SlowModel(), [{"role": "user", "content": "Hi."}], max_tokens=8, cache=None)
    rate = rate_store().get(RateKey("fp-chat", "chat", "", "", "chat"))
    assert (rate.units, rate.work, rate.chars) == (1, 19, 19) and rate.seconds >= 0.01
