"""MoG, MoGG and FreeChunker end to end: a real Chroma store, the bundled embedder, a bundled question set."""

from __future__ import annotations

import numpy as np
import pytest

from backend.chunkers import make_chunker
from backend.errors import InputError, ParameterError
from backend.retrieval.evaluate import evaluate
from backend.retrieval.multi.level_router import save_router, train_router
from backend.retrieval.questions import load_sample_question_set
from backend.retrieval.retriever.levels import LevelRetriever

LEVELS = [f"level:{n}" for n in range(1, 6)]
MOGG = {"t_graph": 0.2, "max_tokens": 200}


@pytest.fixture(scope="module")
def questions():
    return load_sample_question_set("narrative")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    from backend.models.cache import OutputCache

    return OutputCache(tmp_path_factory.mktemp("cache-multi"))


def cfg(name, **params):
    return make_chunker(name, params).config


def build_index(doc, config, store, embedder, *, cache=None):
    return LevelRetriever(config).index(doc, store, embedder, cache=cache)


def live_retrieve(doc, config, store, embedder, query, k, *, cache=None, train_on=None, marks=()):
    return LevelRetriever(config).answer(doc, store, embedder, query, k, cache=cache, train_on=train_on, marks=marks).live


def training_data(questions, config, store, embedder, *, cache=None):
    return LevelRetriever(config).training_data(questions, store, embedder, cache=cache)


@pytest.fixture(scope="module")
def bench(questions, embedder, store, cache):
    configs = [cfg("mog", router=r) for r in ("oracle", "uniform", "cv", *LEVELS)]
    # MoGG with test_mogg_neighbourhoods_are_capped_and_hold_their_centre's graph and cap: its index is then
    # built and embedded once for the module (the output cache), not once here and once there.
    configs += [cfg("mogg", router="oracle", **MOGG), cfg("freechunker"),
                cfg("freechunker", unit="tokens", unit_tokens=64)]
    return evaluate(questions, configs, embedder=embedder, store=store, cache=cache, retrieve=3)


def test_everything_returned_is_an_exact_span_of_its_corpus(bench, questions):
    for r in bench.results:
        for q in r.questions:
            assert 1 <= len(q.retrieved) <= 3
            for hit in q.retrieved:
                text = questions.corpora[hit.corpus_id]
                spans = hit.spans
                assert spans == tuple(sorted(spans))
                assert all(0 <= s < e <= len(text) for s, e in spans)
                assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "ranges of one entry overlap"
                assert hit.start == spans[0][0] and hit.end == spans[-1][1]
            for m in ("recall", "precision", "precision_omega", "iou"):
                assert 0.0 <= q.metric(m) <= 1.0


def test_freechunker_runs_never_return_a_character_twice(bench):
    for r in bench.results:
        if r.config.name != "freechunker":
            continue
        for q in r.questions:
            spans = sorted(span for hit in q.retrieved for span in hit.spans)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_retrievers_report_their_cost_and_units(bench):
    for r in bench.results:
        assert r.retrieved_tokens_mean > 0 and r.index_seconds >= 0 and r.query_seconds >= 0
        assert r.omega_units == "units"
        assert (r.routing is None) == (r.config.name == "freechunker")
    by_router = {r.config.params_dict.get("router"): r for r in bench.results if r.config.name == "mog"}
    # A coarser fixed level returns more text at the same k.
    tokens = [by_router[lv].retrieved_tokens_mean for lv in LEVELS]
    assert tokens == sorted(tokens)
    fixed = by_router["level:3"].routing
    assert set(fixed.chosen.tolist()) == {3}
    cv = by_router["cv"].routing
    assert cv.training is not None and cv.weights.shape == (12, 5)


def test_oracle_scores_at_least_the_best_single_level(bench):
    by_router = {r.config.params_dict.get("router"): r for r in bench.results if r.config.name == "mog"}
    best = max(by_router[lv].summary.iou_mean for lv in LEVELS)
    assert by_router["oracle"].summary.iou_mean >= best


def test_oracle_routes_each_question_to_its_best_labelled_level(bench):
    oracle = next(r for r in bench.results if r.config.params_dict.get("router") == "oracle")
    routing = oracle.routing
    has = routing.oracle > 0
    assert has.any()
    assert (routing.chosen[has] == routing.oracle[has]).all()
    assert routing.confusion().trace() == int(has.sum())


class _NoEmbedding:
    """An embedder that fails if asked to embed anything: a cached rerun must not."""

    def __init__(self, inner):
        self.info = inner.info
        self.dimension = getattr(inner, "dimension", 0)

    def embed(self, texts, *, progress=None):
        raise AssertionError(f"the embedder was called for {len(texts)} text(s) on a cached rerun")


