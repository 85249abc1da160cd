"""RemoteEmbedder through the openai client against a real local embeddings server.

The server (tests/support/embedding_server.py) computes its vectors with the bundled
all-MiniLM-L6-v2, so the remote vectors are checked against the local embedder's.
"""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest

from backend.errors import Cancelled, ModelError, ParameterError
from backend.models.cache import OutputCache
from backend.models.embedder import embedder_name, load_embedder, loaded_embedder, resolve_embedder_spec
from backend.models.embeddings import embed_texts, embeddings_key, lazy_text_embedder
from backend.models.identity import embedder_fingerprint_without_loading
from backend.models.rates import rate_store
from backend.models.remote_embedder import RemoteEmbedder, connect_remote_embedder, is_remote_embedder
from backend.progress import CancelToken, Progress
from tests.support.embedding_server import start_embedding_server

KEY = "sk-chunklab-embed-test-91c2"
TEXTS = [
    "Chunking splits a long document into passages.",
    "Each passage is embedded and stored.",
    "At question time the closest passages are retrieved.",
    "A tiny one.",
    "The language model reads the retrieved passages and answers.",
]
_SETTINGS = ("BASE_URL", "MODEL", "API_KEY", "TIMEOUT", "RETRIES", "CONCURRENCY", "BATCH", "DIMENSIONS")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in _SETTINGS:
        monkeypatch.delenv(f"CHUNKLAB_EMBEDDER_{name}", raising=False)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHUNKLAB_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def local():
    return load_embedder("minilm", "cpu")


