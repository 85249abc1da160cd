"""The settings of the OpenAI-compatible clients: every variable, its default, its bad values, who wins."""

from __future__ import annotations

import pytest

from backend import config
from backend.errors import ModelError
from backend.models.chat import CHAT_SERVICE
from backend.models.openai_compat import Endpoint
from backend.models.remote import SCORER_SERVICE

VARIABLES = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "CHUNKLAB_CHAT",
    "CHUNKLAB_LLM_TIMEOUT",
    "CHUNKLAB_LLM_RETRIES",
    "CHUNKLAB_REMOTE_BASE_URL",
    "CHUNKLAB_REMOTE_MODEL",
    "CHUNKLAB_REMOTE_API_KEY",
    "CHUNKLAB_REMOTE_TIMEOUT",
    "CHUNKLAB_REMOTE_RETRIES",
    "CHUNKLAB_REMOTE_CONCURRENCY",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_unset_variables_give_the_defaults():
    assert (config.llm_base_url(), config.llm_api_key(), config.llm_model()) == (None, None, None)
    assert (config.llm_timeout(), config.llm_retries(), config.chat_backend()) == (120.0, 2, "")
    assert (config.remote_base_url(), config.remote_api_key(), config.remote_model()) == (None, None, None)
    assert (config.remote_timeout(), config.remote_retries(), config.remote_concurrency()) == (60.0, 1, 8)


@pytest.mark.parametrize(
    "name, reader",
    [
        ("OPENAI_BASE_URL", config.llm_base_url),
        ("OPENAI_API_KEY", config.llm_api_key),
        ("OPENAI_MODEL", config.llm_model),
        ("CHUNKLAB_REMOTE_BASE_URL", config.remote_base_url),
        ("CHUNKLAB_REMOTE_API_KEY", config.remote_api_key),
        ("CHUNKLAB_REMOTE_MODEL", config.remote_model),
    ],
)
def test_text_settings_are_stripped_and_blank_is_unset(monkeypatch, name, reader):
    monkeypatch.setenv(name, "  value \n")
    assert reader() == "value"
    monkeypatch.setenv(name, "   ")
    assert reader() is None


def test_the_remote_scorer_falls_back_to_the_openai_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://chat:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-chat")
    monkeypatch.setenv("OPENAI_MODEL", "chat-model")
    assert (config.remote_base_url(), config.remote_api_key(), config.remote_model()) == (
        "http://chat:8000/v1",
        "sk-chat",
        None,  # the chat model is no scoring model: no fallback
    )
    monkeypatch.setenv("CHUNKLAB_REMOTE_BASE_URL", "http://score:8000/v1")
    monkeypatch.setenv("CHUNKLAB_REMOTE_API_KEY", "sk-score")
    assert (config.remote_base_url(), config.remote_api_key()) == ("http://score:8000/v1", "sk-score")
    assert (config.llm_base_url(), config.llm_api_key()) == ("http://chat:8000/v1", "sk-chat")


@pytest.mark.parametrize(
    "raw, llm, remote",
    [
        ("5", 5.0, 5.0),
        (" 2.5 ", 2.5, 2.5),
        ("", 120.0, 60.0),
        ("soon", 120.0, 60.0),
        ("0", 120.0, 60.0),  # no time at all is no timeout
        ("-3", 120.0, 60.0),
        ("nan", 120.0, 60.0),
    ],
)
def test_timeouts(monkeypatch, raw, llm, remote):
    monkeypatch.setenv("CHUNKLAB_LLM_TIMEOUT", raw)
    monkeypatch.setenv("CHUNKLAB_REMOTE_TIMEOUT", raw)
    assert (config.llm_timeout(), config.remote_timeout()) == (llm, remote)


@pytest.mark.parametrize(
    "raw, llm, remote",
    [
        ("3", 3, 3),
        ("0", 0, 0),  # retries off
        ("2.7", 2, 2),
        ("", 2, 1),
        ("many", 2, 1),
        ("-1", 2, 1),
        ("inf", 2, 1),
        ("nan", 2, 1),
    ],
)
def test_retries(monkeypatch, raw, llm, remote):
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", raw)
    monkeypatch.setenv("CHUNKLAB_REMOTE_RETRIES", raw)
    assert (config.llm_retries(), config.remote_retries()) == (llm, remote)


