"""Chunker curves (``Chunker.curve``): their boundaries are the chunker's chunk ends, and they cost no model call.

PPL and margin sampling run on deterministic fake scorers (no model); the semantic chunkers
on the real bundled MiniLM.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import backend.chunkers  # noqa: F401  (registers the chunkers)
from backend.chunkers import REGISTRY, ModelContext, chunker_specs, make_chunker
from backend.chunkers.meta.algorithms import find_minima, sentence_values
from backend.chunkers.meta.chunkers import margin_steps, sentence_nll_means
from backend.curves import Curve, chunk_end_points
from backend.errors import ChunkLabError
from backend.models.cache import OutputCache
from backend.models.types import ModelInfo
from backend.samples import load_sample
from backend.text.document import Document
from tests.backend.chunkers.test_semantic_chunkers import CountingEmbedder
from tests.support.fake_scores import FakeScorer

WITH_CURVE = {"ppl", "ppl_combined", "ppl_overlap", "margin_sampling", "semantic", "semantic_max"}
DOCS = ("narrative", "chinese")
TEXT = (
    "The lighthouse was built in 1851. Its lamp burned whale oil. Keepers climbed the steps at dusk. "
    "Bread is made from flour and water. The dough must rest. A hot oven gives the crust its colour. "
    "The committee met on Tuesday. It approved the library budget. Work starts in May."
)


class _Refused(ChunkLabError):
    """The test's stand-in for a cache-only context's NotCached."""


class _RefusingScorer(FakeScorer):
    info = ModelInfo("refusing", "", "lm", 0, "cpu", "float32", "refusing-curves")

    def token_nll(self, *args, **kwargs):
        raise _Refused("not cached")

    next_token_probs = token_nll


def _ends(chunking) -> set[int]:
    """Where chunks end, the end of the last chunk excluded (no boundary there)."""
    ends = {c.end for c in chunking.chunks}
    ends.discard(chunking.chunks[-1].end)
    return ends


def _boundary_ends(curve: Curve) -> set[int]:
    return {curve.units[i][1] for i in curve.boundaries}


@pytest.fixture()
def fake(tmp_path):
    scorer = FakeScorer()
    return scorer, ModelContext(scorer=scorer, _cache=OutputCache(tmp_path))


# --- the registry ---------------------------------------------------------------------------------


def test_specs_say_which_chunkers_have_a_curve():
    specs = {s["name"]: s["has_curve"] for s in chunker_specs()}
    assert specs.keys() == REGISTRY.keys()
    assert {name for name, has in specs.items() if has} == WITH_CURVE
    assert not specs["cluster"] and not specs["recursive"]


@pytest.mark.parametrize("name", ["recursive", "sentence", "fixed_token"])
def test_chunkers_without_a_curve_return_none(name):
    assert make_chunker(name).curve(load_sample("narrative")) is None


def test_cluster_has_no_curve_and_calls_no_embedder():
    def refuse() -> None:
        raise AssertionError("the embedder was loaded")

    assert make_chunker("cluster").curve(load_sample("narrative"), ModelContext(on_load=refuse)) is None


# --- perplexity chunking -------------------------------------------------------------------------


@pytest.mark.parametrize("sample", DOCS)
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ppl", {"threshold": 0.5}),
        ("ppl", {"threshold": 0.2, "rule": "paper", "value": "ppl"}),
        ("ppl_combined", {"threshold": 0.0, "target_length": 120}),
        ("ppl_overlap", {"threshold": 0.5}),
    ],
)
def test_ppl_curve_boundaries_are_the_chunk_ends(sample, name, params, fake):
    scorer, context = fake
    doc = load_sample(sample)
    chunker = make_chunker(name, params)
    chunking = chunker.chunk(doc, context)
    assert scorer.calls == 1
    curve = make_chunker(name, params).curve(doc, context)
    assert scorer.calls == 1  # the cached scores: no model call

    assert curve.units == tuple((s.start, s.end) for s in doc.sentences)
    expected_values = sentence_values(sentence_nll_means(doc, context), chunker.values["value"])
    np.testing.assert_array_equal(curve.values, expected_values)
    assert _boundary_ends(curve) == _ends(chunking)
    assert len(chunking.chunks) > 3  # the documents cut somewhere
    kept = find_minima(curve.values, chunker.values["threshold"], chunker.values["rule"])
    if name == "ppl":
        assert list(curve.boundaries) == kept
    else:
        assert set(curve.boundaries) <= set(kept)  # combination merges, overlap reuses the minima
    assert set(kept) <= set(curve.candidates)
    assert curve.drop_threshold == chunker.values["threshold"]
    assert curve.threshold is None and curve.threshold_series is None


def test_ppl_curve_raises_what_chunking_raises_when_not_cached(tmp_path):
    doc = Document.from_text("One sentence here. Another one there. A third to end.", source="t.txt")
    context = ModelContext(scorer=_RefusingScorer(), _cache=OutputCache(tmp_path))
    with pytest.raises(_Refused):
        make_chunker("ppl").chunk(doc, context)
    with pytest.raises(_Refused):
        make_chunker("ppl").curve(doc, context)


# --- margin sampling -------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [{}, {"unit": "sentence"}, {"target_length": 80}])
def test_margin_curve_is_the_steps_and_their_threshold(params, fake):
    scorer, context = fake
    doc = load_sample("narrative")
    chunking = make_chunker("margin_sampling", params).chunk(doc, context)
    calls = scorer.calls
    curve = make_chunker("margin_sampling", params).curve(doc, context)
    assert scorer.calls == calls  # every margin from the cache

    steps = margin_steps(doc, context, params.get("unit", "chunk"))
    assert scorer.calls == calls
    sentences = doc.sentences
    assert curve.units == tuple((sentences[s.index - 1].start, sentences[s.index - 1].end) for s in steps)
    np.testing.assert_array_equal(curve.values, [s.margin for s in steps])
    np.testing.assert_array_equal(curve.threshold_series, [s.threshold for s in steps])
    assert _boundary_ends(curve) == _ends(chunking)
    if not params.get("target_length"):
        assert list(curve.boundaries) == [s.index - 1 for s in steps if s.split]


# --- semantic chunkers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder():
    from backend.models.embedder import load_embedder

    return load_embedder(None, "cpu")


@pytest.fixture(scope="module")
def embedding_cache(tmp_path_factory):
    """One output cache for the semantic tests (configurations sharing windows embed them once)."""
    return OutputCache(tmp_path_factory.mktemp("curve-embeddings"))


SEMANTIC = [
    ("narrative", "semantic", {}),
    ("narrative", "semantic", {"breakpoint": "gradient", "buffer_size": 0}),
    ("narrative", "semantic", {"breakpoint": "std", "max_tokens": 60}),
    ("narrative", "semantic_max", {}),
    ("narrative", "semantic_max", {"chunk_size": 150, "unit": "sentence"}),
    ("chinese", "semantic", {"max_tokens": 80}),
    ("chinese", "semantic_max", {"chunk_size": 150}),
]


@pytest.mark.parametrize(("sample", "name", "params"), SEMANTIC)
def test_semantic_curve_boundaries_are_the_chunk_ends(sample, name, params, embedder, embedding_cache):
    doc = load_sample(sample)
    counting = CountingEmbedder(embedder)
    cache = embedding_cache
    chunking = make_chunker(name, params).chunk(doc, ModelContext(embedder=counting, device="cpu", _cache=cache))
    calls = counting.calls

    def refuse() -> None:
        raise AssertionError("the embedder was loaded")

    chunker = make_chunker(name, params)
    curve = chunker.curve(doc, ModelContext(on_load=refuse, device="cpu", _cache=cache))
    assert counting.calls == calls  # read from the cache, the embedder never loaded

    distance = chunker.distance_curve(doc)
    assert curve.units == distance.units[:-1]
    np.testing.assert_array_equal(curve.values, distance.scores)
    point_ends = {e for _s, e in curve.units}
    assert _boundary_ends(curve) == _ends(chunking) & point_ends
    capped = "max_tokens" in params
    if not capped and name == "semantic":  # no cap: every chunk ends at a breakpoint
        assert _boundary_ends(curve) == _ends(chunking)
        assert list(curve.boundaries) == distance.breakpoints.tolist()
    assert set(distance.breakpoints.tolist()) <= set(curve.boundaries)
    if math.isfinite(distance.threshold):
        assert curve.threshold == distance.threshold
    assert curve.drop_threshold is None and curve.threshold_series is None


def test_semantic_curve_raises_what_chunking_raises_when_not_cached(tmp_path):
    doc = Document.from_text("Never embedded before: curves. A second sentence. And a third.", source="t.txt")

    def refuse() -> None:
        raise _Refused("not cached")

    for name, params in (("semantic", {}), ("semantic_max", {"unit": "sentence"})):
        with pytest.raises(_Refused):
            make_chunker(name, params).chunk(doc, ModelContext(on_load=refuse, _cache=OutputCache(tmp_path)))
        with pytest.raises(_Refused):
            make_chunker(name, params).curve(doc, ModelContext(on_load=refuse, _cache=OutputCache(tmp_path)))


def test_short_documents_give_empty_curves(embedder, tmp_path):
    context = ModelContext(embedder=embedder, _cache=OutputCache(tmp_path))
    one = Document.from_text("Just one sentence.", source="t.txt")
    assert len(make_chunker("semantic").curve(one, context)) == 0
    assert len(make_chunker("semantic_max").curve(one, context)) == 0
    empty = Document.from_text("", source="e.txt")
    assert len(make_chunker("semantic").curve(empty, context)) == 0
    assert len(make_chunker("ppl").curve(empty, ModelContext(scorer=FakeScorer(), use_cache=False))) == 0


# --- the dataclass -------------------------------------------------------------------------------------


def test_to_json_is_plain_json():
    curve = Curve(((0, 5), (6, 9), (10, 12)), np.array([1.0, math.nan, 0.5]), "sentence", "nll", "sentence",
                  boundaries=(1,), threshold=float("-inf"), threshold_series=np.array([0.0, 0.1, 0.2]))
    out = json.loads(json.dumps(curve.to_json(), allow_nan=False))
    assert out["values"] == [1.0, None, 0.5]
    assert out["threshold"] is None and out["threshold_series"] == [0.0, 0.1, 0.2]
    assert out["units"] == [[0, 5], [6, 9], [10, 12]] and out["boundaries"] == [1]


def test_bad_curves_are_rejected():
    with pytest.raises(ValueError, match="2 values for 3 points"):
        Curve(((0, 1), (2, 3), (4, 5)), np.zeros(2), "x", "y", "p")
    with pytest.raises(ValueError, match="outside"):
        Curve(((0, 1),), np.zeros(1), "x", "y", "p", boundaries=(1,))


def test_chunk_end_points_skip_the_last_chunk_end():
    units = [(0, 3), (4, 7), (8, 11), (12, 15)]
    assert chunk_end_points(units, [(0, 7, 2), (8, 15, 2)]) == (1,)
    assert chunk_end_points(units, [(0, 7, 2), (4, 11, 2), (12, 15, 1)]) == (1, 2)  # overlapping chunks
    assert chunk_end_points(units, []) == ()


# --- the CLI ---------------------------------------------------------------------------------------------


def test_cli_curve_prints_the_semantic_curve_and_names_chunkers_with_one(tmp_path):
    from tests.backend.cli.test_cli_models import records, run_cli

    path = tmp_path / "doc.txt"
    path.write_text(TEXT, encoding="utf-8")
    doc = Document.from_text(TEXT, source="doc.txt")
    (out,) = records(run_cli("curve", str(path), "--config", "semantic amount=60", cache_dir=tmp_path))
    chunker = make_chunker("semantic", {"amount": 60})
    chunking = chunker.chunk(doc, ModelContext(_cache=OutputCache(tmp_path)))  # the CLI's cache: no embedding
    assert out["point_label"] == "gap after sentence" and out["threshold"] is not None
    assert {out["units"][i][1] for i in out["boundaries"]} == _ends(chunking)
    assert len(chunking.chunks) > 1
    bad = run_cli("curve", str(path), "--config", "recursive", cache_dir=tmp_path)
    assert bad.returncode == 2 and b"recursive has no curve; chunkers with one: margin_sampling" in bad.stderr
