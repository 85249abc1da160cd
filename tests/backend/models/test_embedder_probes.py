"""A remote embedder is known by what it computes: another model under the same name is another cache identity.

Two real servers (tests/support/embedding_server.py) list the same name: one pools the bundled
MiniLM by the mean (the model itself), the other the same weights on ``[CLS]`` (another model,
as a re-pooled copy served by infinity under the old name would be).
"""

from __future__ import annotations

import numpy as np
import pytest

from backend.models.embedder import embedder_note
from backend.models.probes import PROBES_FILE, match_probe
from backend.models.remote_embedder import RemoteEmbedder, connect_remote_embedder
from tests.support.embedding_server import start_embedding_server

NAME = "all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def _data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    for name in ("BASE_URL", "MODEL", "API_KEY", "DIMENSIONS"):
        monkeypatch.delenv(f"CHUNKLAB_EMBEDDER_{name}", raising=False)
    monkeypatch.delenv("CHUNKLAB_EMBEDDER", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def mean():
    with start_embedding_server(models=[NAME]) as running:
        yield running


@pytest.fixture(scope="module")
def cls():
    with start_embedding_server(models=[NAME], pooling="cls") as running:
        yield running


def test_a_vector_matches_within_float_noise_and_another_is_remembered_beside_it(tmp_path):
    path = tmp_path / "probes.json"
    first = match_probe("id", np.array([0.6, 0.8]), path)
    assert (first.index, first.seen, first.cosine, first.new_model) == (0, 1, None, False)
    noisy = match_probe("id", np.array([0.600003, 0.799998]), path)  # the same model on another device
    assert (noisy.digest, noisy.index, noisy.seen) == (first.digest, 0, 1)
    other = match_probe("id", np.array([0.8, 0.6]), path)
    assert (other.index, other.seen, other.new_model) == (1, 2, True) and other.digest != first.digest
    assert other.cosine == pytest.approx(0.96)
    assert match_probe("id", np.array([0.8, 0.6]), path).digest == other.digest
    assert match_probe("another id", np.array([0.8, 0.6]), path).index == 0  # identities are apart


def test_another_model_under_the_same_name_is_another_identity_and_says_so(mean, cls, tmp_path):
    first = RemoteEmbedder(mean.url)
    assert first.note is None and (tmp_path / PROBES_FILE).exists()
    with start_embedding_server(models=[NAME]) as same:  # the same model behind another URL
        assert RemoteEmbedder(same.url).info.fingerprint == first.info.fingerprint

    other = RemoteEmbedder(cls.url)
    assert other.model == first.model == NAME and other.dimension == first.dimension == 384
    assert other.info.fingerprint != first.info.fingerprint
    assert other.probe.new_model and 0 < other.probe.cosine < 0.9999
    assert other.note == (
        f"embeddings server at {cls.url} serves '{NAME}', but its vectors are not those of the '{NAME}' seen "
        f"here before (probe cosine {other.probe.cosine:.4f}): another model under the same name, whose vectors "
        "and chunks are cached apart"
    )
    assert RemoteEmbedder(cls.url).info.fingerprint == other.info.fingerprint  # remembered: the same next time

    again = RemoteEmbedder(mean.url)
    assert again.info.fingerprint == first.info.fingerprint
    assert again.note == (
        f"embeddings server at {mean.url} serves '{NAME}' as model 1 of 2 seen here under that name "
        "(told apart by their vectors): its own cached vectors and chunks are used"
    )


def test_the_note_is_shown_where_the_embedder_is_named(mean, cls):
    RemoteEmbedder(mean.url)
    connected = connect_remote_embedder(cls.url)
    assert embedder_note(cls.url) == connected.note is not None
    assert embedder_note("minilm") is None and embedder_note("http://127.0.0.1:9/v1") is None  # never connects
