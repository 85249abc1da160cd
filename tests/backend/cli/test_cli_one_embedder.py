"""``--embedder`` is the command's one embedder, and a failed command leaves no new Chroma store behind.

Real servers from tests/support (the bundled MiniLM pooled on ``[CLS]``: vectors no local
model gives, so a chunking made with them shows which embedder the chunker used), real
embedded Chroma in a fresh data directory, ``main`` in-process.
"""

from __future__ import annotations

import json

import pytest

from backend.chunkers import make_chunker
from backend.chunkers.base import run_chunker
from backend.chunkers.context import ModelContext
from backend.cli.main import main
from backend.models.cache import OutputCache
from backend.models.embedder import load_embedder
from backend.retrieval.store import chunking_level, open_store
from backend.samples import load_sample
from tests.support.embedding_server import start_embedding_server

QUESTIONS = ["--questions", "sample:narrative"]


@pytest.fixture(autouse=True)
def _data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    for name in ("CHROMA_HOST", "CHUNKLAB_EMBEDDER", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("BASE_URL", "MODEL", "API_KEY", "DIMENSIONS"):
        monkeypatch.delenv(f"CHUNKLAB_EMBEDDER_{name}", raising=False)


@pytest.fixture(scope="module")
def cls():
    with start_embedding_server(pooling="cls") as running:
        yield running


def _spans(chunking):
    return [[c.start, c.end] for c in chunking.chunks]


def test_the_semantic_chunker_embeds_with_the_flags_embedder(cls, tmp_path, capsys):
    cls.reset_counts()
    assert main(["index", "sample:narrative", "--chunker", "semantic", "--embedder", cls.url]) == 0
    out = json.loads(capsys.readouterr().out)
    assert cls.texts > 1 + out["chunks"]  # the probe, the chunks, and the chunker's own windows
    config = make_chunker("semantic", {}, "cl100k").config
    doc = load_sample("narrative")
    embedder = load_embedder(cls.url)
    remote = run_chunker(doc, config, ModelContext(embedder=embedder, _cache=OutputCache(tmp_path / "a")))
    local = run_chunker(doc, config, ModelContext(embedder_spec="minilm", device="cpu", _cache=OutputCache(tmp_path / "b")))
    assert _spans(remote) != _spans(local)  # the two embedders cut differently: the test can tell them apart
    # The collection's name holds the digest of the chunk spans: those the remote embedder cut.
    assert out["embedder"] == cls.model and out["name"] == chunking_level(doc, remote, embedder.info).name


def test_a_failed_eval_leaves_no_new_store(tmp_path, capsys):
    with start_embedding_server(prefix="") as infinity:
        code = main(["eval", *QUESTIONS, "--chunker", "fixed_token", "--embedder", infinity.url + "/v1"])
    assert code == 1
    assert f"{infinity.url}/v1/models answered HTTP 404" in capsys.readouterr().err
    assert not (tmp_path / "data" / "chroma").exists()


def test_a_failed_command_never_removes_a_store_that_was_there(tmp_path, capsys):
    assert main(["index", "sample:narrative", "--chunker", "fixed_token"]) == 0
    before = open_store().collections()
    assert main(["eval", *QUESTIONS, "--chunker", "fixed_token", "--embedder", "http://127.0.0.1:9/v1"]) == 1
    assert "unreachable" in capsys.readouterr().err
    assert (tmp_path / "data" / "chroma" / "chroma.sqlite3").exists() and open_store().collections() == before
