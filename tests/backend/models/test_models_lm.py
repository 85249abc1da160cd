"""Loading the bundled SmolLM2 and scoring with it, checked against direct transformers calls.

The reference computations here use the model object directly: one ``model(input_ids)``
call, ``log_softmax``, ``gather`` — the textbook definition the scorer must reproduce.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time

import numpy as np
import pytest
import torch

from backend.config import data_dir
from backend.errors import Cancelled, ModelError, ParameterError
from backend.models.lm import converted_dir, file_sha256, load_lm, loaded_lm
from backend.models.scorer import LocalScorer, load_scorer, sliding_windows
from backend.progress import Progress
from backend.samples import load_sample
from backend.text.segment import sentence_spans
from backend.tokenizers import smollm2_gguf

TOL = 1e-4


@pytest.fixture(scope="module")
def scorer() -> LocalScorer:
    # The first load in a fresh data dir dequantizes the GGUF (~25 s); later ones read the cache.
    return load_scorer(device="cpu")


@pytest.fixture(scope="module")
def text() -> str:
    """About 400 tokens of the narrative sample, cut at a sentence end."""
    full = load_sample("narrative").text
    end = max(s.end for s in sentence_spans(full[:1900]) if s.end < 1800)
    return full[:end]


@pytest.fixture(scope="module")
def full(scorer, text) -> np.ndarray:
    """Direct NLL of ``text``'s tokens, full context."""
    return direct_nll(scorer, _ids(scorer, text))


@pytest.fixture(scope="module")
def plain(scorer, text):
    """``token_nll(text)`` with the default window."""
    return scorer.token_nll(text)


def _ids(scorer: LocalScorer, s: str) -> list[int]:
    return scorer.lm.tokenizer(s, add_special_tokens=False)["input_ids"]


def direct_nll(scorer: LocalScorer, ids: list[int]) -> np.ndarray:
    """NLL of tokens 1… of ``ids`` from one forward pass (token 0: nan)."""
    x = torch.tensor([ids])
    with torch.inference_mode():
        logp = torch.log_softmax(scorer.lm.model(x).logits.float(), dim=-1)[0]
    nll = -logp[:-1].gather(-1, x[0, 1:, None]).squeeze(-1)
    return np.concatenate([[np.nan], nll.double().numpy()])


def direct_conditional(scorer: LocalScorer, d: str, q: str) -> float:
    d_ids, q_ids = _ids(scorer, d or " "), _ids(scorer, q)
    return float(np.mean(direct_nll(scorer, d_ids + q_ids)[len(d_ids) :]))


# ---------------------------------------------------------------- loading


def test_model_is_loaded_once_per_process(scorer):
    assert load_lm() is scorer.lm
    assert load_lm("smollm2", "cpu") is scorer.lm
    assert load_scorer() is scorer


def test_loaded_lm_asks_the_process_cache_and_never_loads(scorer, monkeypatch, tmp_path):
    import backend.models.lm as lm_module

    assert loaded_lm() == loaded_lm("smollm2") == scorer.info  # loaded by the fixture, as a job would
    assert loaded_lm(str(tmp_path / "missing.gguf")) is None  # does not resolve: not loaded
    monkeypatch.setattr(lm_module, "_models", {})
    assert loaded_lm() is None  # an empty process: nothing is loaded, and asking loads nothing
    assert lm_module._models == {}


def test_model_info(scorer):
    info = scorer.info
    gguf = smollm2_gguf()
    assert info.name == "SmolLM2-135M-Instruct.Q4_1"
    assert info.source == str(gguf.resolve())
    assert (info.kind, info.device, info.dtype) == ("lm", "cpu", "float32")
    assert info.parameters == sum(p.numel() for p in scorer.lm.model.parameters()) == 134_515_008
    assert info.context_length == 8192
    assert info.fingerprint == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert not scorer.lm.model.training
    assert scorer.lm.tokenizer.is_fast
    assert json.dumps(info.to_json())


def test_gguf_is_converted_once_into_the_data_dir(scorer):
    folder = converted_dir(smollm2_gguf())
    assert folder.parent == data_dir() / "models"
    assert folder.name == f"SmolLM2-135M-Instruct.Q4_1-{scorer.info.fingerprint[:16]}"
    assert {"config.json", "model.safetensors", "tokenizer.json", "chunklab-source.json"} <= {
        p.name for p in folder.iterdir()
    }
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}")]  # no temporary left
    assert scorer.lm.loaded_from in ("gguf", "converted")


