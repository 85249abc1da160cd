"""The embedding chunkers (``semantic``, ``semantic_max``, ``cluster``) on the real bundled MiniLM.

Checked against independent transcriptions written here: LangChain's breakpoint formulas
(``_calculate_breakpoint_threshold`` and its ``x > threshold`` grouping) and a brute-force
search over every segmentation for the cluster objective of the Chroma reference code.
"""

from __future__ import annotations

import functools
import itertools
import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backend.chunkers  # noqa: F401  (registers the baselines)
from backend.chunkers import REGISTRY, ModelContext, chunker_specs, make_chunker
from backend.chunkers.semantic import (
    BREAKPOINT_DEFAULTS,
    ClusterChunker,
    SemanticChunker,
    SemanticMaxChunker,
    allowed_windows,
    unit_groups,
    breakpoint_threshold,
    capped_threshold,
    cluster_segmentation,
    consecutive_distances,
    forced_cuts,
    piece_spans,
    semantic_distances,
    semantic_spans,
    window_spans,
)
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.samples import load_sample
from backend.text.document import Document
from backend.tokenizers import SpanCounter, get_tokenizer
from tests.backend.cli.test_cli_models import records, run_cli
from tests.invariants import check_invariants
from tests.support.cli import run_main

SAMPLES = ("narrative", "technical", "chinese", "release-notes")

TOPICS = (
    "The lighthouse at Corran Point was built in 1851. Its lamp burned whale oil for twenty years. "
    "Keepers climbed one hundred and twelve steps to trim the wick. In 1873 paraffin replaced the oil.\n\n"
    "Bread is made from flour, water, salt and yeast. The dough must rest before it is shaped. "
    "A hot oven gives the crust its colour. Some bakers add a pan of water for steam.\n\n"
    "The committee met on Tuesday. It approved the budget for the new library. Two members voted "
    "against it. The building work starts in May and should last a year.\n\n"
    "Rain fell all night. By morning the river had risen over the path. Nobody minded."
)


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.info = inner.info
        self.dimension = inner.dimension
        self.calls = 0

    def embed(self, texts, *, progress=None):
        self.calls += 1
        return self._inner.embed(texts, progress=progress)


@pytest.fixture(scope="module")
def embedder():
    from backend.models.embedder import load_embedder

    return load_embedder(None, "cpu")


@pytest.fixture(scope="module")
def context(embedder):
    """The real embedder and the test run's default cache (kept between runs: reruns are fast)."""
    return ModelContext(embedder=embedder, device="cpu")


@pytest.fixture()
def uncached(embedder):
    return ModelContext(embedder=embedder, device="cpu", use_cache=False)


def _doc(text: str) -> Document:
    return Document.from_text(text, source="t.txt")


_PREFIX_TOKENS = 900


@functools.cache
def sample_prefix(name: str, tokens: int = _PREFIX_TOKENS) -> Document:
    """A bundled sample cut after its last paragraph that ends within its first ``tokens`` (900) cl100k tokens.

    Embedding costs grow with the text, and what these tests prove does not: the prefix is still 24 to 49
    sentences and about twice the largest cap here (400 tokens), with the technical sample's markdown
    headings and a numbered list, and Chinese sentences (24, in 665 of the sample's 3630 characters: Chinese
    windows are the longest in tokens, each costing MiniLM its full 256 positions). The release notes are
    shorter and kept whole. The prefix has the full document's sentences and paragraphs up to the cut.
    """
    full = load_sample(name)
    counter = SpanCounter(get_tokenizer("cl100k"), full.text)
    if counter.count(0, len(full.text)) <= tokens:
        return full
    ends = [e.start() for e in re.finditer(r"\n\n", full.text)]
    cut = max(e for e in ends if counter.count(0, e) <= tokens)
    return Document.from_text(full.text[:cut], source=full.source, kind=full.kind, language=full.language)


# --- invariants on real documents ---------------------------------------------------------