@pytest.fixture(scope="module")
def server():
    with start_embedding_server(api_key=KEY) as running:
        yield running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_vectors_equal_the_local_embedders(server, local):
    remote = RemoteEmbedder(server.url, api_key=KEY, batch=2, concurrency=3)
    vectors = remote.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (5, local.dimension) == (5, remote.dimension)
    np.testing.assert_allclose(vectors, local.embed(TEXTS), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert remote.embed([]).shape == (0, 384)
    # A server that answers JSON floats although the client asked for base64 (the openai client's default).
    with start_embedding_server(base64=False) as floats:
        np.testing.assert_allclose(RemoteEmbedder(floats.url).embed(TEXTS), vectors, atol=1e-6)


def test_info_is_the_served_identity_without_url_or_key(server, local):
    remote = RemoteEmbedder(server.url, api_key=KEY)
    info = remote.info
    assert (info.name, info.kind, info.device, info.dtype, info.source) == (
        local.info.name, "remote-embedder", "remote", "remote", server.url,
    )
    assert info.fingerprint.startswith("served:") and remote.dimension == 384
    assert KEY not in repr(remote) and KEY not in repr(info) and server.url not in info.fingerprint
    # The same model behind another URL shares the identity (and so the cached vectors).
    with start_embedding_server(api_key=KEY) as other:
        assert RemoteEmbedder(other.url, api_key=KEY).info.fingerprint == info.fingerprint
    assert remote.input_keys(["a", "b", "a"]) == [b"a", b"b", b"a"]


def test_requests_are_batched_and_concurrent_with_progress_in_order(local):
    with start_embedding_server(delay=0.2) as slow:
        remote = RemoteEmbedder(slow.url, batch=1, concurrency=4)
        slow.reset_counts()
        seen: list[tuple[int, int]] = []
        vectors = remote.embed(TEXTS, progress=lambda done, total: seen.append((done, total)))
        assert slow.posts == 5 and slow.peak_in_flight >= 2
        assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
        np.testing.assert_allclose(vectors, local.embed(TEXTS), atol=1e-6)


def test_cancel_stops_between_requests():
    with start_embedding_server() as running:
        remote = RemoteEmbedder(running.url, batch=1, concurrency=1)
        token = CancelToken()
        running.reset_counts()

        def report(done: int, total: int) -> None:
            if done == 2:
                token.cancel()

        with pytest.raises(Cancelled):
            remote.embed(TEXTS, progress=Progress(cancel=token, counts=report))
        assert running.posts == 2


def test_a_server_answering_another_model_is_refused(local):
    # llama.cpp answers whatever model it was started with, under its own name.
    with start_embedding_server(models=["nomic-embed", "minilm-served"], answer_model="nomic-embed") as running:
        with pytest.raises(ModelError) as err:
            RemoteEmbedder(running.url, model="minilm-served")
    assert "answered an embeddings request (1 text) with model 'nomic-embed' when asked for 'minilm-served'" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_answer_of_another_model_never_reaches_the_cache(tmp_path):
    cache = OutputCache(tmp_path / "cache")
    with start_embedding_server(models=["minilm-served", "other-model"]) as running:
        remote = RemoteEmbedder(running.url, model="minilm-served")
        running.set_answer_model("other-model")  # the server swapped what it serves behind the name
        with pytest.raises(ModelError, match="with model 'other-model' when asked for 'minilm-served'"):
            embed_texts(remote, TEXTS, cache=cache)
        assert not cache.contains(embeddings_key(remote.info.fingerprint, TEXTS))
        running.set_answer_model(None)
        assert not embed_texts(remote, TEXTS, cache=cache)[1]


def test_a_name_the_server_does_not_list_is_refused():
    with start_embedding_server(models=["served-a"]) as running:
        with pytest.raises(ModelError, match=r"has no model 'text-embedding-3-large' \(it serves: served-a\)"):
            RemoteEmbedder(running.url, model="text-embedding-3-large")


def test_another_dimension_is_another_identity(tmp_path):
    with start_embedding_server(shortens=True) as running:
        full = RemoteEmbedder(running.url)
        short = RemoteEmbedder(running.url, dimensions=128)
        assert (full.dimension, short.dimension) == (384, 128)
        assert full.info.fingerprint != short.info.fingerprint
        assert short.embed(TEXTS[:2]).shape == (2, 128)
        cache = OutputCache(tmp_path / "cache")
        assert not embed_texts(full, TEXTS, cache=cache)[1]
        short_vectors, hit = embed_texts(short, TEXTS, cache=cache)  # another cache entry, not the 384-d one
        assert not hit and short_vectors.shape == (5, 128)
    with start_embedding_server() as ignoring:  # a model that cannot shorten its vectors
        with pytest.raises(ModelError, match="answered 384-dimensional vectors when asked for 128"):
            RemoteEmbedder(ignoring.url, dimensions=128)


def test_served_identity_keys_the_cache(tmp_path, local):
    cache = OutputCache(tmp_path / "cache")
    with start_embedding_server() as running:
        remote = RemoteEmbedder(running.url)
        vectors, hit = embed_texts(remote, TEXTS, cache=cache)
        assert not hit
        rate = rate_store().of_model(remote.info, "embed")  # measured under the served identity
        assert rate is not None and rate_store().find(remote.info.fingerprint, "embed", kind="remote-embedder") == rate
        again, hit = embed_texts(remote, TEXTS, cache=cache)
        assert hit and np.array_equal(again, vectors)
        # The local model's weights are another identity: no entry shared with the served one.
        assert not cache.contains(embeddings_key(local.info.fingerprint, TEXTS))
    with start_embedding_server(models=["another-model"]) as other:
        assert RemoteEmbedder(other.url).info.fingerprint != remote.info.fingerprint


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("500", r"refused an embeddings request \(5 texts\) \(HTTP 500\): the embeddings server crashed"),
        ("malformed", r"sent a malformed answer to an embeddings request \(5 texts\) \(items without a vector of numbers\)"),
        ("truncated", r"sent an answer to an embeddings request \(5 texts\) that is not complete JSON"),
        ("dimension", r"answered 383-dimensional vectors where model .* gave 384 at connect time"),
    ],
)
def test_bad_answers_are_one_line(fault, expected):
    with start_embedding_server() as running:
        remote = RemoteEmbedder(running.url, retries=0)
        running.inject(fault)
        with pytest.raises(ModelError, match=expected) as err:
            remote.embed(TEXTS)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"embeddings server at {running.url}")


def test_a_rejected_key_and_an_unreachable_server_are_one_line(server):
    with pytest.raises(ModelError) as err:
        RemoteEmbedder(server.url, api_key="sk-wrong-key-123")
    message = str(err.value)
    assert message == (
        f"embeddings server at {server.url} rejected the API key (HTTP 401); check CHUNKLAB_EMBEDDER_API_KEY"
    )
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ModelError) as err:
        RemoteEmbedder(url, retries=0)
    assert str(err.value) == f"embeddings server at {url} is unreachable (connection refused)"