def test_converted_folder_loads_as_a_checkpoint_with_the_gguf_identity(scorer):
    other = load_lm(str(converted_dir(smollm2_gguf())), "cpu")
    assert other is not scorer.lm and other.loaded_from == "checkpoint"
    assert other.info.fingerprint == scorer.info.fingerprint
    x = torch.tensor([_ids(scorer, "The clockmaker wound the clock.")])
    with torch.inference_mode():
        assert torch.equal(other.model(x).logits, scorer.lm.model(x).logits)


def test_hub_id_offline_fails_fast_in_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as e:
        load_lm("chunklab-tests/no-such-model")
    assert str(e.value) == (
        "cannot load model 'chunklab-tests/no-such-model': not a local path and the model hub is unreachable (offline)"
    )


def test_bad_specs_are_named(tmp_path, monkeypatch):
    with pytest.raises(ModelError, match=r"cannot load model '\./missing/model\.gguf': no such file or folder"):
        load_lm("./missing/model.gguf")
    weights = tmp_path / "weights.txt"
    weights.write_text("not a model")
    with pytest.raises(ModelError, match="a file must be a .gguf"):
        load_lm(str(weights))
    with pytest.raises(ModelError, match="has no config.json"):
        load_lm(str(tmp_path))
    monkeypatch.setenv("CHUNKLAB_LM", str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelError, match="nope.gguf"):
        load_lm()
    with pytest.raises(ParameterError, match="'gpu' is not a device"):
        load_lm("smollm2", "gpu")


def test_stale_half_written_conversions_are_removed(tmp_path):
    from backend.models.lm import remove_stale_temporaries

    target = tmp_path / "Model-0123456789abcdef"
    old, fresh, other = tmp_path / f".{target.name}.abc", tmp_path / f".{target.name}.def", tmp_path / ".other.abc"
    for p in (old, fresh, other):
        p.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    os.utime(other, (time.time() - 7200, time.time() - 7200))
    remove_stale_temporaries(target)
    assert not old.exists() and fresh.exists() and other.exists()


