"""The LLM client: retries with back-off over real HTTP, auth errors, the reply cache, the two chat backends."""

from __future__ import annotations

import json

import pytest

from backend.errors import ModelError
from backend.models.cache import OutputCache
from backend.models.chat import (
    LocalChat,
    RemoteChat,
    cached_reply,
    chat,
    chat_cache_key,
    default_chat_model,
)
from backend.models.openai_compat import ServedModel
from tests.support.scripted_chat_server import start_scripted_server

MESSAGES = [{"role": "user", "content": "Say ok."}]


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "CHUNKLAB_LLM_RETRIES", "CHUNKLAB_CHAT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def cache(tmp_path):
    return OutputCache(tmp_path / "cache")


class CountingModel:
    """A ChatModel that counts its calls."""

    fingerprint = "fake:counting"
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages, *, max_tokens, temperature=0.0, progress=None):
        self.calls += 1
        return f"reply {self.calls}"


@pytest.mark.parametrize("failures", [[429], [500], [429, 503]])
def test_429_and_5xx_are_retried_with_growing_delays(failures):
    with start_scripted_server(reply=lambda m: "fine", failures=failures) as server:
        assert chat(MESSAGES, base_url=server.url, model="scripted-model", retries=2) == "fine"
        times = [r["t"] for r in server.chat_requests]
    assert len(times) == len(failures) + 1
    gaps = [b - a for a, b in zip(times, times[1:])]
    # The openai client's back-off: 0.5 s, then 1 s (each minus up to 25 % jitter).
    assert gaps[0] >= 0.5 * 0.75 - 0.05
    if len(gaps) > 1:
        assert gaps[1] >= 1.0 * 0.75 - 0.05


def test_retries_are_configurable_and_the_last_failure_is_one_line(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "0")
    with start_scripted_server(failures=[429, 429]) as server:
        with pytest.raises(ModelError) as e:
            chat(MESSAGES, base_url=server.url, model="scripted-model")
        assert len(server.chat_requests) == 1
    assert "HTTP 429" in str(e.value) and "\n" not in str(e.value)


def test_retry_after_header_is_honoured():
    with start_scripted_server(failures=[429], retry_after="1.5") as server:
        assert chat(MESSAGES, base_url=server.url, model="scripted-model", retries=1) == "ok"
        first, second = (r["t"] for r in server.chat_requests)
    assert second - first >= 1.4


def test_a_rejected_key_is_one_line_without_the_key_and_not_retried():
    secret = "sk-test-SECRET-123"
    with start_scripted_server(api_key="right") as server:
        with pytest.raises(ModelError) as e:
            chat(MESSAGES, base_url=server.url, api_key=secret, model="scripted-model", retries=3)
        # The key is refused at the model listing that confirms the served model, before any chat request.
        assert [r["path"] for r in server.requests] == ["/v1/models"]
    message = str(e.value)
    assert "rejected the API key" in message and "OPENAI_API_KEY" in message
    assert secret not in message and "\n" not in message
    assert e.value.__cause__ is None  # the client's exception holds the request headers


def test_cached_reply_answers_a_rerun_without_a_model_call(cache):
    model = CountingModel()
    first, hit1 = cached_reply(model, MESSAGES, max_tokens=8, cache=cache)
    second, hit2 = cached_reply(model, MESSAGES, max_tokens=8, cache=cache)
    assert (first, hit1, second, hit2, model.calls) == ("reply 1", False, "reply 1", True, 1)
    # Another setting or other messages: another entry.
    assert cached_reply(model, MESSAGES, max_tokens=9, cache=cache) == ("reply 2", False)
    assert cached_reply(model, [{"role": "user", "content": "Say no."}], max_tokens=8, cache=cache)[1] is False


def test_sampled_replies_are_never_cached(cache):
    model = CountingModel()
    cached_reply(model, MESSAGES, max_tokens=8, temperature=0.7, cache=cache)
    assert cached_reply(model, MESSAGES, max_tokens=8, temperature=0.7, cache=cache) == ("reply 2", False)
    assert cache.stats()["entries"] == 0


def test_chat_with_a_cache_asks_the_server_once_and_keys_hold_no_url_or_key(cache, tmp_path):
    secret = "sk-cache-SECRET"
    with start_scripted_server(reply=lambda m: "cached answer", api_key=secret) as server:
        for _ in range(2):
            assert chat(MESSAGES, base_url=server.url, api_key=secret, model="scripted-model", cache=cache) == "cached answer"
        assert len(server.chat_requests) == 1
        key = chat_cache_key(RemoteChat(server.url, "scripted-model", secret).fingerprint, MESSAGES, 0.0, 1024)
    assert key["model"] == ServedModel("scripted-model").fingerprint("chat")
    blob = json.dumps(key) + "".join(p.read_bytes().decode("latin-1") for p in (tmp_path / "cache").iterdir())
    assert secret not in blob and "127.0.0.1" not in blob


def test_the_same_model_behind_another_url_shares_cached_replies(cache):
    with start_scripted_server(reply=lambda m: "from A") as a, start_scripted_server(reply=lambda m: "from B") as b:
        assert cached_reply(RemoteChat(a.url, model="scripted-model"), MESSAGES, max_tokens=8, cache=cache)[0] == "from A"
        assert cached_reply(RemoteChat(b.url, model="scripted-model"), MESSAGES, max_tokens=8, cache=cache) == ("from A", True)
        assert len(b.chat_requests) == 0


def test_remote_chat_discovers_the_served_model_and_hides_its_key():
    with start_scripted_server(model="only-one") as server:
        remote = RemoteChat(server.url, api_key="sk-hidden")
        assert remote.name == "only-one" and remote.fingerprint == ServedModel("only-one").fingerprint("chat")
        assert "sk-hidden" not in repr(remote)


def test_default_chat_model_follows_the_environment(monkeypatch):
    assert isinstance(default_chat_model(), LocalChat)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert isinstance(default_chat_model(), RemoteChat)
    monkeypatch.setenv("CHUNKLAB_CHAT", "local")
    assert isinstance(default_chat_model(), LocalChat)
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("CHUNKLAB_CHAT", "remote")
    with pytest.raises(ModelError, match="no LLM is configured"):
        default_chat_model()
    monkeypatch.setenv("CHUNKLAB_CHAT", "cloud")
    with pytest.raises(ModelError, match="CHUNKLAB_CHAT"):
        default_chat_model()


def test_local_chat_fingerprint_needs_no_model_load():
    local = LocalChat()
    assert local.fingerprint.startswith("local:") and len(local.fingerprint) == len("local:") + 64
    assert local._lm is None
