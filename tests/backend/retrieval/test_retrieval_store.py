"""The Chroma store against real Chroma: embedded in a temporary folder, and a ``chroma run`` server.

The server is started by the ``chroma_server`` fixture (module scope) on a free port of
127.0.0.1 and killed at the end. Embeddings come from the bundled MiniLM.
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError, StoreError
from backend.retrieval.retriever.chunks import ChunkRetriever
from backend.retrieval.store import (
    ChunkStore,
    chunk_id,
    chunking_level,
    collection_name,
    entries_level,
    open_store,
    store_location,
)
from backend.text.document import Document
from tests.support.chroma_server import free_port, start_chroma, stop

TEXT = (
    "Chroma stores embeddings of chunks. A collection holds one chunking of one document.\n\n"
    "The clockmaker opened his shop at dawn. Rain tapped against the narrow window. He wound each clock by hand.\n\n"
    "Photosynthesis turns light into chemical energy. Leaves hold chlorophyll, which absorbs red and blue light.\n\n"
    "The treaty was signed in 1648 and ended thirty years of war in central Europe."
)
CONFIGS = [
    ChunkerConfig.make("recursive", {"chunk_size": 30}),
    ChunkerConfig.make("sentence", {"chunk_size": 20}),
]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    proc = start_chroma(folder / "db", port, folder / "chroma.log")
    yield port
    stop(proc)


@pytest.fixture(scope="module")
def embedder():
    from backend.models.embedder import load_embedder

    return load_embedder(device="cpu")


@pytest.fixture(scope="module")
def doc():
    return Document.from_text(TEXT, source="store-test.txt")


@pytest.fixture(scope="module")
def chunkings(doc):
    return [run_chunker(doc, c) for c in CONFIGS]


@pytest.fixture(scope="module", params=["embedded", "server"])
def store(request, tmp_path_factory):
    if request.param == "embedded":
        return ChunkStore(path=tmp_path_factory.mktemp("chroma-embedded"))
    return ChunkStore(host="127.0.0.1", port=request.getfixturevalue("chroma_server"), timeout_s=10)


@pytest.fixture(autouse=True)
def no_default_embedding_function(monkeypatch):
    """Fail loudly if Chroma's own embedding function (it downloads an ONNX model) is ever called."""
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    def refuse(self, input):  # noqa: A002  (chromadb checks this exact signature)
        raise AssertionError("Chroma's default embedding function was called")

    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", refuse)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", refuse)


def _raw_collection(store: ChunkStore, name: str):
    return store._client.get_collection(name, embedding_function=None)


def _index(store: ChunkStore, doc, chunking, embedder):
    """A chunking written through the store's one indexing path: its one level."""
    return store.write_level(chunking_level(doc, chunking, embedder.info), embedder)


def _query(store: ChunkStore, doc, chunking, embedder, vectors, k):
    """The nearest chunks of an indexed chunking, as the chunk adapter reads them."""
    return store.query_level(collection_name(doc.id, chunking, embedder.info.fingerprint), vectors, k)


def test_index_writes_spans_ids_and_metadata_then_reuses(store, doc, chunkings, embedder):
    chunking = chunkings[0]
    first = _index(store, doc, chunking, embedder)
    assert (first.chunks, first.reused) == (len(chunking), False)
    assert first.name == collection_name(doc.id, chunking, embedder.info.fingerprint)
    again = _index(store, doc, chunking, embedder)
    assert (again.chunks, again.reused, again.name) == (len(chunking), True, first.name)

    col = _raw_collection(store, first.name)
    meta = col.metadata
    assert meta["doc_id"] == doc.id and meta["doc_source"] == "store-test.txt"
    assert meta["embedder_fingerprint"] == embedder.info.fingerprint and meta["chunks"] == len(chunking)
    assert '"chunk_size":30' in meta["config"]
    assert col.configuration_json["hnsw"]["space"] == "cosine"
    rows = col.get(include=["metadatas", "documents", "embeddings"])
    by_id = dict(zip(rows["ids"], zip(rows["metadatas"], rows["documents"], rows["embeddings"])))
    vectors = embedder.embed([c.text for c in chunking.chunks])
    for c, v in zip(chunking.chunks, vectors):
        m, text, e = by_id[chunk_id(doc.id, chunking.config, c.start, c.end)]
        assert m == {"start": c.start, "end": c.end, "index": c.index, "tokens": c.tokens}
        assert text == doc.text[c.start : c.end]
        np.testing.assert_allclose(e, v, atol=1e-5)  # our vectors, not Chroma's


