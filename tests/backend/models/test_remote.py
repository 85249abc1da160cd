"""RemoteScorer through the openai client against a real local OpenAI-compatible server.

The server (tests/support/openai_compat_server.py) computes its log-probs with the bundled
SmolLM2, so the remote numbers are checked against LocalScorer's on the same texts.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time

import numpy as np
import pytest

from backend.errors import Cancelled, ModelError, ParameterError
from backend.models.openai_compat import ServedModel
from backend.models.remote import RemoteScorer, token_starts
from backend.models.scorer import load_scorer
from backend.progress import CancelToken, Progress
from tests.support.openai_compat_server import Engine, start_server

KEY = "sk-chunklab-test-5f3a9c1e7d"
TEXT = (
    "Chunking splits a long document into passages. Each passage is embedded and stored. "
    "At question time the closest passages are retrieved and handed to the language model."
)


@pytest.fixture(scope="module")
def local():
    return load_scorer(device="cpu")


@pytest.fixture(scope="module")
def server():
    with start_server(api_key=KEY) as running:
        yield running


@pytest.fixture(scope="module")
def remote(server):
    return RemoteScorer(server.url, api_key=KEY)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_info_names_the_server_and_model(server, remote):
    info = remote.info
    assert info.kind == "remote-lm" and info.device == "remote" and info.dtype == "remote"
    assert info.name == server.engine.name  # the server's only model, found through /v1/models
    assert info.source == server.url
    assert info.context_length == server.engine.max_model_len
    assert info.parameters == 0
    # The served model's identity, not the URL: what the listing says stands behind the name.
    assert info.fingerprint == ServedModel(info.name, info.context_length).fingerprint("remote-lm")
    assert info.fingerprint.startswith("served:") and server.url not in info.fingerprint


def test_token_nll_matches_the_local_scorer(remote, local):
    got = remote.token_nll(TEXT)
    want = local.token_nll(TEXT)
    np.testing.assert_array_equal(got.starts, want.starts)
    np.testing.assert_array_equal(got.ends[:-1], want.starts[1:])
    assert got.ends[-1] == len(TEXT)
    assert math.isnan(got.nll[0]) and math.isnan(want.nll[0])
    np.testing.assert_allclose(got.nll[1:], want.nll[1:], atol=1e-4)
    assert got.window == remote.info.context_length


def _sample(name: str, chars: int) -> str:
    from backend.samples import load_sample

    return load_sample(name).text[:chars]


def test_long_text_is_scored_once_per_token_in_windows(remote, local):
    text = _sample("narrative", 1500)
    calls = []
    got = remote.token_nll(text, window=64, progress=Progress(counts=lambda done, total: calls.append((done, total))))
    want = local.token_nll(text, window=64)
    assert len(calls) > 3 and calls[-1] == (len(text), len(text))  # several requests
    assert got.window == 64
    # Cuts fall before whitespace, where this tokenizer starts tokens: the same tokens as one pass.
    np.testing.assert_array_equal(got.starts, want.starts)
    assert np.isnan(got.nll).sum() == 1
    # The first request scores like the local first window; later ones measure their context
    # in characters rather than tokens, so they only come close to the local sliding window.
    first = int(np.searchsorted(got.starts, calls[0][0]))
    np.testing.assert_allclose(got.nll[1:first], want.nll[1:first], atol=1e-4)
    assert abs(np.nanmean(got.nll) - np.nanmean(want.nll)) < 0.2


def test_long_chinese_text_in_windows_stays_aligned(remote, local):
    text = _sample("chinese", 160)
    got = remote.token_nll(text, window=48)
    want = local.token_nll(text, window=48)
    assert (np.diff(got.starts) >= 0).all() and got.starts[-1] < len(text) and got.ends[-1] == len(text)
    assert abs(len(got) - len(want)) <= 0.05 * len(want)  # a token split by a cut may count twice
    assert np.isnan(got.nll).sum() == 1
    assert abs(np.nanmean(got.nll) - np.nanmean(want.nll)) < 0.3


def test_prompt_too_long_for_the_server_shrinks_the_request(local):
    # Digits are one token each (about 1 character per token, not the 4 first guessed):
    # the server's "maximum context length" answer makes the scorer send less and retry.
    with start_server(Engine(max_model_len=40)) as small:
        scorer = RemoteScorer(small.url)
        assert scorer.info.context_length == 40
        text = "3141592653589793238462643383279502884197169399375105820974944592"
        got = scorer.token_nll(text)
    want = local.token_nll(text)
    np.testing.assert_array_equal(got.starts, want.starts)
    assert np.isnan(got.nll).sum() == 1 and np.isfinite(got.nll[1:]).all()


def test_window_is_checked(remote):
    with pytest.raises(ParameterError, match="at least 16"):
        remote.token_nll(TEXT, window=4)
    with pytest.raises(ParameterError, match="context length"):
        remote.token_nll(TEXT, window=remote.info.context_length + 1)


def test_empty_text(remote):
    got = remote.token_nll("")
    assert len(got) == 0 and got.starts.dtype == np.int64


def test_non_ascii_offsets_stay_in_the_text(remote, local):
    # Byte-level tokens that split a character come back as U+FFFD: aligned, not trusted.
    text = "Héllo wörld 😀 — naïve café 北京欢迎你. Ünïcödé ends here."
    got = remote.token_nll(text)
    want = local.token_nll(text)
    assert len(got) == len(want)
    assert (np.diff(got.starts) >= 0).all() and got.starts[0] == 0 and got.ends[-1] == len(text)
    # Every token that is whole characters starts where the tokenizer says.
    whole = [i for i in range(len(want)) if text[want.starts[i] : want.ends[i]].isascii()]
    np.testing.assert_array_equal(got.starts[whole], want.starts[whole])
    np.testing.assert_allclose(got.nll[1:], want.nll[1:], atol=1e-4)


def test_conditional_nll_matches_the_local_scorer(remote, local):
    pairs = [
        ("The weather was cold.", " We stayed inside and read."),
        ("Retrieval finds passages.", " The model answers from them."),
        ("A context with no continuation.", ""),
        ("", "An empty context becomes one space."),
        ("The picture had a blue back", "ground."),
    ]
    got = remote.conditional_nll(pairs)
    want = local.conditional_nll(pairs)
    np.testing.assert_allclose(got[:2], want[:2], atol=1e-4)
    assert math.isnan(got[2]) and math.isnan(want[2])
    # " " + "An" is one token for the server, the prompt's first: q's first token goes unscored.
    assert math.isfinite(got[3]) and abs(got[3] - want[3]) < 2
    # "back" + "ground" joined is one token straddling the join: it counts as q's.
    assert math.isfinite(got[4])


def test_conditional_nll_in_several_requests_reports_progress(remote, local):
    pairs = [(f"Sentence number {i} is here.", f" It is followed by {i + 1}.") for i in range(11)]
    calls = []
    got = remote.conditional_nll(pairs, progress=Progress(counts=lambda done, total: calls.append((done, total))))
    np.testing.assert_allclose(got, local.conditional_nll(pairs), atol=1e-4)
    assert calls[-1] == (11, 11) and len(calls) >= 2


def test_next_token_probs_match_the_local_scorer(remote, local):
    prompt = "The capital of France is"
    got = remote.next_token_probs(prompt, [" Paris", " London", " zyzzyva"])
    want = local.next_token_probs(prompt, [" Paris", " London"])
    assert got[" Paris"] == pytest.approx(want[" Paris"], abs=1e-4)
    assert got[" London"] == pytest.approx(want[" London"], abs=1e-4)
    assert got[" zyzzyva"] == 0.0  # outside the server's top 20


def test_next_token_probs_of_chat_messages(server, local):
    messages = [{"role": "user", "content": "Is the sky blue? Answer Yes or No."}]
    want = local.next_token_probs(messages, ["Yes", "No"])
    got = RemoteScorer(server.url, api_key=KEY).next_token_probs(messages, ["Yes", "No"])
    for c in ("Yes", "No"):
        if want[c] > 0.01:  # in the top 20 for sure
            assert got[c] == pytest.approx(want[c], abs=1e-4)
    with start_server(chat=False) as no_chat:  # no chat endpoint: completions with role lines
        fallback = RemoteScorer(no_chat.url).next_token_probs(messages, ["Yes", "No"])
    assert set(fallback) == {"Yes", "No"} and all(0.0 <= p <= 1.0 for p in fallback.values())


def test_next_token_probs_arguments(remote):
    with pytest.raises(ParameterError, match="non-empty list"):
        remote.next_token_probs("x", [])
    with pytest.raises(ParameterError, match="has no token"):
        remote.next_token_probs("x", ["a", ""])


def test_cancel_stops_between_requests(remote):
    token = CancelToken()
    seen = []

    def report(frac, eta, label):
        seen.append(frac)
        token.cancel()  # cancel after the first request

    with pytest.raises(Cancelled):
        remote.token_nll(" ".join([TEXT] * 4), window=48, progress=Progress(report, token))
    assert len(seen) == 1


def test_sentence_scores_through_the_remote_scorer(remote, local):
    from backend.models.scoring import sentence_scores
    from backend.text.document import Document

    doc = Document.from_text(TEXT, source="remote.txt")
    got = sentence_scores(doc, remote)
    want = sentence_scores(doc, local)
    assert [(s.start, s.end, s.tokens) for s in got] == [(s.start, s.end, s.tokens) for s in want]
    np.testing.assert_allclose([s.nll_mean for s in got], [s.nll_mean for s in want], atol=1e-4)


# --- configuration --------------------------------------------------------------------------------


def test_configuration_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("CHUNKLAB_REMOTE_BASE_URL", server.url)
    monkeypatch.setenv("CHUNKLAB_REMOTE_API_KEY", KEY)
    monkeypatch.setenv("CHUNKLAB_REMOTE_MODEL", server.engine.name)
    assert RemoteScorer().info.source == server.url
    monkeypatch.delenv("CHUNKLAB_REMOTE_BASE_URL")
    monkeypatch.delenv("CHUNKLAB_REMOTE_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert RemoteScorer().base_url == server.url


def test_no_url_is_a_model_error(monkeypatch):
    for var in ("CHUNKLAB_REMOTE_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelError, match="no remote scorer URL"):
        RemoteScorer()
    with pytest.raises(ModelError, match="must start with http"):
        RemoteScorer("localhost:8000/v1")


def test_unknown_model_is_a_model_error(server):
    with pytest.raises(ModelError, match="has no model 'gpt-9'"):
        RemoteScorer(server.url, "gpt-9", KEY)


def test_url_without_v1_is_refused_at_once_with_the_url_that_lists_the_models(server):
    # The root answers 404 for /models, {root}/v1/models lists the model: named or not, the error says which URL to use.
    root = server.url.removesuffix("/v1")
    for name in (server.engine.name, None):
        with pytest.raises(ModelError, match=r"does not list its models") as refused:
            RemoteScorer(root, name, KEY)
        assert f"use {server.url} as the server's URL" in str(refused.value)


# --- failures and the key ----------------------------------------------------------------------------


def _assert_clean(error: BaseException, *secrets: str) -> None:
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    for secret in secrets:
        assert secret not in message
        assert secret not in repr(error)
    assert error.__cause__ is None and error.__context__ is None  # nothing holding the request


def test_wrong_key_is_a_model_error_that_hides_both_keys(server):
    wrong = "sk-wrong-key-0c8d2b"
    with pytest.raises(ModelError, match="rejected the API key") as info:
        RemoteScorer(server.url, api_key=wrong)
    _assert_clean(info.value, wrong, KEY)  # the server's own message echoes the wrong key


def test_missing_key_is_a_model_error(server, monkeypatch):
    for var in ("CHUNKLAB_REMOTE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelError, match="rejected the API key"):
        RemoteScorer(server.url)


def test_key_never_appears_in_info_repr_logs_or_the_cache(remote, caplog, tmp_path):
    from backend.models.cache import OutputCache
    from backend.models.scoring import sentence_scores
    from backend.text.document import Document

    caplog.set_level(logging.DEBUG)
    cache = OutputCache(tmp_path / "cache")
    scores = sentence_scores(Document.from_text("A short text. Then another one.", source="k.txt"), remote, cache=cache)
    assert scores and cache.stats()["entries"] >= 1
    for shown in (repr(remote), str(remote.info), json.dumps(remote.info.to_json()), caplog.text):
        assert KEY not in shown
    for f in (tmp_path / "cache").rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes()


def test_server_down_fails_fast(server):
    with start_server() as gone:
        url = gone.url
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match=r"is unreachable \(connection refused\)") as info:
        RemoteScorer(url, api_key=KEY)
    assert time.perf_counter() - t0 < 5
    _assert_clean(info.value, KEY)


def test_wrong_port_fails_fast():
    url = f"http://127.0.0.1:{_free_port()}/v1"
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match=rf"remote scorer at {url} is unreachable") as info:
        RemoteScorer(url, "m", KEY)
    assert time.perf_counter() - t0 < 5
    _assert_clean(info.value, KEY)


def test_server_that_never_answers_times_out():
    # A socket that accepts connections (the kernel's backlog) but never replies.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
    try:
        t0 = time.perf_counter()
        with pytest.raises(ModelError, match=r"did not answer .* within 1s") as info:
            RemoteScorer(url, "m", KEY, timeout=1.0, retries=0)
        assert time.perf_counter() - t0 < 5
        _assert_clean(info.value, KEY)
    finally:
        silent.close()


def test_server_without_prompt_logprobs_is_a_model_error():
    with start_server(scoring="none") as plain:
        scorer = RemoteScorer(plain.url)
        with pytest.raises(ModelError, match="returned no prompt log-probs"):
            scorer.token_nll(TEXT)


def test_server_is_a_real_http_server(server):
    # Plain HTTP, no openai client: the protocol surface the scorer relies on.
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.url + "/models", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = json.loads(r.read())
    assert body["data"][0]["id"] == server.engine.name
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.url + "/models", timeout=5)
    assert info.value.code == 401


def test_concurrent_requests(remote, local):
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = remote.token_nll(TEXT).nll

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    want = local.token_nll(TEXT).nll
    for got in results.values():
        np.testing.assert_allclose(got[1:], want[1:], atol=1e-4)
    assert len(results) == 3


def test_align_spreads_fragments_over_the_characters_they_stand_for():
    text = "ab 北京."
    tokens = ["ab", " \ufffd", "\ufffd", "\ufffd", "\ufffd", "."]
    assert token_starts(text, tokens) == [0, 2, 3, 3, 4, 5]
    # SentencePiece markers read as spaces; a leading special token is handled by the caller.
    assert token_starts("a b", ["a", "\u2581b"]) == [0, 1]