def test_cached_rerun_makes_no_embedder_call(bench, questions, embedder, store, cache):
    configs = [r.config for r in bench.results]
    again = evaluate(questions, configs, embedder=_NoEmbedding(embedder), store=store, cache=cache, retrieve=3)
    assert [r.texts_embedded for r in again.results] == [0] * len(configs)
    assert all(r.reused for r in again.results)
    for a, b in zip(bench.results, again.results):
        assert a.summary.iou_mean == pytest.approx(b.summary.iou_mean)


def test_mog_levels_double_and_parents_hold_their_units(questions, embedder, store, cache):
    doc = questions.document(questions.corpus_ids[0])
    index = build_index(doc, cfg("mog"), store, embedder, cache=cache)
    sizes = [len(lv) for lv in index.levels]
    assert sizes[0] == len(index.units)
    assert all(b == (a + 1) // 2 for a, b in zip(sizes, sizes[1:]))
    for lv in index.levels:
        for u, p in enumerate(lv.parent):
            assert u in lv.entries[p].units
        for e in lv.entries:
            assert doc.text[e.start : e.end].startswith(index.units.chunks[e.units[0]].text)


def test_mogg_neighbourhoods_are_capped_and_hold_their_centre(questions, embedder, store, cache):
    doc = questions.document(questions.corpus_ids[0])
    index = build_index(doc, cfg("mogg", **MOGG), store, embedder, cache=cache)
    assert index.graph is not None and index.graph.n == len(index.units)
    for lv in index.levels:
        for centre, p in enumerate(lv.parent):
            entry = lv.entries[p]
            assert centre in entry.units
            assert entry.tokens <= 200 or len(entry.units) == 1


def test_live_query_and_router_fallbacks(questions, embedder, store, cache):
    doc = questions.document(questions.corpus_ids[0])
    q = questions.questions[0]
    live = live_retrieve(doc, cfg("mog", router="cv"), store, embedder, q.question, 3, cache=cache)
    assert "uniform" in live.note and live.selection.level == 1
    trained = live_retrieve(doc, cfg("mog", router="cv"), store, embedder, q.question, 3, cache=cache, train_on=questions)
    assert "router trained" in trained.note
    unmarked = live_retrieve(doc, cfg("mog", router="oracle"), store, embedder, q.question, 3, cache=cache)
    assert "needs a marked answer" in unmarked.note
    met = 0
    for q in questions.questions:
        if q.corpus_id != questions.corpus_ids[0]:
            continue
        oracle = live_retrieve(doc, cfg("mog", router="oracle"), store, embedder, q.question, 3, cache=cache,
                               marks=q.spans)
        assert oracle.similarities is not None
        if oracle.similarities.max() > 0:
            met += 1
            assert oracle.note == ""
            assert oracle.selection.level == int(np.argmax(oracle.similarities)) + 1
        else:
            assert "uniform" in oracle.note
    assert met > 0
    with pytest.raises(ParameterError):
        live_retrieve(doc, cfg("mog"), store, embedder, "  ", 3, cache=cache)


def test_router_file_round_trip_and_refusals(questions, embedder, store, cache, tmp_path):
    config = cfg("mog", router="uniform")
    data = training_data(questions, config, store, embedder, cache=cache)
    assert data.questions == 12 and data.vectors.shape == (12, 384)
    chunker = make_chunker("mog", {})
    router, report = train_router(data.vectors, data.labels, base=chunker.level_spec(), embedder=embedder.info.name,
                                  embedder_fingerprint=embedder.info.fingerprint, label="iou", soft="0.8/0.2")
    path = save_router(router, tmp_path / "mog.router.npz")
    ok = evaluate(questions, [cfg("mog", router=str(path))], embedder=embedder, store=store, cache=cache, retrieve=3)
    assert ok.results[0].routing.router == "router file mog.router.npz"
    other = save_router(
        train_router(data.vectors, data.labels, base=chunker.level_spec(), embedder="x", embedder_fingerprint="0" * 64)[0],
        tmp_path / "other.router.npz",
    )
    with pytest.raises(InputError, match="embedder"):
        evaluate(questions, [cfg("mog", router=str(other))], embedder=embedder, store=store, cache=cache)
    with pytest.raises(InputError, match="chunk_size"):
        evaluate(questions, [cfg("mog", router=str(path), chunk_size=64)], embedder=embedder, store=store, cache=cache)
    with pytest.raises(InputError):
        evaluate(questions, [cfg("mog", router=str(tmp_path / "missing.npz"))], embedder=embedder, store=store, cache=cache)


@pytest.mark.parametrize(
    "name, params",
    [("mog", {"router": "level:6"}), ("mog", {"levels": 9}), ("mogg", {"t_graph": 1.5}), ("mogg", {"edge": "jaccard"}),
     ("freechunker", {"granularities": "1,2"}), ("freechunker", {"encoder": "best"}), ("mog", {"k_r": 0})],
)
def test_parameters_out_of_range_are_one_line_parameter_errors(name, params):
    with pytest.raises(ParameterError) as info:
        make_chunker(name, params)
    assert "\n" not in str(info.value)