CONFIGS = [
    ("semantic", {}, None),
    ("semantic", {"breakpoint": "std", "max_tokens": 120}, 120),
    ("semantic", {"breakpoint": "gradient", "buffer_size": 0, "max_tokens": 60}, 60),
    ("semantic_max", {}, 400),
    ("semantic_max", {"chunk_size": 150, "unit": "sentence"}, 150),
    ("cluster", {}, 400),
    ("cluster", {"max_chunk_size": 120}, 120),
]


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize(("name", "params", "cap"), CONFIGS)
def test_invariants_on_samples(sample, name, params, cap, context):
    doc = sample_prefix(sample)
    chunker = make_chunker(name, params)
    chunking = chunker.chunk(doc, context)
    assert len(chunking) >= 1
    check_invariants(doc, chunking, cap, overlap_allowed=False, tokenizer=chunker.tokenizer)


@pytest.mark.parametrize("name", ["semantic", "semantic_max", "cluster"])
@pytest.mark.parametrize("text", ["", "  \n\n\t ", "One sentence only.", "孤零零的一句话。"])
def test_empty_and_single_sentence_documents(name, text, uncached):
    doc = _doc(text)
    chunks = make_chunker(name).chunk(doc, uncached).chunks
    if text.strip():
        assert [(c.start, c.end) for c in chunks] == [(0, len(text))]
    else:
        assert chunks == ()


# --- caps, as properties --------------------------------------------------------------------

_alphabet = st.sampled_from(
    list("abcdefghij ABC  \n\n.,;!?-'()0123") + ["Dr.", "3.14", "。", "！", "，", "北京", "中文", "😀", "é", "\u00a0"]
)
texts = st.one_of(
    st.lists(_alphabet, max_size=250).map("".join),
    st.lists(st.sampled_from(TOPICS.split(". ")), min_size=1, max_size=12).map(". ".join),
    st.integers(1, 600).map(lambda n: "x" * n),
    st.integers(1, 200).map(lambda n: "喵" * n),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=texts, cap=st.integers(1, 80), which=st.sampled_from(["semantic", "semantic_max", "cluster"]))
def test_caps_hold_on_any_text(text, cap, which, uncached):
    params = {"semantic": {"max_tokens": cap}, "semantic_max": {"chunk_size": cap}, "cluster": {"max_chunk_size": cap}}
    doc = _doc(text)
    chunker = make_chunker(which, params[which])
    chunking = chunker.chunk(doc, uncached)
    check_invariants(doc, chunking, cap, overlap_allowed=False, tokenizer=chunker.tokenizer)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    cap=st.integers(1, 60),
    seed=st.integers(0, 2**31),
    threshold=st.floats(-0.1, 1.1),
)
def test_semantic_spans_respect_max_tokens_and_split_at_the_largest_distance(n, cap, seed, threshold):
    rng = np.random.default_rng(seed)
    words = rng.integers(1, 12, size=n)
    sentences = [" ".join(["word"] * int(k)) + "." for k in words]
    text = " ".join(sentences)
    units, pos = [], 0
    for s in sentences:
        units.append((pos, pos + len(s)))
        pos += len(s) + 1
    distances = rng.random(n - 1)
    from backend.chunkers.semantic import DistanceCurve

    curve = DistanceCurve(tuple(units), distances, distances, threshold, "percentile", 95.0)
    tok = get_tokenizer("words")
    counter = SpanCounter(tok, text)
    got = semantic_spans(text, curve, counter, cap)
    assert all(c <= cap for _s, _e, c in got)
    assert all(c == tok.count(text[s:e]) for s, e, c in got)
    # Every cut of the uncapped chunking is kept; extra cuts only where a group was over the cap.
    uncapped = {e for _s, e, _c in semantic_spans(text, curve, counter, None)}
    assert uncapped <= {e for _s, e, _c in got} | {len(text)}
    # A group over the cap whose sentences all fit alone is cut at its largest distance first.
    for a, b in unit_groups(n, curve.breakpoints):
        if b > a and counter.count(units[a][0], units[b][1]) > cap and all(w <= cap for w in words[a : b + 1]):
            k = a + int(np.argmax(distances[a:b]))
            assert units[k][1] in {e for _s, e, _c in got}


# --- LangChain's breakpoint rules, transcribed independently ---------------------------------