def test_bad_arguments():
    with pytest.raises(ModelError, match="no embeddings server: set CHUNKLAB_EMBEDDER_BASE_URL"):
        RemoteEmbedder()
    with pytest.raises(ModelError, match="must start with http:// or https://"):
        RemoteEmbedder("ftp://host/v1")
    with pytest.raises(ParameterError, match=r"concurrency \(0\) must be a whole number from 1 to 64"):
        RemoteEmbedder("http://127.0.0.1:9/v1", concurrency=0)
    with pytest.raises(ParameterError, match=r"batch \(0\) must be a whole number from 1 to 2048"):
        RemoteEmbedder("http://127.0.0.1:9/v1", batch=0)


def test_the_spec_remote_and_a_url_everywhere_an_embedder_is_named(server, monkeypatch, local):
    assert is_remote_embedder("remote") and is_remote_embedder("HTTP://x/v1") and not is_remote_embedder("minilm")
    assert resolve_embedder_spec(" Remote ") == "remote" and resolve_embedder_spec(server.url + "/") == server.url
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_API_KEY", KEY)
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_BATCH", "2")
    # Before connecting: the name says what is configured, the identity is unknown (never the name asked for).
    assert embedder_name(server.url) == f"the server's model (embeddings server at {server.url})"
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_CONCURRENCY", "5")  # settings no other test connected with
    assert embedder_fingerprint_without_loading(server.url) is None and loaded_embedder(server.url) is None
    by_url = load_embedder(server.url)
    assert isinstance(by_url, RemoteEmbedder) and by_url.batch == 2 and by_url.concurrency == 5
    assert load_embedder(server.url) is by_url  # connected once per process and settings
    assert embedder_name(server.url) == f"{local.info.name} (embeddings server at {server.url})"
    assert embedder_fingerprint_without_loading(server.url) == by_url.info.fingerprint
    assert loaded_embedder(server.url) == by_url.info
    assert lazy_text_embedder(server.url) is by_url
    # CHUNKLAB_EMBEDDER=remote with the URL in CHUNKLAB_EMBEDDER_BASE_URL: the same connection.
    monkeypatch.setenv("CHUNKLAB_EMBEDDER", "remote")
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_BASE_URL", server.url)
    assert load_embedder(None) is by_url is connect_remote_embedder("remote") and loaded_embedder(None) == by_url.info
    # OPENAI_* are the fallbacks, as for the remote scorer.
    monkeypatch.delenv("CHUNKLAB_EMBEDDER_BASE_URL")
    monkeypatch.delenv("CHUNKLAB_EMBEDDER_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert load_embedder("remote") is by_url


def test_failed_requests_are_retried_by_the_clients_policy():
    with start_embedding_server() as running:
        remote = RemoteEmbedder(running.url, retries=2, batch=8)
        running.inject("500")
        running.reset_counts()
        with pytest.raises(ModelError, match=r"\(HTTP 500\)"):
            remote.embed(TEXTS)
        assert running.posts == 3  # the request and its 2 retries, then one line
        running.inject(None)
        assert remote.embed(TEXTS).shape == (5, 384)


def test_a_server_slower_than_the_timeout_is_one_line():
    with start_embedding_server() as running:
        remote = RemoteEmbedder(running.url, retries=0, timeout=0.5)
        remote.embed(TEXTS)  # a quick answer: the measured speed asks for no more than the setting
        running.set_delay(2.0)
        with pytest.raises(ModelError) as err:
            remote.embed(TEXTS[:1])
        running.set_delay(0.0)
    # The connect-time probe measured the server's speed; a fast server keeps the configured timeout.
    assert re.fullmatch(
        re.escape(f"embeddings server at {running.url} did not answer an embeddings request (1 text) within 0.5s ")
        + r"\(measured [\d,]+ characters/s, 8 in flight; CHUNKLAB_EMBEDDER_TIMEOUT\)",
        str(err.value),
    ), str(err.value)


def test_the_timeout_is_sized_from_the_measured_speed_and_the_requests_in_flight():
    with start_embedding_server() as running:
        running.set_delay(0.6)  # a slow server: the connect-time probe (within the 1 s setting) measures it
        remote = RemoteEmbedder(running.url, retries=0, timeout=1.0, concurrency=4, batch=2)
        running.set_delay(1.2)  # now each answer takes longer than the setting: the measured speed must allow it
        vectors = remote.embed(TEXTS)  # three requests of up to 2 texts, 4 in flight: each waits its sized time
        running.set_delay(0.0)
    assert vectors.shape == (len(TEXTS), 384)
    seconds, note = remote._sized_timeout(100)
    assert seconds >= 2 and note.startswith("measured ") and "4 in flight" in note
