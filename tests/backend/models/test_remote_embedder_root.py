"""A server that lists its models at the root (infinity's default) named with ``/v1``: the error says what to use."""

from __future__ import annotations

import pytest

from backend.errors import ModelError
from backend.models.remote_embedder import RemoteEmbedder
from tests.support.embedding_server import start_embedding_server

NAME = "all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    for name in ("BASE_URL", "MODEL", "API_KEY", "DIMENSIONS"):
        monkeypatch.delenv(f"CHUNKLAB_EMBEDDER_{name}", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def infinity():
    with start_embedding_server(prefix="") as running:  # /models and /embeddings, no /v1
        yield running


@pytest.mark.parametrize("model", [None, NAME])
def test_the_404_and_the_url_that_lists_the_models_are_named(infinity, model):
    root = infinity.url
    with pytest.raises(ModelError) as err:
        RemoteEmbedder(f"{root}/v1", model=model)
    assert str(err.value) == (
        f"embeddings server at {root}/v1 does not list its models: {root}/v1/models answered HTTP 404, "
        f"but {root}/models lists {NAME}: use {root} as the server's URL"
    )
    assert RemoteEmbedder(root, model=model).dimension == 384  # what the line says works


def test_a_server_that_lists_nothing_anywhere_names_the_404():
    with start_embedding_server(listed=False) as running:
        with pytest.raises(ModelError) as err:
            RemoteEmbedder(running.url)
        assert str(err.value) == (
            f"embeddings server at {running.url} does not list its models ({running.url}/models answered HTTP 404): "
            "set CHUNKLAB_EMBEDDER_MODEL"
        )
        assert RemoteEmbedder(running.url, model=NAME).dimension == 384  # named, it is trusted as before
