"""A Chroma server stopped in the middle of indexing, then started again on the same data.

The store writes a chunking in batches; here the batches are made small and the real ``chroma
run`` server is stopped right after the first one is written. The indexing command must stop
with one line (exit 1), and re-running it once the server is back must leave the collection
exactly as an uninterrupted run does: the same ids, no duplicate, none missing.
"""

from __future__ import annotations

import json

import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig
from backend.retrieval import store as store_module
from backend.retrieval.store import ChunkStore, chunk_id, chunking_level, collection_name
from backend.text.document import Document
from tests.support.chroma_server import free_port, start_chroma, stop

TEXT = "\n\n".join(
    f"Paragraph {i} is about the lighthouse keeper. He climbed {i + 3} flights of stairs each night "
    f"and trimmed the wick before the ships came in from the north."
    for i in range(12)
)
CONFIG = ChunkerConfig.make("recursive", {"chunk_size": 20})
BATCH = 4


@pytest.fixture()
def server(tmp_path):
    """A restartable ``chroma run``: ``server.start()``/``server.stop()`` on one port and data path."""

    class Server:
        port = free_port()
        path = tmp_path / "db"
        log = tmp_path / "chroma.log"
        proc = None

        def start(self) -> None:
            self.proc = start_chroma(self.path, self.port, self.log)

        def stop(self) -> None:
            if self.proc is not None:
                stop(self.proc)
                self.proc = None

    s = Server()
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def embedder():
    from backend.models.embedder import load_embedder

    return load_embedder(device="cpu")


def _stop_after_first_batch(monkeypatch, server) -> list[str]:
    """Small batches, and the server stopped once the first batch is written; returns the writes seen."""
    monkeypatch.setattr(store_module, "_MAX_UPSERT", BATCH)
    writes: list[str] = []
    original = ChunkStore._call

    def call(self, what, fn, *args, **kwargs):
        out = original(self, what, fn, *args, **kwargs)
        if what.startswith("writing to"):
            writes.append(what)
            if len(writes) == 1:
                server.stop()
        return out

    monkeypatch.setattr(ChunkStore, "_call", call)
    return writes


def _rows(store: ChunkStore, name: str) -> tuple[int, list[str]]:
    col = store._client.get_collection(name, embedding_function=None)
    return col.count(), sorted(col.get(include=[])["ids"])


def test_index_stopped_by_a_server_restart_says_one_line_and_a_rerun_completes_it_exactly(
    server, embedder, tmp_path, monkeypatch, capsys
):
    from backend.cli.main import main

    doc_path = tmp_path / "keeper.txt"
    doc_path.write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CHROMA_PORT", str(server.port))
    monkeypatch.setenv("CHROMA_TIMEOUT", "5")
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path / "data"))
    argv = ["index", str(doc_path), "--chunker", "recursive", "--param", "chunk_size=20"]

    with monkeypatch.context() as m:
        _stop_after_first_batch(m, server)
        assert main(argv) == 1
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"error: Chroma server at 127.0.0.1:{server.port} is unreachable while writing to collection")

    doc = Document.from_text(TEXT, source="keeper.txt")
    chunking = run_chunker(doc, CONFIG)
    assert len(chunking) > 2 * BATCH  # the stop fell in the middle
    server.start()  # the same data path: the first batch is there
    store = ChunkStore(host="127.0.0.1", port=server.port, timeout_s=5)
    name = collection_name(doc.id, chunking, embedder.info.fingerprint)
    assert _rows(store, name)[0] == BATCH

    assert main(argv) == 0  # the process's store (and its client) across the restart
    info = json.loads(capsys.readouterr().out)
    assert (info["name"], info["reused"], info["chunks"]) == (name, False, len(chunking))
    uninterrupted = ChunkStore(path=tmp_path / "embedded")
    uninterrupted.write_level(chunking_level(doc, chunking, embedder.info), embedder)
    count, ids = _rows(store, name)
    assert (count, ids) == _rows(uninterrupted, name)
    assert count == len(set(ids)) == len(chunking)
    assert ids == sorted(chunk_id(doc.id, chunking.config, c.start, c.end) for c in chunking.chunks)

    assert main(argv) == 0  # complete now: nothing written again
    assert json.loads(capsys.readouterr().out)["reused"] is True
