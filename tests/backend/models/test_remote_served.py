"""RemoteScorer: the served model's identity, vLLM's prompt_logprobs, and servers that give no prompt log-probs.

Every server here is the scripted OpenAI-compatible one (tests/support/openai_compat_server.py)
with the bundled SmolLM2 behind it, in the mode of a real server: vLLM (echo and
prompt_logprobs), a server that only has the prompt_logprobs extension, llama.cpp's
llama-server (echo ignored or refused, the request's ``model`` ignored, routes without /v1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.errors import ModelError
from backend.models.cache import OutputCache
from backend.models.remote import RemoteScorer
from backend.models.scorer import load_scorer
from backend.models.scoring import cached_token_scores, conditional_scores, document_token_scores
from backend.samples import load_sample
from tests.support.openai_compat_server import Engine, start_server

TEXT = (
    "Chunking splits a long document into passages. Each passage is embedded and stored. "
    "At question time the closest passages are retrieved and handed to the language model."
)
PAIRS = [
    ("The weather was cold.", " We stayed inside and read."),
    ("Retrieval finds passages.", " The model answers from them."),
    ("A context with no continuation.", ""),
    ("", "An empty context becomes one space."),
]
OTHER = "gpt-4o-mini"


@pytest.fixture(scope="module")
def local():
    return load_scorer(device="cpu")


@pytest.fixture(scope="module")
def vllm():
    with start_server() as running:
        yield running


@pytest.fixture(scope="module")
def extension_only():
    """A server whose echo gives the generated token's log-probs only, but that has vLLM's prompt_logprobs."""
    with start_server(scoring="prompt_logprobs") as running:
        yield running


# --- vLLM's prompt_logprobs --------------------------------------------------------------------------


def test_prompt_logprobs_give_the_echo_paths_and_the_local_numbers(vllm, extension_only, local):
    echo = RemoteScorer(vllm.url)
    extension = RemoteScorer(extension_only.url)
    got = extension.token_nll(TEXT)
    assert extension.prompt_mode == "prompt_logprobs"
    by_echo = echo.token_nll(TEXT)
    assert echo.prompt_mode == "echo"
    want = local.token_nll(TEXT)
    np.testing.assert_array_equal(got.starts, by_echo.starts)
    np.testing.assert_array_equal(got.starts, want.starts)
    np.testing.assert_array_equal(got.ends, by_echo.ends)
    assert math.isnan(got.nll[0])
    np.testing.assert_allclose(got.nll[1:], by_echo.nll[1:], atol=1e-6)
    np.testing.assert_allclose(got.nll[1:], want.nll[1:], atol=1e-4)


def test_prompt_logprobs_in_windows_cut_like_the_echo_path(vllm, extension_only):
    text = load_sample("narrative").text[:1200]
    got = RemoteScorer(extension_only.url).token_nll(text, window=64)
    want = RemoteScorer(vllm.url).token_nll(text, window=64)
    np.testing.assert_array_equal(got.starts, want.starts)
    np.testing.assert_allclose(got.nll, want.nll, atol=1e-6)  # both NaN at the first token


def test_prompt_logprobs_of_non_ascii_text(extension_only, local):
    # Byte-level tokens that split a character decode as U+FFFD: aligned to the text, as with echo.
    text = "Héllo wörld 😀 — naïve café 北京欢迎你. Ünïcödé ends here."
    got = RemoteScorer(extension_only.url).token_nll(text)
    want = local.token_nll(text)
    assert len(got) == len(want) and got.starts[0] == 0 and got.ends[-1] == len(text)
    assert (np.diff(got.starts) >= 0).all()
    whole = [i for i in range(len(want)) if text[want.starts[i] : want.ends[i]].isascii()]
    np.testing.assert_array_equal(got.starts[whole], want.starts[whole])
    np.testing.assert_allclose(got.nll[1:], want.nll[1:], atol=1e-4)


@pytest.mark.parametrize("scoring", ["vllm", "prompt_logprobs"])
def test_a_leading_special_token_and_vocabulary_pieces_keep_the_offsets(scoring, local):
    # A BOS before the prompt (no part of the text) and tokens named Ġworld-style (older vLLM):
    # both ways give the local tokenization's starts, and the first real token gets a log-prob.
    with start_server(scoring=scoring, bos=True, raw_pieces=True) as server:
        scorer = RemoteScorer(server.url)
        got = scorer.token_nll(TEXT)
        pairs = scorer.conditional_nll(PAIRS[:2])
    assert scorer.prompt_mode == ("echo" if scoring == "vllm" else "prompt_logprobs")
    want = local.token_nll(TEXT)
    np.testing.assert_array_equal(got.starts, want.starts)
    assert got.ends[-1] == len(TEXT) and np.isfinite(got.nll).all()  # the first token follows the BOS
    assert all(math.isfinite(v) for v in pairs)


def test_prompt_logprobs_conditional_nll_matches_the_echo_path(vllm, extension_only, local):
    got = RemoteScorer(extension_only.url, concurrency=2).conditional_nll(PAIRS * 3)
    want = RemoteScorer(vllm.url).conditional_nll(PAIRS * 3)
    np.testing.assert_allclose(got, want, atol=1e-6)  # the empty continuations are NaN in both
    np.testing.assert_allclose(got[:2], local.conditional_nll(PAIRS[:2]), atol=1e-4)


def test_the_way_that_works_is_remembered(vllm, extension_only):
    extension = RemoteScorer(extension_only.url)
    extension_only.reset_counts()
    extension.token_nll("A first short text.")
    assert extension_only.posts == 2  # echo (ignored), then prompt_logprobs
    extension_only.reset_counts()
    extension.token_nll("A second short text.")
    assert extension_only.posts == 1  # prompt_logprobs straight away
    echo = RemoteScorer(vllm.url)
    vllm.reset_counts()
    echo.token_nll("A first short text.")
    echo.token_nll("A second short text.")
    assert vllm.posts == 2 and echo.prompt_mode == "echo"


def test_prompt_logprobs_are_tried_once_per_scorer_even_with_requests_in_flight(extension_only):
    pairs = [(f"Sentence {i}.", f" Next {i}.") for i in range(24)]  # 3 requests of 8 pairs
    scorer = RemoteScorer(extension_only.url, concurrency=4)
    extension_only.reset_counts()
    values = scorer.conditional_nll(pairs)
    assert extension_only.posts == 4  # the first request alone (echo, then prompt_logprobs), then 2
    assert all(math.isfinite(v) for v in values)


# --- servers that give no prompt log-probs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("scoring", "reason"),
    [
        ("echo_ignored", "(echo ignored; prompt_logprobs ignored)"),
        ("echo_refused", "(echo refused, HTTP 400: Only no echo is supported; prompt_logprobs ignored)"),
        ("none", "(echo ignored; prompt_logprobs ignored)"),
    ],
)
def test_no_prompt_log_probs_names_the_servers_that_work(scoring, reason):
    with start_server(scoring=scoring) as server:
        scorer = RemoteScorer(server.url)
        with pytest.raises(ModelError) as info:
            scorer.token_nll(TEXT)
        with pytest.raises(ModelError, match="returned no prompt log-probs"):
            scorer.conditional_nll(PAIRS)
    message = str(info.value)
    assert message == (
        f"remote scorer at {server.url} returned no prompt log-probs for model {scorer.model!r} {reason}: "
        "scoring needs a server that returns them, as vLLM does (echo=True with logprobs, or its prompt_logprobs "
        "extension); llama.cpp's llama-server, Ollama and OpenAI's API return none (they can still serve chat)"
    )
    assert scorer.prompt_mode is None


def test_no_prompt_log_probs_leaves_nothing_in_the_cache(tmp_path):
    cache = OutputCache(tmp_path / "cache")
    with start_server(scoring="echo_ignored") as server:
        scorer = RemoteScorer(server.url)
        with pytest.raises(ModelError, match="no prompt log-probs"):
            document_token_scores(TEXT, scorer, cache=cache)
        with pytest.raises(ModelError, match="no prompt log-probs"):
            conditional_scores(PAIRS, scorer, cache=cache)
    assert cache.stats()["entries"] == 0


def test_url_without_v1_on_llama_cpp_gets_the_hint():
    # llama.cpp answers /models and its own /completions without /v1: the model is found, and the
    # completions answer has no choices.
    with start_server(llama_routes=True) as server:
        bare = server.url.removesuffix("/v1")
        scorer = RemoteScorer(bare)
        assert scorer.model == server.engine.name
        with pytest.raises(ModelError) as info:
            scorer.token_nll(TEXT)
    assert str(info.value) == (
        f"remote scorer at {bare} answered 0 choices for 1 prompts (OpenAI-compatible URLs usually end in /v1)"
    )


@pytest.mark.parametrize("llama", ["echo_ignored", "no /v1"])
def test_cli_lm_remote_against_llama_cpp_is_one_line(llama, tmp_path, monkeypatch, capsys):
    from backend.cli.main import main

    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CHUNKLAB_REMOTE_MODEL", raising=False)
    monkeypatch.delenv("CHUNKLAB_REMOTE_API_KEY", raising=False)
    scoring = "echo_ignored" if llama == "echo_ignored" else "vllm"
    with start_server(scoring=scoring, llama_routes=True, ignore_model=True) as server:
        url = server.url if llama == "echo_ignored" else server.url.removesuffix("/v1")
        monkeypatch.setenv("CHUNKLAB_REMOTE_BASE_URL", url)
        capsys.readouterr()  # the server's own model loading
        assert main(["ppl", str(doc), "--lm", "remote"]) == 1
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert out == "" and len(lines) == 1 and "Traceback" not in err, err
    if llama == "echo_ignored":
        assert lines[0].startswith(f"error: remote scorer at {url} returned no prompt log-probs for model ")
        assert "as vLLM does" in lines[0] and "llama.cpp's llama-server, Ollama and OpenAI's API" in lines[0]
    else:
        assert lines[0] == f"error: remote scorer at {url} answered 0 choices for 1 prompts (OpenAI-compatible URLs usually end in /v1)"
    assert OutputCache(tmp_path / "data" / "cache").stats()["entries"] == 0


# --- the served model's identity -----------------------------------------------------------------------


def test_fingerprint_is_the_served_model_not_the_url(vllm):
    with start_server(api_key="another") as elsewhere, start_server(Engine(served_name="renamed")) as renamed:
        same = RemoteScorer(elsewhere.url, api_key="another")
        other = RemoteScorer(renamed.url)
    here = RemoteScorer(vllm.url)
    assert same.info.source != here.info.source
    assert same.info.fingerprint == here.info.fingerprint  # the same model behind another URL
    assert other.info.fingerprint != here.info.fingerprint  # another model name
    assert here.info.fingerprint.startswith("served:")


def test_llama_cpp_that_lists_one_model_refuses_another_name():
    with start_server(ignore_model=True) as server:
        with pytest.raises(ModelError) as info:
            RemoteScorer(server.url, OTHER)
    assert str(info.value).startswith(f"remote scorer at {server.url} has no model '{OTHER}' (it serves: ")


def test_a_server_that_ignores_model_cannot_poison_another_models_entries(vllm, tmp_path):
    cache = OutputCache(tmp_path / "cache")
    # Lists two models but answers every request with its own (llama.cpp's habit).
    with start_server(ignore_model=True, also_listed=(OTHER,)) as server:
        asked = RemoteScorer(server.url, OTHER)
        served = RemoteScorer(server.url, server.engine.name)
        assert asked.info.fingerprint != served.info.fingerprint
        for run in (
            lambda: document_token_scores(TEXT, asked, cache=cache),
            lambda: conditional_scores(PAIRS, asked, cache=cache),
            lambda: asked.next_token_probs("The capital of France is", [" Paris"]),
            lambda: asked.next_token_probs([{"role": "user", "content": "Yes or no?"}], ["Yes"]),
        ):
            with pytest.raises(ModelError) as info:
                run()
            assert f"with model '{server.engine.name}' when asked for '{OTHER}'" in str(info.value)
        assert cache.stats()["entries"] == 0
        assert asked.prompt_mode is None
        # The model it does serve scores, and its entries are its own.
        scores, hit = document_token_scores(TEXT, served, cache=cache)
    assert not hit and len(scores) > 10
    assert cached_token_scores(cache, asked.info.fingerprint, TEXT, None, scorer_kind="remote-lm") is None
    assert cached_token_scores(cache, served.info.fingerprint, TEXT, None, scorer_kind="remote-lm") is not None
    # The same weights behind the vLLM-like server share them.
    assert RemoteScorer(vllm.url).info.fingerprint == served.info.fingerprint


def test_a_server_without_a_listing_is_trusted_until_its_answer_names_another_model(tmp_path):
    cache = OutputCache(tmp_path / "cache")
    with start_server(listing=False, ignore_model=True) as server:
        asked = RemoteScorer(server.url, OTHER)  # nothing to check the name against yet
        with pytest.raises(ModelError, match=f"with model '{server.engine.name}' when asked for '{OTHER}'"):
            document_token_scores(TEXT, asked, cache=cache)
        assert cache.stats()["entries"] == 0
        named = RemoteScorer(server.url, server.engine.name)
        _scores, hit = document_token_scores(TEXT, named, cache=cache)
    assert not hit and cache.stats()["entries"] == 1
    assert asked.info.fingerprint != named.info.fingerprint


def test_an_answer_naming_another_listed_model_is_refused():
    with start_server(answer_model=OTHER, also_listed=(OTHER,)) as server:
        scorer = RemoteScorer(server.url, server.engine.name)
        with pytest.raises(ModelError, match=f"with model '{OTHER}' when asked for"):
            scorer.token_nll(TEXT)
