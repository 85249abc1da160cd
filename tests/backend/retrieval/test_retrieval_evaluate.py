"""The benchmark on the small question set of tests/data/retrieval, against an independent computation.

``reference_benchmark`` does what the reference evaluation does, without Chroma: all chunks of
all corpora in one pool, exact cosine top-n by numpy, ``retrieve=-1`` as the reference's
"as many chunks as contain excerpts" (capped at min(20, the largest count)), and the
reference loop of ``test_retrieval_metrics`` for the per-question scores. Chunks are scored where
the reference's ``rigorous_document_search`` puts them (``reference_locate``: a trailing period
dropped, first occurrence), unless ``exact``.
"""

from __future__ import annotations

import numpy as np
import pytest

from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.progress import Progress
from backend.retrieval.evaluate import (
    Benchmark,
    ConfigResult,
    MetricSummary,
    QuestionResult,
    RetrievedChunk,
    coverage_rows,
    evaluate,
)
from backend.retrieval.questions import Question, QuestionSet, Reference, load_question_set
from backend.retrieval.store import ChunkStore
from tests.backend.retrieval.test_retrieval_metrics import reference_omega, reference_scores
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "retrieval"
CONFIGS = [
    ChunkerConfig.make("recursive", {"chunk_size": 40}),
    ChunkerConfig.make("fixed_token", {"chunk_size": 30, "chunk_overlap": 10}),
    ChunkerConfig.make("sentence", {"chunk_size": 25}),
]


@pytest.fixture(scope="module")
def questions():
    return load_question_set(DATA / "questions.csv", DATA / "corpora")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    from backend.models.cache import OutputCache

    return OutputCache(tmp_path_factory.mktemp("cache-eval"))


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed (to see cache hits)."""

    def __init__(self, inner):
        self._inner = inner
        self.info = inner.info
        self.dimension = inner.dimension
        self.texts = 0

    def embed(self, texts, **kwargs):
        self.texts += len(texts)
        return self._inner.embed(texts, **kwargs)


def reference_locate(corpus, chunk):
    """The exact-match branch of the reference's ``rigorous_document_search`` (a chunk is always in its corpus)."""
    if chunk.endswith("."):
        chunk = chunk[:-1]
    at = corpus.find(chunk)
    return at, at + len(chunk)


def reference_benchmark(questions, config, embedder, retrieve, cross_corpus=True, exact=False):
    pool = []  # (corpus_id, start, end, text): where the chunk is scored, and its text
    chunks_of = {}
    for cid in questions.corpus_ids:
        doc = questions.document(cid)
        chunking = run_chunker(doc, config)
        located = [
            (c.start, c.end) if exact else reference_locate(questions.corpora[cid], c.text) for c in chunking.chunks
        ]
        chunks_of[cid] = located
        pool += [(cid, s, e, c.text) for (s, e), c in zip(located, chunking.chunks)]
    chunk_vecs = embedder.embed([p[3] for p in pool])
    q_vecs = embedder.embed([q.question for q in questions.questions])
    counts, omegas = [], []
    for q in questions.questions:
        omega, count = reference_omega(chunks_of[q.corpus_id], q.spans)
        omegas.append(omega)
        counts.append(count)
    if retrieve == -1:
        depth = min(20, max(counts))
        wanted = [min(c, depth) for c in counts]
    else:
        wanted = [retrieve] * len(counts)
    rows = []
    for i, q in enumerate(questions.questions):
        sims = chunk_vecs @ q_vecs[i]
        if not cross_corpus:
            sims = np.where([p[0] == q.corpus_id for p in pool], sims, -np.inf)
        order = np.argsort(-sims, kind="stable")[: wanted[i]]
        top = [pool[j] for j in order]
        own = [(s, e) for cid, s, e, _ in top if cid == q.corpus_id]
        other = sum(e - s for cid, s, e, _ in top if cid != q.corpus_id)
        rows.append((*reference_scores(own, q.spans, other), omegas[i]))
    arr = np.array(rows)  # recall, precision, iou, omega
    return {
        "recall_mean": arr[:, 0].mean(), "recall_std": arr[:, 0].std(),
        "precision_mean": arr[:, 1].mean(), "precision_std": arr[:, 1].std(),
        "iou_mean": arr[:, 2].mean(), "iou_std": arr[:, 2].std(),
        "precision_omega_mean": arr[:, 3].mean(), "precision_omega_std": arr[:, 3].std(),
        "chunks": len(pool),
    }


@pytest.mark.parametrize("retrieve", [3, -1])
def test_matches_the_reference_computation(questions, embedder, store, cache, retrieve):
    bench = evaluate(questions, CONFIGS, embedder=embedder, retrieve=retrieve, store=store, cache=cache)
    assert [r.config for r in bench.results] == CONFIGS
    for result in bench.results:
        expected = reference_benchmark(questions, result.config, embedder, retrieve)
        got = result.to_json()
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, abs=1e-9), (result.config.label, key)
        assert set(got["per_corpus"]) == {"lighthouses", "sourdough"}
        assert got["per_corpus"]["sourdough"]["questions"] == 4
        for q in result.questions:
            assert len(q.retrieved) == (retrieve if retrieve > 0 else len(q.retrieved))
            assert [r.distance for r in q.retrieved] == sorted(r.distance for r in q.retrieved)