def test_chat_backend(monkeypatch):
    for raw, want in (("local", "local"), (" Remote ", "remote"), ("", "")):
        monkeypatch.setenv("CHUNKLAB_CHAT", raw)
        assert config.chat_backend() == want
    monkeypatch.setenv("CHUNKLAB_CHAT", "cloud")
    with pytest.raises(ModelError, match=r"^CHUNKLAB_CHAT must be 'local', 'remote' or unset, got 'cloud'$"):
        config.chat_backend()


def test_settings_are_read_at_call_time(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "4")
    assert config.llm_retries() == 4
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "5")
    assert config.llm_retries() == 5


# --- one reader for both clients: arguments win over the environment --------------------------------


def test_chat_endpoint_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:8000/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_MODEL", "served")
    monkeypatch.setenv("CHUNKLAB_LLM_TIMEOUT", "30")
    monkeypatch.setenv("CHUNKLAB_LLM_RETRIES", "0")
    e = Endpoint.resolve(CHAT_SERVICE)
    assert (e.base_url, e.model, e.api_key, e.timeout, e.retries) == ("http://gpu-box:8000/v1", "served", "sk-env", 30.0, 0)
    assert e.where == "LLM server at http://gpu-box:8000/v1"
    assert "sk-env" not in repr(e)


def test_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_REMOTE_BASE_URL", "http://env:1/v1")
    monkeypatch.setenv("CHUNKLAB_REMOTE_MODEL", "env-model")
    monkeypatch.setenv("CHUNKLAB_REMOTE_API_KEY", "sk-env")
    e = Endpoint.resolve(SCORER_SERVICE, "https://arg:2/v1", "arg-model", "sk-arg", timeout=3.0, retries=0)
    assert (e.base_url, e.model, e.api_key, e.timeout, e.retries) == ("https://arg:2/v1", "arg-model", "sk-arg", 3.0, 0)
    # Blank arguments, a timeout not above 0 and negative retries count as not given.
    e = Endpoint.resolve(SCORER_SERVICE, " ", "", "", timeout=0, retries=-1)
    assert (e.base_url, e.model, e.api_key, e.timeout, e.retries) == ("http://env:1/v1", "env-model", "sk-env", 60.0, 1)


def test_openai_itself_needs_a_key_and_the_scorer_needs_a_url(monkeypatch):
    with pytest.raises(ModelError, match=r"^no LLM configured: set OPENAI_API_KEY \(OpenAI\) or OPENAI_BASE_URL"):
        Endpoint.resolve(CHAT_SERVICE)
    e = Endpoint.resolve(CHAT_SERVICE, api_key="sk-openai")
    assert (e.base_url, e.where) == (None, "the OpenAI API")
    with pytest.raises(ModelError, match=r"^no remote scorer URL: enter one or set CHUNKLAB_REMOTE_BASE_URL"):
        Endpoint.resolve(SCORER_SERVICE, api_key="sk-openai")


@pytest.mark.parametrize("service, label", [(CHAT_SERVICE, "LLM server"), (SCORER_SERVICE, "remote scorer")])
def test_a_base_url_must_be_http(service, label):
    with pytest.raises(ModelError) as info:
        Endpoint.resolve(service, "localhost:8000/v1")
    assert str(info.value) == f"{label} URL 'localhost:8000/v1' must start with http:// or https:// and name a host"


@pytest.mark.parametrize(
    "raw, want",
    [("1", 1), ("16", 16), ("64", 64), ("4.9", 4), ("", 8), ("0", 8), ("65", 8), ("-2", 8), ("many", 8), ("inf", 8)],
)
def test_remote_concurrency(monkeypatch, raw, want):
    monkeypatch.setenv("CHUNKLAB_REMOTE_CONCURRENCY", raw)
    assert config.remote_concurrency() == want
