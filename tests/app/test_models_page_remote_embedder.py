"""The Models page's embeddings-server choice with ``AppTest``: loading one, and an unreachable one in one line."""

from __future__ import annotations

import socket

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.apptest import open_page
from tests.support.apptest import run as _run
from tests.support.embedding_server import start_embedding_server


@pytest.fixture
def at(tmp_path, monkeypatch) -> AppTest:
    """The app on the Models page, with a private output cache and no embeddings server configured."""
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("CHUNKLAB_EMBEDDER_BASE_URL", "CHUNKLAB_EMBEDDER_MODEL", "CHUNKLAB_EMBEDDER_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return _run(open_page("pages/models.py"))  # one run more: the page settled after its switch


def _load(at: AppTest, url: str) -> None:
    at.radio(key="models_emb_source").set_value("remote")
    _run(at)
    at.text_input(key="models_emb_url").input(url)
    at.button(key="models_emb_load").click()
    _run(at)


def test_an_embeddings_server_becomes_the_sessions_embedder(at: AppTest) -> None:
    with start_embedding_server(models=["minilm-served"]) as server:
        _load(at, server.url)
        _run(at)
        assert [e.value for e in at.error] == []
        info = at.session_state["models_emb_info"]
        assert (info.name, info.kind, info.source) == ("minilm-served", "remote-embedder", server.url)
        assert at.session_state["models_emb_choice"] == server.url


def test_an_unreachable_embeddings_server_is_one_line(at: AppTest) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _load(at, f"http://127.0.0.1:{port}/v1")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "\n" not in errors[0]
    assert errors[0].endswith(f"embeddings server at http://127.0.0.1:{port}/v1 is unreachable (connection refused)")