def test_exact_chunk_spans_score_the_chunkers_own_spans(questions, embedder, store, cache):
    # recursive chunks here end with a period: the reference scores them a character short
    config = CONFIGS[0]
    exact = evaluate(questions, [config], embedder=embedder, retrieve=3, store=store, cache=cache, chunk_spans="exact")
    assert exact.chunk_spans == "exact" and exact.to_json()["chunk_spans"] == "exact"
    got = exact.results[0].to_json()
    for key, value in reference_benchmark(questions, config, embedder, 3, exact=True).items():
        assert got[key] == pytest.approx(value, abs=1e-9), key
    located = evaluate(questions, [config], embedder=embedder, retrieve=3, store=store, cache=cache).results[0]
    # same retrievals, different scoring spans
    assert [[r.index for r in q.retrieved] for q in located.questions] == [
        [r.index for r in q.retrieved] for q in exact.results[0].questions
    ]
    assert located.summary.recall_mean < got["recall_mean"]
    with pytest.raises(ParameterError, match="chunk_spans"):
        evaluate(questions, [config], embedder=embedder, store=store, cache=cache, chunk_spans="nearest")


def test_questions_can_retrieve_from_their_own_corpus_only(questions, embedder, store, cache):
    config = CONFIGS[0]
    bench = evaluate(questions, [config], embedder=embedder, retrieve=4, store=store, cache=cache, cross_corpus=False)
    result = bench.results[0]
    assert all(r.corpus_id == q.corpus_id for q in result.questions for r in q.retrieved)
    expected = reference_benchmark(questions, config, embedder, 4, cross_corpus=False)
    assert result.summary.precision_mean == pytest.approx(expected["precision_mean"], abs=1e-9)
    assert result.summary.recall_mean == pytest.approx(expected["recall_mean"], abs=1e-9)


def test_reruns_take_embeddings_from_the_cache_and_reuse_the_index(questions, embedder, cache, tmp_path):
    counting = CountingEmbedder(embedder)
    first_store = ChunkStore(path=tmp_path / "a")
    first = evaluate(questions, CONFIGS[:2], embedder=counting, store=first_store, cache=cache)
    # Questions and the chunks of the test above are cached already; only new texts are embedded.
    assert not any(r.reused for r in first.results)
    counting.texts = 0
    second = evaluate(questions, CONFIGS[:2], embedder=counting, store=first_store, cache=cache)
    assert counting.texts == 0 and all(r.reused for r in second.results)
    # A fresh store with the same cache: indexed again, but nothing embedded again.
    third = evaluate(questions, CONFIGS[:2], embedder=counting, store=ChunkStore(path=tmp_path / "b"), cache=cache)
    assert counting.texts == 0 and not any(r.reused for r in third.results)
    assert [r.to_json()["iou_mean"] for r in third.results] == [r.to_json()["iou_mean"] for r in first.results]
    # Without the cache everything is embedded.
    evaluate(questions, CONFIGS[:1], embedder=counting, store=ChunkStore(path=tmp_path / "c"), use_cache=False)
    assert counting.texts == len(questions) + sum(
        len(run_chunker(questions.document(c), CONFIGS[0])) for c in questions.corpus_ids
    )


def test_tables_matrix_progress_and_arguments(questions, embedder, store, cache):
    fractions = []
    bench = evaluate(
        questions, CONFIGS, embedder=embedder, store=store, cache=cache,
        progress=Progress(lambda f, eta, label: fractions.append(f)),
    )
    assert fractions and fractions[-1] == 1.0
    assert fractions == sorted(fractions)
    assert bench.matrix("iou").shape == (10, 3) and bench.matrix("recall").max() <= 1.0
    rows = bench.table()
    assert rows[1]["chunker"] == "fixed_token" and rows[1]["param_chunk_overlap"] == 10
    assert {"recall_mean", "iou_std", "chunks", "chunk_tokens_mean", "seconds"} <= rows[0].keys()
    ranges = bench.results[0].retrieved_ranges("sourdough")
    assert len(ranges) == 10 and all(isinstance(r, list) for r in ranges)
    with pytest.raises(ParameterError, match="retrieve"):
        evaluate(questions, CONFIGS, embedder=embedder, store=store, retrieve=0)
    with pytest.raises(ParameterError, match="at least one"):
        evaluate(questions, [], embedder=embedder, store=store)
    with pytest.raises(ParameterError, match="unknown metric"):
        bench.matrix("f1")


def test_coverage_rows_count_questions_per_stretch():
    corpus = "abcdefghij"
    qset = QuestionSet(
        (Question("q1?", (Reference("ab", 0, 2),), "doc"), Question("q2?", (Reference("ef", 4, 6),), "doc")),
        {"doc": corpus},
    )
    retrieved = [[(0, 4)], [(2, 6), (3, 5)]]  # question 2's two chunks overlap: each character counts once
    questions = tuple(
        QuestionResult(i, "doc", q.question, 1.0, 0.5, 1.0, 0.5, tuple(RetrievedChunk("doc", s, e, 0, 0.1) for s, e in spans))
        for i, (q, spans) in enumerate(zip(qset.questions, retrieved))
    )
    result = ConfigResult(CONFIGS[0], MetricSummary.of(questions), {}, questions, 3, 3.0, 0.1, False)
    bench = Benchmark((result,), "minilm", "fp", 2, 2, ("doc",), 0.1)
    rows, excerpts = coverage_rows(bench, qset, "doc", bins=5)
    assert (rows.tolist(), excerpts.tolist()) == ([[1.0, 2.0, 1.0, 0.0, 0.0]], [1.0, 0.0, 1.0, 0.0, 0.0])
    with pytest.raises(ParameterError, match="no corpus 'other'"):
        coverage_rows(bench, qset, "other", bins=5)
