"""The retrieval lab's job bodies, called directly with a progress callback (no page, no thread).

Real embedded Chroma (the test data folder's) and the bundled MiniLM: a job's result is what
the store and :func:`~backend.retrieval.evaluate.evaluate` give when called directly.
"""

from __future__ import annotations

import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig
from backend.progress import Progress
from backend.retrieval.evaluate import evaluate
from backend.retrieval.jobs import benchmark_job, search_job
from backend.retrieval.questions import load_question_set
from backend.retrieval.retriever.chunks import ChunkRetriever
from backend.retrieval.retriever.levels import LevelRetriever
from backend.retrieval.store import open_store
from backend.text.document import Document
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "retrieval"
CONFIGS = [
    ChunkerConfig.make("recursive", {"chunk_size": 40}),
    ChunkerConfig.make("fixed_token", {"chunk_size": 30, "chunk_overlap": 10}),
]
QUERY = "How was the granite brought to the headland?"


def _recorded() -> tuple[Progress, list[tuple[float, str]]]:
    """A progress recording each report's fraction and label."""
    seen: list[tuple[float, str]] = []
    return Progress(lambda f, eta, label: seen.append((f, label))), seen


def _counted_to_the_end(seen: list[tuple[float, str]]) -> bool:
    """Reports came, the last fills the bar, and none is a placeholder ``0 / 1``."""
    return bool(seen) and seen[-1][0] == 1.0 and not any("0 / 1" in label.split(" · ") for _, label in seen)


@pytest.fixture(autouse=True)
def embedded_store(monkeypatch):
    for name in ("CHROMA_HOST", "CHROMA_PORT", "CHUNKLAB_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)


def test_search_job_answers_every_tag_like_the_store() -> None:
    from backend.models.embeddings import load_text_embedder

    doc = Document.from_text((DATA / "corpora" / "lighthouses.md").read_text(encoding="utf-8"), source="lights.md")
    a, b = (run_chunker(doc, c) for c in CONFIGS)
    progress, seen = _recorded()
    result = search_job(doc, {"A": a, "B": b, "C": a}, None, QUERY, 3)(progress)
    assert _counted_to_the_end(seen)
    assert seen[-1][1].startswith("configuration 2 of 2 · ")  # A and C share a configuration: indexed once
    emb = load_text_embedder(None)
    want = {c.config: ChunkRetriever(c.config, chunkings=[c]).answer(doc, open_store(), emb, QUERY, 3).hits for c in (a, b)}
    expected = {"A": want[a.config], "B": want[b.config], "C": want[a.config]}  # C shares A's configuration
    assert result.tags == ("A", "B", "C") and list(result.answers) == ["A", "B", "C"]
    assert (result.doc_id, result.query, result.k) == (doc.id, QUERY, 3)
    for tag, answer in result.answers.items():
        hits = answer.hits
        assert [(h.rank, h.start, h.end, h.index) for h in hits] == [
            (h.rank, h.start, h.end, h.index) for h in expected[tag]
        ]
        assert [h.distance for h in hits] == pytest.approx([h.distance for h in expected[tag]], abs=1e-5)


def test_benchmark_job_is_evaluate_plus_the_chunkings_it_scored() -> None:
    qset = load_question_set(DATA / "questions.csv", DATA / "corpora")
    progress, seen = _recorded()
    run = benchmark_job(qset, CONFIGS, None, 3, True)(None, progress)
    assert _counted_to_the_end(seen)
    assert [f for f, _ in seen] == sorted(f for f, _ in seen)
    want = evaluate(qset, CONFIGS, retrieve=3, store=open_store())
    assert run.benchmark.matrix("iou") == pytest.approx(want.matrix("iou"))
    assert [r.summary for r in run.benchmark.results] == [r.summary for r in want.results]
    assert list(run.chunkings) == ["lighthouses", "sourdough"]
    for cid, chunkings in run.chunkings.items():
        assert [[(c.start, c.end) for c in ch.chunks] for ch in chunkings] == [
            [(c.start, c.end) for c in run_chunker(qset.document(cid), config).chunks] for config in CONFIGS
        ]


def test_search_job_answers_retrievers_through_their_own_retriever() -> None:
    """A retriever's tag gets its live answer (the same as its retriever's), a chunker's its hits, one job."""
    from backend.models.embeddings import load_text_embedder

    text = (DATA / "corpora" / "lighthouses.md").read_text(encoding="utf-8")[:2500]
    doc = Document.from_text(text, source="lights-short.md")
    mog = ChunkerConfig.make("mog", {"chunk_size": 40, "levels": 3, "router": "level:2"})
    chunkings = {"A": run_chunker(doc, CONFIGS[0]), "M": run_chunker(doc, mog)}
    progress, seen = _recorded()
    result = search_job(doc, chunkings, None, QUERY, 2)(progress)
    assert result.tags == ("A", "M") and [a.panel is None for a in result.answers.values()] == [True, False]
    assert seen[-1] == (1.0, "configuration 2 of 2 · 1 / 1")
    assert any(label.startswith("configuration 2 of 2 · level ") for _, label in seen)  # the retriever's levels, named
    live = result.answers["M"].panel
    want = LevelRetriever(mog).answer(doc, open_store(), load_text_embedder(None), QUERY, 2).live
    assert live.selection.level == want.selection.level == 2
    assert [p.ranges for p in live.selection.picks] == [p.ranges for p in want.selection.picks]


def test_a_missing_router_file_fails_the_search_with_one_line_naming_the_tag(tmp_path) -> None:
    from backend.errors import InputError

    doc = Document.from_text("One short line about granite. Another about the railway.", source="tiny.md")
    mog = ChunkerConfig.make("mog", {"chunk_size": 8, "levels": 2, "router": str(tmp_path / "none.npz")})
    with pytest.raises(InputError, match=r"^M: router file .*none\.npz does not exist$"):
        search_job(doc, {"M": run_chunker(doc, mog)}, None, QUERY, 2)(Progress())