def test_reindexing_an_incomplete_collection_never_duplicates(store, doc, chunkings, embedder):
    chunking = chunkings[1]
    info = _index(store, doc, chunking, embedder)
    col = _raw_collection(store, info.name)
    victims = [chunk_id(doc.id, chunking.config, c.start, c.end) for c in chunking.chunks[:2]]
    col.delete(ids=victims)  # as after an interrupted run
    assert col.count() == len(chunking) - 2
    redo = _index(store, doc, chunking, embedder)
    assert (redo.reused, redo.chunks, col.count()) == (False, len(chunking), len(chunking))
    assert store.is_indexed(chunking_level(doc, chunking, embedder.info))


def test_query_returns_ranked_spans(store, doc, chunkings, embedder):
    chunking = chunkings[0]
    _index(store, doc, chunking, embedder)
    target = chunking.chunks[2]
    vec = embedder.embed([target.text])
    [hits] = _query(store, doc, chunking, embedder, vec, 3)
    assert [h.rank for h in hits] == [1, 2, 3]
    assert (hits[0].ranges, hits[0].index, hits[0].tokens) == (((target.start, target.end),), target.index, target.tokens)
    assert hits[0].distance == pytest.approx(0.0, abs=1e-4)
    assert hits[0].distance <= hits[1].distance <= hits[2].distance
    many = _query(store, doc, chunking, embedder, vec, 1000)[0]
    assert len(many) == len(chunking)  # k larger than the collection: every chunk once
    with pytest.raises(ParameterError, match="k"):
        _query(store, doc, chunking, embedder, vec, 0)


def test_a_chunking_as_a_one_level_retriever_answers_from_its_collection(store, doc, chunkings, embedder):
    for chunking in chunkings:
        retriever = ChunkRetriever(chunking.config, chunkings=[chunking])
        answer = retriever.answer(doc, store, embedder, "Which pigment in leaves absorbs light?", 2)
        hits = answer.hits
        assert len(hits) == 2 and answer.units is chunking
        spans = {(c.start, c.end) for c in chunking.chunks}
        assert all((h.start, h.end) in spans for h in hits)
        top = doc.text[hits[0].start : hits[0].end]
        assert "chlorophyll" in top or "Photosynthesis" in top
        # The collection is the chunking's, under the name it always had.
        assert retriever.index(doc, store, embedder).info.name == collection_name(doc.id, chunking, embedder.info.fingerprint)
    with pytest.raises(ParameterError, match="empty"):
        ChunkRetriever(chunkings[0].config).answer(doc, store, embedder, "   ", 2)


def test_query_of_an_unindexed_chunking_is_a_store_error(store, doc, embedder):
    chunking = run_chunker(doc, ChunkerConfig.make("recursive", {"chunk_size": 7}))
    with pytest.raises(StoreError, match="not indexed"):
        _query(store, doc, chunking, embedder, np.zeros((1, 384), dtype=np.float32), 1)


def test_collections_lists_and_delete_removes(store, doc, chunkings, embedder):
    info = _index(store, doc, chunkings[0], embedder)
    listed = {c["name"]: c for c in store.collections()}
    assert listed[info.name]["count"] == len(chunkings[0])
    assert listed[info.name]["doc_id"] == doc.id
    assert store.delete(info.name) is True
    assert store.delete(info.name) is False
    assert not store.is_indexed(chunking_level(doc, chunkings[0], embedder.info))


def test_collection_names_follow_chroma_rules_and_keys(doc, chunkings):
    import re

    names = {collection_name(doc.id, c, "fp") for c in chunkings}
    names.add(collection_name(doc.id, chunkings[0], "other-fp"))
    assert len(names) == 3
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,510}[a-z0-9]", n) for n in names)
    assert collection_name(doc.id, chunkings[0], "fp") == collection_name(doc.id, chunkings[0], "fp")


# --- locations and failures ------------------------------------------------------------------


def test_store_location_from_arguments_and_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CHROMA_HOST", raising=False)
    monkeypatch.delenv("CHROMA_PORT", raising=False)
    monkeypatch.setenv("CHUNKLAB_DATA_DIR", str(tmp_path))
    assert store_location() == ("embedded", str(tmp_path / "chroma"))
    monkeypatch.setenv("CHROMA_HOST", "chroma.internal")
    assert store_location() == ("server", "chroma.internal:8000")
    monkeypatch.setenv("CHROMA_PORT", "9001")
    assert store_location() == ("server", "chroma.internal:9001")
    assert store_location(host="http://10.0.0.5:7000") == ("server", "10.0.0.5:7000")
    assert store_location(path=tmp_path / "x") == ("embedded", str(tmp_path / "x"))  # a path wins
    monkeypatch.setenv("CHROMA_PORT", "eighty")
    with pytest.raises(ParameterError, match="CHROMA_PORT"):
        store_location()