def langchain_breakpoints(distances: list[float], kind: str, amount: float | None) -> list[int]:
    """``indices_above_thresh`` of LangChain's SemanticChunker.split_text, written out again."""
    names = {"std": "standard_deviation", "iqr": "interquartile"}
    kind = names.get(kind, kind)
    defaults = {"percentile": 95, "standard_deviation": 3, "interquartile": 1.5, "gradient": 95}
    amount = defaults[kind] if amount is None else amount
    array = distances
    if kind == "percentile":
        threshold = np.percentile(distances, amount)
    elif kind == "standard_deviation":
        threshold = np.mean(distances) + amount * np.std(distances)
    elif kind == "interquartile":
        q1, q3 = np.percentile(distances, [25, 75])
        threshold = np.mean(distances) + amount * (q3 - q1)
    else:
        array = list(np.gradient(distances, range(0, len(distances))))
        threshold = np.percentile(array, amount)
    return [i for i, x in enumerate(array) if x > threshold]


@pytest.mark.parametrize("kind", ["percentile", "std", "iqr", "gradient"])
@pytest.mark.parametrize("amount", [None, 0.0, 0.5, 1.0, 50.0, 90.0, 99.0])
@pytest.mark.parametrize("seed", range(6))
def test_breakpoint_rules_equal_langchain(kind, amount, seed):
    rng = np.random.default_rng(seed)
    distances = list(rng.beta(2, 8, size=int(rng.integers(2, 60))))
    if seed == 5:
        distances = [round(x, 1) for x in distances]  # ties at the threshold
    threshold, scores = breakpoint_threshold(np.asarray(distances), kind, amount)
    got = [int(i) for i in np.flatnonzero(scores > threshold)]
    assert got == langchain_breakpoints(distances, kind, amount)


def test_breakpoint_defaults_are_langchains():
    assert BREAKPOINT_DEFAULTS == {"percentile": 95, "std": 3, "iqr": 1.5, "gradient": 95}
    chunker = make_chunker("semantic", {"breakpoint": "iqr"})
    assert chunker.amount == 1.5
    assert make_chunker("semantic", {"breakpoint": "iqr", "amount": 0.25}).amount == 0.25


def test_two_sentences_with_gradient_are_two_chunks_as_in_langchain(uncached):
    doc = _doc("Bread is made from flour. The committee met on Tuesday.")
    got = [c.text for c in make_chunker("semantic", {"breakpoint": "gradient"}).chunk(doc, uncached)]
    assert got == ["Bread is made from flour.", "The committee met on Tuesday."]
    assert [c.text for c in make_chunker("semantic").chunk(doc, uncached)] == [doc.text]


@pytest.mark.parametrize("kind", ["percentile", "std", "iqr", "gradient"])
@pytest.mark.parametrize("buffer_size", [0, 1, 2])
def test_semantic_chunks_equal_langchain_grouping_of_the_same_distances(kind, buffer_size, embedder, context):
    """End to end: embed the windows here, take LangChain's breakpoints, group sentences."""
    doc = _doc(TOPICS)
    sents = [(s.start, s.end) for s in doc.sentences]
    n = len(sents)
    windows = [doc.text[sents[max(0, i - buffer_size)][0] : sents[min(n - 1, i + buffer_size)][1]] for i in range(n)]
    vecs = embedder.embed(windows)
    distances = [1 - float(np.dot(vecs[i], vecs[i + 1]) / np.linalg.norm(vecs[i]) / np.linalg.norm(vecs[i + 1]))
                 for i in range(n - 1)]
    cuts = langchain_breakpoints(distances, kind, None)
    expected, start = [], 0
    for index in cuts:
        expected.append((sents[start][0], sents[index][1]))
        start = index + 1
    if start < n:
        expected.append((sents[start][0], sents[-1][1]))

    chunker = make_chunker("semantic", {"breakpoint": kind, "buffer_size": buffer_size})
    got = [(c.start, c.end) for c in chunker.chunk(doc, context)]
    assert got == expected
    curve = chunker.distance_curve(doc)
    np.testing.assert_allclose(curve.distances, distances, atol=1e-5)


def test_amount_grows_mean_length(context):
    doc = sample_prefix("narrative")
    means = []
    for amount in (10, 30, 50, 70, 90, 99):
        chunks = make_chunker("semantic", {"amount": amount}).chunk(doc, context).chunks
        means.append(sum(c.tokens for c in chunks) / len(chunks))
    assert means == sorted(means) and means[0] < means[-1]
    assert SemanticChunker.length_param == "amount"
    assert SemanticMaxChunker.length_param == "chunk_size"
    assert ClusterChunker.length_param == "max_chunk_size"


