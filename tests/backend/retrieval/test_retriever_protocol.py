"""The retriever protocol and registry: a chunking as a one-level retriever, the multi-granularity ones, one store path.

Real embedded Chroma and the bundled MiniLM. The adapter must give exactly the hits of a brute-force
cosine search over the chunks and exactly the benchmark's chunk scoring (reference chunk spans,
``retrieve=-1``, cross-corpus merging by distance), since evaluation, the live query and the CLI
all go through it now.
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from backend.chunkers import make_chunker, run_chunker
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.retrieval.metrics import containing_chunks, reference_chunk_spans
from backend.retrieval.questions import load_question_set
from backend.retrieval.retriever.base import CHUNK_TERMS, UNIT_TERMS, Asking, RetrieverInfo
from backend.retrieval.retriever.chunks import ChunkAnswer, ChunkIndex, ChunkRetriever
from backend.retrieval.retriever.levels import LevelAnswer, LevelRetriever
from backend.retrieval.retriever.registry import RETRIEVERS, describe, make_retriever, register_retriever
from backend.retrieval.store import collection_name, entries_collection_name
from backend.text.document import Document
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "retrieval"
QUERY = "How was the granite brought to the headland?"
RECURSIVE = ChunkerConfig.make("recursive", {"chunk_size": 40})


@pytest.fixture(scope="module")
def questions():
    return load_question_set(DATA / "questions.csv", DATA / "corpora")


@pytest.fixture(scope="module")
def doc():
    text = (DATA / "corpora" / "lighthouses.md").read_text(encoding="utf-8")[:2500]
    return Document.from_text(text, source="lights-short.md")


def test_the_registry_gives_chunkings_the_adapter_and_retrievers_their_own() -> None:
    assert isinstance(make_retriever(RECURSIVE), ChunkRetriever)
    assert describe(RECURSIVE) == RetrieverInfo(RECURSIVE, ("chunks",), "", CHUNK_TERMS)
    mog = make_chunker("mog", {"levels": 3, "router": "level:2"}).config
    assert isinstance(make_retriever(mog), LevelRetriever)
    assert describe(mog) == RetrieverInfo(mog, ("L1 (~50 tok)", "L2 (~100 tok)", "L3 (~200 tok)"), "level:2", UNIT_TERMS)
    free = make_chunker("freechunker", {}).config
    assert describe(free).levels == ("unit", "2 units", "4 units") and describe(free).router == ""
    assert sorted(RETRIEVERS) == ["freechunker", "mog", "mogg"]
    with pytest.raises(ParameterError, match="level"):
        make_retriever(ChunkerConfig.make("mog", {"levels": 2, "router": "level:3"}))


def test_a_retriever_can_be_registered_for_a_name(monkeypatch) -> None:
    made = []

    def factory(config, *, context=None, chunkings=()):
        made.append(config)
        return ChunkRetriever(config, context=context, chunkings=chunkings)

    monkeypatch.setitem(RETRIEVERS, "sentence", factory)
    config = ChunkerConfig.make("sentence", {})
    assert isinstance(make_retriever(config), ChunkRetriever) and made == [config]
    register_retriever("paragraph", factory)
    try:
        make_retriever(ChunkerConfig.make("paragraph", {}))
        assert [c.name for c in made] == ["sentence", "paragraph"]
    finally:
        del RETRIEVERS["paragraph"]


def test_a_chunking_as_a_one_level_retriever_answers_like_a_brute_force_search(doc, store, embedder) -> None:
    chunking = run_chunker(doc, RECURSIVE)
    retriever = make_retriever(RECURSIVE, chunkings=[chunking])
    answer = retriever.answer(doc, store, embedder, QUERY, 3)
    assert isinstance(answer, ChunkAnswer) and answer.units is chunking and answer.panel is None
    sims = embedder.embed([c.text for c in chunking.chunks]) @ embedder.embed([QUERY])[0]
    top = np.argsort(-sims)[:3]
    assert [(h.rank, h.start, h.end, h.index) for h in answer.hits] == [
        (r, chunking.chunks[i].start, chunking.chunks[i].end, int(i)) for r, i in enumerate(top, 1)
    ]
    assert [h.distance for h in answer.hits] == pytest.approx([1 - sims[i] for i in top], abs=1e-4)
    assert answer.retrieved() == tuple((h.rank, ((h.start, h.end),)) for h in answer.hits)
    assert [sorted(row) for row in answer.json_lines(doc.text)][0] == sorted(
        ["rank", "distance", "start", "end", "index", "tokens", "text"])
    assert answer.notes() == [] and answer.terms is CHUNK_TERMS
    table = answer.table()
    assert (table.css, table.heading, table.numbers_heading) == ("rt-hits", "Chunk", "Distance")
    h = answer.hits[0]
    assert table.rows[0].numbers == (f"{h.distance:.3f}", f"{h.tokens:,} tok", f"{h.start:,}–{h.end:,}")


def test_one_store_path_names_every_level_and_reuses_it(doc, store, embedder) -> None:
    chunking = run_chunker(doc, RECURSIVE)
    first = ChunkRetriever(RECURSIVE).index(doc, store, embedder)
    assert isinstance(first, ChunkIndex)
    assert first.info.name == collection_name(doc.id, chunking, embedder.info.fingerprint)  # the name it always had
    again = ChunkRetriever(RECURSIVE).index(doc, store, embedder)
    assert (again.reused, again.texts_embedded, again.entries) == (True, 0, len(chunking))
    assert again.to_json() == {**again.info.to_json()}
    mog = make_chunker("mog", {"chunk_size": 40, "levels": 3, "router": "uniform"})
    built = LevelRetriever(mog.config).index(doc, store, embedder)
    units = [((c.start, c.end),) for c in built.units.chunks]
    key = {**mog.level_spec(), "level": 1, "vectors": "text"}
    assert built.levels[0].collection == entries_collection_name(doc.id, key, embedder.info.fingerprint, units)
    reused = LevelRetriever(mog.config).index(doc, store, embedder)
    assert reused.reused and reused.texts_embedded == 0 and reused.entries == sum(len(lv) for lv in built.levels)
    assert [lv["name_in_store"] for lv in reused.to_json()["levels"]] == [lv.collection for lv in built.levels]


def test_a_level_retrievers_answer_says_what_the_cli_prints(doc, store, embedder) -> None:
    mog = make_chunker("mog", {"chunk_size": 40, "levels": 3, "router": "uniform"}).config
    answer = LevelRetriever(mog).answer(doc, store, embedder, QUERY, 2)
    assert isinstance(answer, LevelAnswer) and answer.panel is answer.live and answer.terms is UNIT_TERMS
    picks = answer.live.selection.picks
    assert answer.retrieved() == tuple((r, p.ranges) for r, p in enumerate(picks, 1))
    assert list(answer.json_lines(doc.text)[0]) == ["rank", "score", "level", "index", "start", "end", "ranges",
                                                     "tokens", "text"]
    assert answer.notes() == [
        "mog: chosen level L1 (~40 tok) (weights: L1 (~40 tok) 1.00, L2 (~80 tok) 1.00, L3 (~160 tok) 1.00)"
    ]
    assert answer.table().css == "rt-hits rt-picks"


def _brute_force(questions, embedder, retrieve: int, chunk_spans: str):
    """Today's chunk scoring, written out: exact nearest chunks per corpus, merged by (distance, corpus order, rank)."""
    qs = questions.questions
    q_vec = embedder.embed([q.question for q in qs])
    chunkings = {cid: run_chunker(questions.document(cid), RECURSIVE) for cid in questions.corpus_ids}
    spans = {cid: [(c.start, c.end) for c in ch.chunks] for cid, ch in chunkings.items()}
    if chunk_spans == "reference":
        spans = {cid: reference_chunk_spans(questions.corpora[cid], sp) for cid, sp in spans.items()}
    meeting = [len(containing_chunks(spans[q.corpus_id], q.spans)) for q in qs]
    depth = min(20, max(meeting)) if retrieve == -1 else retrieve
    wanted = [min(m, depth) for m in meeting] if retrieve == -1 else [retrieve] * len(qs)
    out = []
    for i in range(len(qs)):
        pool = []
        for order, (cid, ch) in enumerate(chunkings.items()):
            dist = 1 - embedder.embed([c.text for c in ch.chunks]) @ q_vec[i]
            for rank, j in enumerate(np.argsort(dist)[:depth], 1):
                pool.append((float(dist[j]), order, rank, cid, int(j)))
        out.append([(cid, j) for *_, cid, j in heapq.nsmallest(wanted[i], pool)])
    return out, spans