def test_open_store_uses_chroma_host_and_port(monkeypatch, chroma_server, doc, chunkings, embedder):
    monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CHROMA_PORT", str(chroma_server))
    store = open_store()
    assert (store.kind, store.location) == ("server", f"127.0.0.1:{chroma_server}")
    assert open_store() is store  # one client per location
    assert _index(store, doc, chunkings[0], embedder).chunks == len(chunkings[0])


def test_a_chunking_level_keeps_the_names_ids_and_metadata_stores_already_hold(doc, chunkings, embedder):
    chunking = chunkings[0]
    level = chunking_level(doc, chunking, embedder.info)
    assert level.name == collection_name(doc.id, chunking, embedder.info.fingerprint)
    assert level.ids == tuple(chunk_id(doc.id, chunking.config, c.start, c.end) for c in chunking.chunks)
    assert level.rows[0] == {"start": chunking.chunks[0].start, "end": chunking.chunks[0].end, "index": 0,
                             "tokens": chunking.chunks[0].tokens}
    assert level.texts == tuple(c.text for c in chunking.chunks)
    assert {k: level.metadata[k] for k in ("chunklab_schema", "doc_id", "config_label", "chunks")} == {
        "chunklab_schema": 1, "doc_id": doc.id, "config_label": chunking.config.label, "chunks": len(chunking)}
    other = run_chunker(Document.from_text(TEXT + " More.", source="x.txt"), CONFIGS[0])
    with pytest.raises(ParameterError, match="not of store-test.txt"):
        chunking_level(doc, other, embedder.info)


def test_a_level_of_entries_is_written_read_and_reused_through_the_same_path(store, doc, embedder):
    ranges = [((0, 10),), ((20, 30), (40, 50))]
    level = entries_level(doc, {"retriever": "mogg", "level": 2}, ranges, [3, 6], embedder.info)
    assert level.ids == (f"{level.name}-0", f"{level.name}-1") and level.label == "mogg level 2"
    first = store.write_level(level, embedder)
    assert (first.chunks, first.reused) == (2, False)
    assert store.write_level(level, embedder).reused is True
    [hits] = store.query_level(level.name, embedder.embed([doc.text[20:30]]), 2)
    assert {h.ranges for h in hits} == {((0, 10),), ((20, 30), (40, 50))}
    with pytest.raises(ParameterError, match="out-of-text"):
        entries_level(doc, {"retriever": "mog", "level": 1}, [((0, 10_000),)], [1], embedder.info)


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text
    return text


def test_server_down_is_one_line_naming_host_and_port():
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(StoreError) as info:
        ChunkStore(host="127.0.0.1", port=port, timeout_s=5)
    assert time.monotonic() - t0 < 5
    msg = _one_line(info.value)
    assert f"127.0.0.1:{port}" in msg and "unreachable" in msg


class _NotChroma(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_wrong_port_is_one_line():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotChroma)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with pytest.raises(StoreError) as info:
            ChunkStore(host="127.0.0.1", port=port, timeout_s=5)
        msg = _one_line(info.value)
        assert f"127.0.0.1:{port}" in msg and "not a Chroma server" in msg and "404" in msg
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_never_answers_times_out():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections, never replies
    try:
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(StoreError) as info:
            ChunkStore(host="127.0.0.1", port=port, timeout_s=0.5)
        assert time.monotonic() - t0 < 5
        msg = _one_line(info.value)
        assert f"127.0.0.1:{port}" in msg and "within 0.5s" in msg
    finally:
        listener.close()


def test_a_server_going_down_mid_session_is_a_store_error(tmp_path, doc, chunkings, embedder):
    port = free_port()
    proc = start_chroma(tmp_path / "db", port, tmp_path / "chroma.log")
    try:
        store = ChunkStore(host="127.0.0.1", port=port, timeout_s=5)
        _index(store, doc, chunkings[0], embedder)
    finally:
        stop(proc)
    with pytest.raises(StoreError) as info:
        ChunkRetriever(chunkings[0].config, chunkings=chunkings[:1]).answer(doc, store, embedder, "clockmaker", 1)
    msg = _one_line(info.value)
    assert f"127.0.0.1:{port}" in msg
    with pytest.raises(StoreError):
        store.heartbeat()


def test_an_unwritable_embedded_path_is_a_store_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError) as info:
        ChunkStore(path=blocker / "chroma")
    assert "cannot open the Chroma store" in _one_line(info.value)