def test_parameter_errors_name_the_value():
    with pytest.raises(ParameterError, match=r"amount \(-0.5\)"):
        make_chunker("semantic", {"amount": -0.5})
    with pytest.raises(ParameterError, match="breakpoint must be one of"):
        make_chunker("semantic", {"breakpoint": "median"})
    with pytest.raises(ParameterError, match="amount"):
        breakpoint_threshold(np.array([0.1, 0.2]), "percentile", 120.0)
    with pytest.raises(ParameterError, match="unit must be one of"):
        make_chunker("semantic_max", {"unit": "word"})


# --- semantic_max's search -----------------------------------------------------------------


@pytest.mark.parametrize("unit", ["piece", "sentence"])
@pytest.mark.parametrize("cap", [80, 200, 400])
def test_semantic_max_threshold_is_the_largest_that_fits(unit, cap, context):
    doc = sample_prefix("technical")
    chunker = make_chunker("semantic_max", {"chunk_size": cap, "unit": unit})
    chunker.context = context
    counter = SpanCounter(chunker.tokenizer, doc.text)
    curve = chunker.distance_curve(doc, counter)
    chunks = chunker.chunk(doc, context).chunks
    assert max(c.tokens for c in chunks) <= cap
    units, d = curve.units, curve.distances
    higher = d[d > curve.threshold]
    if higher.size:  # one step up (cutting one distance value less) some group no longer fits
        forced = np.zeros(d.size, dtype=bool)
        forced[list(curve.forced)] = True
        t = higher.min()
        groups = [(a, b) for a, b in unit_groups(len(units), np.flatnonzero((d > t) | forced)) if b > a]
        assert max(counter.count(units[a][0], units[b][1]) for a, b in groups) > cap


def test_semantic_max_isolates_a_sentence_longer_than_the_cap():
    text = "Short one. " + "Very long sentence " * 30 + "ends here. Another short one. And the last."
    counter = SpanCounter(get_tokenizer("cl100k"), text)
    doc = _doc(text)
    units = [(s.start, s.end) for s in doc.sentences]
    assert forced_cuts(units, counter, 20) == (0, 1)
    # With the long sentence cut off on both sides, the two short ones at the end fit together
    # (no distance needs cutting); without, it pulls the threshold under every distance.
    distances = np.array([0.1, 0.1, 0.9])
    assert capped_threshold(units, distances, counter, 20, (0, 1)) == pytest.approx(0.9)
    assert capped_threshold(units, distances, counter, 20) == -np.inf


# --- cluster: the DP against brute force -------------------------------------------------------


def reference_objective(vectors: np.ndarray, segments) -> float:
    """The reference code's reward: the mean-centered similarity matrix with a zero diagonal, summed per block."""
    m = vectors @ vectors.T
    mean = np.mean(m[np.triu_indices(m.shape[0], k=1)])
    m = m - mean
    np.fill_diagonal(m, 0)
    return float(sum(np.sum(m[a : b + 1, a : b + 1]) for a, b in segments))


def all_segmentations(n: int):
    for cuts in itertools.product([False, True], repeat=n - 1):
        segs, a = [], 0
        for i, c in enumerate(cuts):
            if c:
                segs.append((a, i))
                a = i + 1
        segs.append((a, n - 1))
        yield segs