def test_file_hash_is_remembered_and_follows_changes(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    assert file_sha256(f) == hashlib.sha256(b"abc").hexdigest()
    store = json.loads((data_dir() / "models" / "sha256.json").read_text())
    assert store[str(f.resolve())]["sha256"] == hashlib.sha256(b"abc").hexdigest()
    f.write_bytes(b"abcd")
    assert file_sha256(f) == hashlib.sha256(b"abcd").hexdigest()


# ---------------------------------------------------------------- tokenization


def test_tokenize_with_offsets(scorer, text):
    ids, starts, ends = scorer.tokenize_with_offsets("Hello world")
    assert ids == [19556, 905]
    assert starts.tolist() == [0, 5] and ends.tolist() == [5, 11]
    ids, starts, ends = scorer.tokenize_with_offsets(text)
    assert ids == _ids(scorer, text)
    assert starts.dtype == np.int64 and np.all(np.diff(starts) >= 0) and np.all(ends >= starts)
    ids, starts, ends = scorer.tokenize_with_offsets("")
    assert ids == [] and starts.size == 0 and ends.size == 0
    # Byte-level pieces of one character share its start; starts stay ascending.
    ids, starts, ends = scorer.tokenize_with_offsets("a 🦜 b")
    assert starts.tolist() == sorted(starts.tolist()) and starts[-1] == 3  # " b" starts at its space


# ---------------------------------------------------------------- token_nll


def test_sentence_means_equal_one_forward_pass(scorer, text, full, plain):
    """The issue's acceptance test: per-sentence mean NLL against a single direct pass."""
    enc = scorer.lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert 300 <= len(enc["input_ids"]) <= 500
    ref_starts = np.array([a for a, _ in enc["offset_mapping"]])
    spans = [(s.start, s.end) for s in sentence_spans(text)]
    assert len(spans) >= 10

    assert len(plain) == len(full) and plain.window == 8192
    assert np.isnan(plain.nll[0]) and not np.isnan(plain.nll[1:]).any()
    assert np.allclose(plain.nll[1:], full[1:], atol=TOL, rtol=0)
    for (a, b), (mean, count) in zip(spans, plain.span_stats(spans)):
        mine = (ref_starts >= a) & (ref_starts < b) & ~np.isnan(full)
        assert count == int(mine.sum())
        assert abs(mean - full[mine].mean()) <= TOL, (a, b)


def test_small_window_scores_each_token_once_with_the_context_that_fits(scorer, text, full):
    ids = _ids(scorer, text)
    n = len(ids)
    window, block = 64, 32
    assert (n - window) % block != 0  # the last block is partial
    scores = scorer.token_nll(text, window=window)
    assert scores.window == window
    assert np.isnan(scores.nll[0]) and not np.isnan(scores.nll[1:]).any()  # every token scored, once
    # The first window sees the whole text so far: identical to full context.
    assert np.allclose(scores.nll[1:window], full[1:window], atol=TOL, rtol=0)
    # Later tokens see only their window: `window - block` tokens before their block
    # (checked on the first, a middle and the last, partial block: each costs a forward pass).
    blocks = list(range(window, n, block))
    for p in (blocks[0], blocks[len(blocks) // 2], blocks[-1]):
        lo, hi = p - (window - block), min(n, p + block)
        expected = direct_nll(scorer, ids[lo:hi])[p - lo :]
        assert np.allclose(scores.nll[p:hi], expected, atol=TOL, rtol=0), p
    # ... which is where, and only where, they differ from full context.
    assert np.abs(scores.nll[window:] - full[window:]).mean() > 0.05


@pytest.mark.parametrize("n", [0, 1, 2, 10, 63, 64, 65, 96, 97, 433, 1000])
@pytest.mark.parametrize(("window", "block"), [(64, 32), (64, 1), (64, 63), (100, 70), (2, 1)])
def test_sliding_windows_cover_each_token_once(n, window, block):
    wins = sliding_windows(n, window, block)
    covered = [t for _, s, hi in wins for t in range(s, hi)]
    assert covered == list(range(1, n))
    assert all(hi - lo <= window for lo, _, hi in wins)
    if wins:
        assert wins[0] == (0, 1, min(n, window))
        assert all(s - lo == window - block and hi - s <= block for lo, s, hi in wins[1:])


def test_window_at_least_the_text_is_the_unwindowed_path(scorer, text, plain):
    n = len(_ids(scorer, text))
    assert np.array_equal(scorer.token_nll(text, window=n).nll, plain.nll, equal_nan=True)


def test_chunked_forward_gives_the_same_scores(scorer, text, full):
    chunked = LocalScorer(scorer.lm, chunk_tokens=50)
    assert np.allclose(chunked.token_nll(text).nll[1:], full[1:], atol=TOL, rtol=0)


def test_short_texts(scorer):
    assert len(scorer.token_nll("")) == 0
    one = scorer.token_nll("Hello")
    assert len(one) == 1 and np.isnan(one.nll[0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 1}, r"window \(1\) must be at least 2"),
        ({"window": 9000}, r"window \(9000\) must be at most the model's context length \(8192\)"),
        ({"window": 64, "block": 64}, r"block \(64\) must be between 1 and window - 1 \(63\)"),
        ({"window": 64, "block": 0}, r"block \(0\)"),
    ],
)
def test_bad_windows_are_named(scorer, kwargs, message):
    with pytest.raises(ParameterError, match=message):
        scorer.token_nll("Some text.", **kwargs)


def test_progress_counts_tokens_and_cancellation_propagates(scorer, text):
    short = text[:400]
    n = len(_ids(scorer, short))
    seen: list[tuple[int, int]] = []
    LocalScorer(scorer.lm, chunk_tokens=16).token_nll(short, window=32, progress=Progress(counts=lambda d, t: seen.append((d, t))))
    assert seen[0] == (0, n - 1) and seen[-1] == (n - 1, n - 1)
    assert all(t == n - 1 for _, t in seen) and [d for d, _ in seen] == sorted({d for d, _ in seen})
    assert len(seen) >= 3

    def cancel(done, total):
        if done > 0:
            raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        LocalScorer(scorer.lm, chunk_tokens=16).token_nll(short, progress=Progress(counts=cancel))
    assert scorer.lm.lock.acquire(blocking=False)  # released on the way out
    scorer.lm.lock.release()


def test_threads_share_the_model_safely(scorer):
    texts = ["The clockmaker opened the shop at dawn.", "Rain fell on Harrow Lane all night, and nobody came."]
    expected = [scorer.token_nll(t).nll for t in texts]
    got: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(3):
            got[i] = scorer.token_nll(texts[i]).nll

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert np.array_equal(got[i], expected[i], equal_nan=True)


# ---------------------------------------------------------------- conditional_nll

D1 = "The clockmaker of Harrow Lane opened his shop before dawn."
D2 = "Rain had fallen all night."
PAIRS = [
    (D1, " He wound every clock."),
    (D1, " The street outside was still wet, and the lamps went out one by one as the light came up."),
    (D1, " Tick."),
    (D2, " The gutters overflowed and the cobbles shone."),
    ("", " A sentence with no context at all."),
    (D2 + " ", "Then the sun came out."),
]


def test_conditional_nll_equals_one_forward_over_the_concatenation(scorer):
    got = scorer.conditional_nll(PAIRS)
    expected = [direct_conditional(scorer, d, q) for d, q in PAIRS]
    assert np.allclose(got, expected, atol=TOL, rtol=0)


def test_padding_and_grouping_do_not_change_scores(scorer):
    together = scorer.conditional_nll(PAIRS)
    alone = [scorer.conditional_nll([p])[0] for p in PAIRS]
    assert np.allclose(together, alone, atol=1e-5, rtol=0)
    reordered = scorer.conditional_nll(PAIRS[::-1])[::-1]
    assert np.allclose(together, reordered, atol=1e-5, rtol=0)


def test_empty_context_is_one_space_and_empty_continuation_is_nan(scorer):
    a, b, c = scorer.conditional_nll([("", "Hello there."), (" ", "Hello there."), ("Context.", "")])
    assert a == b and math.isnan(c)


def test_conditional_nll_halves_batches_on_out_of_memory(scorer, monkeypatch):
    real = scorer._score_rows
    sizes: list[int] = []

    def flaky(rows, first, **kw):
        sizes.append(len(rows))
        if len(rows) > 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(rows, first, **kw)

    monkeypatch.setattr(scorer, "_score_rows", flaky)
    got = scorer.conditional_nll(PAIRS)
    monkeypatch.undo()
    assert max(sizes) > 1 and sizes[-1] == 1
    assert np.allclose(got, scorer.conditional_nll(PAIRS), atol=1e-5, rtol=0)


def test_out_of_memory_on_a_shared_context_is_a_model_error(scorer, monkeypatch):
    def no_memory(ids, *, keep_cache):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(scorer, "_prefix", no_memory)
    with pytest.raises(ModelError, match="out of memory even at batch size 1"):
        scorer.conditional_nll(PAIRS)
    with pytest.raises(ModelError, match="out of memory even at batch size 1"):
        scorer.next_token_probs("One, two,", [" three"])


def test_conditional_progress_and_bad_pairs(scorer):
    seen: list[tuple[int, int]] = []
    scorer.conditional_nll(PAIRS, progress=Progress(counts=lambda d, t: seen.append((d, t))))
    assert seen[0] == (0, len(PAIRS)) and seen[-1] == (len(PAIRS), len(PAIRS))
    with pytest.raises(ParameterError, match="pair 1 must be a"):
        scorer.conditional_nll([("a", "b"), ("only one",)])
    assert scorer.conditional_nll([]) == []


# ---------------------------------------------------------------- next_token_probs

QUESTION = [{"role": "user", "content": "Is 7 greater than 3? Answer 1 for yes or 2 for no."}]


def test_next_token_probs_match_a_direct_softmax(scorer):
    tok = scorer.lm.tokenizer
    rendered = tok.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    x = torch.tensor([tok(rendered, add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        probs = torch.softmax(scorer.lm.model(x).logits[0, -1].float(), dim=-1).double().numpy()
    got = scorer.next_token_probs(QUESTION, ["1", "2"])
    assert set(got) == {"1", "2"}
    for c, p in got.items():
        assert 0.0 <= p <= 1.0
        # float32 forwards through different code paths (prompt cache vs one call) differ by ~1e-6
        assert abs(p - probs[_ids(scorer, c)[0]]) <= 1e-5
    dist = scorer.next_token_distribution(QUESTION)
    assert dist.shape == (scorer.lm.model.config.vocab_size,)
    assert abs(dist.sum() - 1.0) <= 1e-6


def test_next_token_probs_of_a_plain_prompt(scorer):
    got = scorer.next_token_probs("One, two, three, four,", [" five", " six"])
    assert got[" five"] > got[" six"]


def test_next_token_probs_rejects_bad_input(scorer):
    with pytest.raises(ParameterError, match="candidates must be"):
        scorer.next_token_probs("x", [])
    with pytest.raises(ParameterError, match="candidate '' has no token"):
        scorer.next_token_probs("x", [""])
    with pytest.raises(ParameterError, match="non-empty list of chat messages"):
        scorer.next_token_probs([], ["1"])
    with pytest.raises(ParameterError, match="chat message 0"):
        scorer.next_token_probs([{"role": "user"}], ["1"])
