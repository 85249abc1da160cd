"""The remote embedder's settings: every CHUNKLAB_EMBEDDER_* variable, its default, its bad values, its fallback."""

from __future__ import annotations

import pytest

from backend import config
from backend.errors import ModelError
from backend.models.remote_embedder import remote_embedder_settings

VARIABLES = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    *(f"CHUNKLAB_EMBEDDER_{n}" for n in ("BASE_URL", "MODEL", "API_KEY", "TIMEOUT", "RETRIES", "CONCURRENCY", "BATCH", "DIMENSIONS")),
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_unset_variables_give_the_defaults():
    assert (config.embedder_base_url(), config.embedder_api_key(), config.embedder_model()) == (None, None, None)
    assert (config.embedder_timeout(), config.embedder_retries(), config.embedder_concurrency()) == (60.0, 1, 8)
    assert (config.embedder_batch(), config.embedder_dimensions()) == (64, None)


@pytest.mark.parametrize(
    ("name", "raw", "reader", "want"),
    [
        ("CHUNKLAB_EMBEDDER_CONCURRENCY", "3", config.embedder_concurrency, 3),
        ("CHUNKLAB_EMBEDDER_CONCURRENCY", "0", config.embedder_concurrency, 8),
        ("CHUNKLAB_EMBEDDER_CONCURRENCY", "65", config.embedder_concurrency, 8),
        ("CHUNKLAB_EMBEDDER_BATCH", "256", config.embedder_batch, 256),
        ("CHUNKLAB_EMBEDDER_BATCH", "4096", config.embedder_batch, 64),
        ("CHUNKLAB_EMBEDDER_BATCH", "many", config.embedder_batch, 64),
        ("CHUNKLAB_EMBEDDER_DIMENSIONS", "256", config.embedder_dimensions, 256),
        ("CHUNKLAB_EMBEDDER_DIMENSIONS", "0", config.embedder_dimensions, None),
        ("CHUNKLAB_EMBEDDER_DIMENSIONS", "x", config.embedder_dimensions, None),
        ("CHUNKLAB_EMBEDDER_TIMEOUT", "2.5", config.embedder_timeout, 2.5),
        ("CHUNKLAB_EMBEDDER_TIMEOUT", "-1", config.embedder_timeout, 60.0),
        ("CHUNKLAB_EMBEDDER_RETRIES", "0", config.embedder_retries, 0),
    ],
)
def test_numbers_and_their_bad_values(monkeypatch, name, raw, reader, want):
    monkeypatch.setenv(name, raw)
    assert reader() == want


def test_the_openai_variables_are_the_fallback_and_a_url_spec_wins(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://fallback:1/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    endpoint = remote_embedder_settings("remote").endpoint
    assert (endpoint.base_url, endpoint.api_key, endpoint.model) == ("http://fallback:1/v1", "sk-fallback", None)
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_BASE_URL", "http://own:2/v1")
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_API_KEY", "sk-own")
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_MODEL", " bge-small ")
    endpoint = remote_embedder_settings("remote").endpoint
    assert (endpoint.base_url, endpoint.api_key, endpoint.model) == ("http://own:2/v1", "sk-own", "bge-small")
    assert remote_embedder_settings("http://given:3/v1").endpoint.base_url == "http://given:3/v1"
    assert "sk-own" not in repr(remote_embedder_settings("remote"))


def test_no_server_and_no_key_is_one_line():
    with pytest.raises(ModelError) as err:
        remote_embedder_settings("remote")
    assert str(err.value) == (
        "no embeddings server: set CHUNKLAB_EMBEDDER_BASE_URL (e.g. http://host:8080/v1), or "
        "CHUNKLAB_EMBEDDER_API_KEY for OpenAI's API"
    )