@pytest.mark.parametrize("seed", range(40))
def test_cluster_dp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    vectors = rng.normal(size=(n, 5))
    if seed % 4 == 0:
        vectors[n // 2 :] += 3.0  # two clear topics
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    width = int(rng.integers(1, n + 1))
    allowed = rng.random((n, width)) < 0.8 if seed % 2 else np.ones((n, width), dtype=bool)
    allowed[:, 0] = True

    def ok(segs):
        return all(b - a < width and allowed[b, b - a] for a, b in segs)

    best = max(reference_objective(vectors, s) for s in all_segmentations(n) if ok(s))
    got = cluster_segmentation(vectors, allowed)
    assert ok(got)
    assert [a for a, _b in got][0] == 0 and got[-1][1] == n - 1
    assert all(got[k][1] + 1 == got[k + 1][0] for k in range(len(got) - 1))
    assert reference_objective(vectors, got) == pytest.approx(best, abs=1e-9)


def reference_segmentation(vectors: np.ndarray, max_cluster_size: int):
    """The reference code's ``_optimal_segmentation``, transcribed: ``(clusters, dp)``."""
    matrix = vectors @ vectors.T
    matrix = matrix - np.mean(matrix[np.triu_indices(matrix.shape[0], k=1)])
    np.fill_diagonal(matrix, 0)
    n = matrix.shape[0]
    dp = np.zeros(n)
    segmentation = np.zeros(n, dtype=int)
    for i in range(n):
        for size in range(1, max_cluster_size + 1):
            if i - size + 1 >= 0:
                reward = np.sum(matrix[i - size + 1 : i + 1, i - size + 1 : i + 1])
                if i - size >= 0:
                    reward += dp[i - size]
                if reward > dp[i]:
                    dp[i] = reward
                    segmentation[i] = i - size + 1
    clusters, i = [], n - 1
    while i >= 0:
        clusters.append((int(segmentation[i]), i))
        i = segmentation[i] - 1
    return clusters[::-1], dp


@pytest.mark.parametrize("seed", range(30))
def test_cluster_dp_matches_the_reference_code_where_its_recursion_is_sound(seed):
    rng = np.random.default_rng(100 + seed)
    n, k = int(rng.integers(3, 30)), int(rng.integers(1, 9))
    vectors = rng.normal(size=(n, 8)) + np.repeat(rng.normal(size=(3, 8)) * 2, -(-n // 3), axis=0)[:n]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ref, dp = reference_segmentation(vectors, k)
    got = cluster_segmentation(vectors, np.ones((n, k), dtype=bool))
    assert reference_objective(vectors, got) >= reference_objective(vectors, ref) - 1e-9
    if all(b - a < k for a, b in ref) and (dp[1:] > 0).all():
        assert got == ref


def test_cluster_groups_two_obvious_topics(uncached):
    bread = "Bread is made from flour, water, salt and yeast, and the dough must rest before it is shaped. "
    rain = "Rain fell all night over the valley and by morning the river had flooded the low fields. "
    doc = _doc(bread * 4 + rain * 4)
    chunks = make_chunker("cluster", {"max_chunk_size": 200, "piece_size": 25}).chunk(doc, uncached).chunks
    assert [c.text.count("Bread") and c.text.count("Rain") for c in chunks] == [0] * len(chunks)


def test_cluster_allowed_mask_uses_real_counts():
    text = "alpha beta. gamma delta. epsilon zeta. eta theta."
    counter = SpanCounter(get_tokenizer("words"), text)
    pieces = piece_spans(text, counter, 3)
    assert [text[s:e] for s, e in pieces] == ["alpha beta", ". gamma delta", ". epsilon zeta", ". eta theta", "."]
    allowed = allowed_windows(pieces, counter, 7)
    assert allowed.shape == (5, 5)  # every piece count sums to 12 <= 2 x 7: the band holds all chunks
    for i in range(len(pieces)):
        for w in range(allowed.shape[1]):
            if w <= i:
                real = counter.count(pieces[i - w][0], pieces[i][1])
                assert allowed[i, w] == (w == 0 or real <= 7)


# --- the pieces of the curve ------------------------------------------------------------------


def test_window_spans_and_distances():
    units = [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert window_spans(units, 0) == units
    assert window_spans(units, 1) == [(0, 5), (0, 8), (3, 11), (6, 11)]
    assert window_spans(units, 5) == [(0, 11)] * 4
    v = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    np.testing.assert_allclose(consecutive_distances(v), [1.0, 0.0])


def test_semantic_distances_is_the_curve_the_chunker_cuts_on(context):
    doc = sample_prefix("narrative")
    curve = semantic_distances(doc, context, buffer_size=1, breakpoint="percentile", amount=90)
    assert len(curve.units) == len(doc.sentences) and curve.distances.shape == (len(doc.sentences) - 1,)
    assert curve.threshold == pytest.approx(np.percentile(curve.distances, 90))
    chunks = make_chunker("semantic", {"amount": 90}).chunk(doc, context).chunks
    assert [c.end for c in chunks[:-1]] == [curve.units[i][1] for i in curve.breakpoints]


# --- cache ------------------------------------------------------------------------------------


def test_cached_rerun_and_threshold_changes_make_no_embedder_call(embedder, tmp_path):
    doc = sample_prefix("release-notes")
    cache = OutputCache(tmp_path / "cache")
    first = CountingEmbedder(embedder)
    runs = [("semantic", {}), ("semantic_max", {"chunk_size": 100}), ("cluster", {"max_chunk_size": 100})]
    results = [make_chunker(n, p).chunk(doc, ModelContext(embedder=first, _cache=cache)) for n, p in runs]
    assert first.calls == 3

    second = CountingEmbedder(embedder)
    again = [make_chunker(n, p).chunk(doc, ModelContext(embedder=second, _cache=cache)) for n, p in runs]
    assert second.calls == 0
    assert [r.chunks for r in again] == [r.chunks for r in results]

    # New thresholds and caps reuse the same embeddings, and a context with no embedder loaded stays so.
    lazy = ModelContext(_cache=cache)
    for name, params in [("semantic", {"breakpoint": "std", "amount": 1.0}), ("semantic", {"max_tokens": 30}),
                         ("semantic_max", {"chunk_size": 60}), ("cluster", {"max_chunk_size": 60})]:
        make_chunker(name, params).chunk(doc, lazy)
    assert lazy.embedder is None


# --- registry and CLI --------------------------------------------------------------------------


def test_registry_describes_the_semantic_chunkers():
    specs = {s["name"]: s for s in chunker_specs()}
    for name in ("semantic", "semantic_max", "cluster"):
        assert REGISTRY[name].needs == ("embedder",)
        assert specs[name]["family"] == "semantic"
        assert specs[name]["needs"] == ["embedder"]


_CLI = (
    "import sys\n"
    "import backend.chunkers.semantic\n"
    "from backend.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "print('torch imported:', 'torch' in sys.modules, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def test_cli_chunk_semantic_through_the_registry(tmp_path, embedder, monkeypatch, capsys):
    path = tmp_path / "topics.txt"
    path.write_text(TOPICS, encoding="utf-8")
    cache_dir = tmp_path / "cache"
    args = ("chunk", str(path), "--chunker", "semantic", "--max_tokens", "40", "--embedder", "default")
    proc = run_cli(*args, cache_dir=cache_dir, code=_CLI)
    got = records(proc)
    doc = _doc(TOPICS)
    expected = make_chunker("semantic", {"max_tokens": 40}).chunk(doc, ModelContext(embedder=embedder, use_cache=False))
    assert [(r["start"], r["end"], r["tokens"]) for r in got] == [(c.start, c.end, c.tokens) for c in expected]
    assert all(r["text"] == TOPICS[r["start"] : r["end"]] for r in got)
    assert b"torch imported: True" in proc.stderr

    rerun = run_cli(*args, cache_dir=cache_dir, code=_CLI)
    assert records(rerun) == got
    assert b"torch imported: False" in rerun.stderr  # the embeddings came from the cache

    # The cap through --param: what the CLI prints, so in this process (run_cli's environment), on the
    # embedder already loaded here rather than a third start-up that imports torch and loads MiniLM again.
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("CHUNKLAB_DEVICE", "cpu")
    cluster = records(run_main("chunk", str(path), "--chunker", "cluster", "--param", "max_chunk_size=60"))
    assert cluster and all(r["tokens"] <= 60 for r in cluster)


def test_cli_bad_embedder_is_a_one_line_error(tmp_path):
    path = tmp_path / "topics.txt"
    path.write_text(TOPICS, encoding="utf-8")
    # In this process (run_cli without code: main, as `python -m backend` calls it); a real process's exit code
    # and stderr are checked by test_cli_chunk_semantic_through_the_registry above.
    proc = run_cli("chunk", str(path), "--chunker", "cluster", "--embedder", str(tmp_path / "nope"),
                   cache_dir=tmp_path / "cache")
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines()[0].startswith("error: embedder folder")


def test_cli_chunkers_lists_them(tmp_path):
    proc = run_cli("chunkers", cache_dir=tmp_path)  # in this process, as above
    names = {s["name"] for s in json.loads(proc.stdout)}
    assert {"semantic", "semantic_max", "cluster"} <= names
