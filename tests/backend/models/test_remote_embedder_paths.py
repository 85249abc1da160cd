"""Remote embeddings where an embedder is used: semantic chunking, DS and ``eval`` equal the local path.

The scripted server (tests/support/embedding_server.py) answers with the bundled MiniLM's own
vectors, so every result computed through it must be the local embedder's result: the same
chunk boundaries, the same DS, the same retrieval scores. Each run gets a fresh output cache,
so the remote path really goes over HTTP (the served identity is another cache key anyway).

Chunking and DS run on the narrative sample's first 900 tokens (``sample_prefix``: 49 sentences; 4 semantic
and 5 semantic_max chunks), in requests of 16 texts, so that its texts still go out in several requests
answered in a shuffled order, as the whole sample's 235 did in requests of 64. ``eval`` keeps the whole
sample: with its 5 chunks retrieved per question, a corpus of a few chunks would retrieve them all whatever
the vectors.
"""

from __future__ import annotations

import numpy as np
import pytest

from backend.chunkers import make_chunker
from backend.chunkers.base import run_chunker
from backend.chunkers.context import ModelContext
from backend.metrics.scores import quality_report
from backend.models.cache import OutputCache
from backend.models.embedder import load_embedder
from backend.models.remote_embedder import RemoteEmbedder
from backend.retrieval.evaluate import evaluate
from backend.retrieval.questions import load_sample_question_set
from backend.retrieval.store import ChunkStore
from tests.backend.chunkers.test_semantic_chunkers import sample_prefix
from tests.support.embedding_server import start_embedding_server

BATCH = 16  # texts per request to the server: several requests for the sample's prefix


@pytest.fixture(scope="module")
def server():
    with start_embedding_server() as running:
        yield running


@pytest.fixture(scope="module")
def doc():
    return sample_prefix("narrative")


@pytest.fixture()
def small_batches(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_BATCH", str(BATCH))


def _spans(chunking):
    return [(c.start, c.end) for c in chunking.chunks]


@pytest.mark.parametrize("chunker", ["semantic", "semantic_max"])
def test_semantic_chunking_equals_the_local_path(server, doc, tmp_path, small_batches, chunker):
    config = make_chunker(chunker, {}, "cl100k").config
    local = run_chunker(doc, config, ModelContext(embedder_spec="minilm", device="cpu", _cache=OutputCache(tmp_path / "a")))
    server.reset_counts()
    remote_context = ModelContext(embedder_spec=server.url, _cache=OutputCache(tmp_path / "b"))
    remote = run_chunker(doc, config, remote_context)
    assert isinstance(remote_context.embedder, RemoteEmbedder) and server.texts > 0  # it went over HTTP
    assert remote_context.embedder.batch == BATCH and server.posts >= 3  # in several requests
    assert len(remote.chunks) > 3 and _spans(remote) == _spans(local)


def test_ds_equals_the_local_path(server, doc, tmp_path, small_batches):
    chunking = run_chunker(doc, make_chunker("sentence", {}, "cl100k").config, ModelContext())
    texts, counts = [c.text for c in chunking.chunks], chunking.token_counts
    local = quality_report(texts, counts, metrics=["ds"], embedder=load_embedder("minilm", "cpu"),
                           cache=OutputCache(tmp_path / "a"))
    remote = quality_report(texts, counts, metrics=["ds"], embedder=load_embedder(server.url),
                            cache=OutputCache(tmp_path / "b"))
    assert local.values["ds"] == pytest.approx(remote.values["ds"], abs=1e-6) and local.values["ds"] > 0


def test_eval_equals_the_local_path(server, tmp_path, monkeypatch):
    questions = load_sample_question_set("narrative")
    configs = [make_chunker("semantic", {}, "cl100k").config, make_chunker("fixed_token", {}, "cl100k").config]
    store = ChunkStore(path=tmp_path / "chroma")
    local = evaluate(questions, configs, embedder="minilm", store=store, cache=OutputCache(tmp_path / "a"),
                     context=ModelContext(embedder_spec="minilm", device="cpu"))
    # CHUNKLAB_EMBEDDER=remote: the semantic chunker and the retrieval both embed on the server.
    monkeypatch.setenv("CHUNKLAB_EMBEDDER", "remote")
    monkeypatch.setenv("CHUNKLAB_EMBEDDER_BASE_URL", server.url)
    for name in ("CHUNKLAB_EMBEDDER_MODEL", "CHUNKLAB_EMBEDDER_DIMENSIONS", "CHUNKLAB_EMBEDDER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    server.reset_counts()
    remote = evaluate(questions, configs, embedder=None, store=store, cache=OutputCache(tmp_path / "b"),
                      context=ModelContext())
    assert server.texts > len(questions)  # the questions, the semantic chunker's units and the chunks
    assert remote.embedder_fingerprint.startswith("served:") and remote.embedder_fingerprint != local.embedder_fingerprint
    for a, b in zip(local.results, remote.results):
        assert b.chunks == a.chunks and b.texts_embedded == a.texts_embedded
        for field in ("recall_mean", "precision_mean", "precision_omega_mean", "iou_mean"):
            assert getattr(b.summary, field) == pytest.approx(getattr(a.summary, field), abs=1e-9), field
    # Another collection per embedder identity in the same store (different fingerprints, no mix-up).
    names = {c["name"] for c in store.collections()}
    assert len(names) == 4
    assert np.isfinite(remote.results[0].summary.recall_mean)
