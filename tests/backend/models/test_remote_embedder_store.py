"""A Chroma collection of another dimension than the embedder's is one clear line, on the CLI (exit 1) too."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from backend.chunkers import make_chunker
from backend.chunkers.base import run_chunker
from backend.chunkers.context import ModelContext
from backend.cli.main import main
from backend.errors import StoreError
from backend.models.embedder import load_embedder
from backend.retrieval.store import chunking_level, open_store
from backend.samples import load_sample
from tests.support.embedding_server import start_embedding_server


@pytest.fixture
def remote_env(monkeypatch, tmp_path):
    with start_embedding_server(models=["minilm-served"], shortens=True) as server:
        monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
        monkeypatch.delenv("CHROMA_HOST", raising=False)
        monkeypatch.setenv("CHUNKLAB_EMBEDDER_BASE_URL", server.url)
        monkeypatch.setenv("CHUNKLAB_EMBEDDER_DIMENSIONS", "128")
        for name in ("CHUNKLAB_EMBEDDER_MODEL", "CHUNKLAB_EMBEDDER_API_KEY", "CHUNKLAB_EMBEDDER", "OPENAI_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        yield server


def test_a_collection_of_another_dimension_is_one_line(remote_env, capsys):
    remote = load_embedder("remote")
    assert remote.dimension == 128
    doc = load_sample("narrative")
    chunking = run_chunker(doc, make_chunker("fixed_token", {}, "cl100k").config, ModelContext())
    level = chunking_level(doc, chunking, remote.info)
    store = open_store()
    # The same collection, partly written with 384-dimensional vectors (another embedder, another release…).
    partial = dataclasses.replace(level, ids=level.ids[:2], rows=level.rows[:2], texts=level.texts[:2],
                                  metadata={**level.metadata, "embedder": "all-MiniLM-L6-v2"})
    store.write_level(partial, load_embedder("minilm", "cpu"))

    expected = (
        f"collection {level.name} holds 384-dimensional vectors (built with all-MiniLM-L6-v2); "
        "{who} gives 128: use the embedder it was built with, or delete the collection to rebuild it with this one"
    )
    assert main(["index", "sample:narrative", "--chunker", "fixed_token", "--embedder", "remote"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: " + expected.format(who="embedder minilm-served")

    with pytest.raises(StoreError) as raised:
        store.query_level(level.name, np.ones((1, 128), dtype=np.float32) / np.sqrt(128), 3)
    assert str(raised.value) == expected.format(who="the query embedder")