@pytest.mark.parametrize("retrieve, chunk_spans", [(3, "reference"), (-1, "reference"), (2, "exact")])
def test_the_adapters_benchmark_run_is_todays_chunk_scoring(questions, store, embedder, retrieve, chunk_spans) -> None:
    q_vec = embedder.embed([q.question for q in questions.questions])
    run = ChunkRetriever(RECURSIVE).run(questions, store, embedder, q_vec, Asking(retrieve, True, chunk_spans))
    want, spans = _brute_force(questions, embedder, retrieve, chunk_spans)
    assert [[(r.corpus_id, r.index) for r in top] for top in run.retrieved] == want
    assert run.scored == tuple(tuple((spans[cid][j],) for cid, j in top) for top in want)
    assert {cid: list(sp) for cid, sp in run.omega_spans.items()} == spans
    assert run.entries == sum(len(sp) for sp in spans.values()) and run.routing is None


def test_own_corpus_only_asks_each_corpus_for_its_questions(questions, store, embedder) -> None:
    q_vec = embedder.embed([q.question for q in questions.questions])
    run = ChunkRetriever(RECURSIVE).run(questions, store, embedder, q_vec, Asking(3, False))
    for q, top in zip(questions.questions, run.retrieved):
        assert {r.corpus_id for r in top} == {q.corpus_id}
