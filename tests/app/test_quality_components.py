"""The Quality page's pure builders (components/quality.py) and the match-lengths helpers (components/match.py).

The pair scores come from a small deterministic scorer (a stand-in with the Scorer
protocol's shape: no model to load) behind a wrapper that counts its calls, so the tests
can prove that everything after scoring — K, rules, graphs, the table — calls no model.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from backend.models.cache import OutputCache
from backend.chunkers import run_chunker
from backend.chunking import ChunkerConfig, Chunk, Chunking
from backend.text.document import Document
from backend.chunkers.match_length import MatchResult
from backend.models.types import ModelInfo
from backend.metrics.quality import (
    PairTable,
    boundary_clarity,
    chunk_stickiness,
    dissimilarity,
    estimate_cost,
    kept_edges,
    edge_values,
    pair_table,
)
from backend.models.embeddings import embeddings_key
from components.match import MatchOutcome, match_rows, run_matches
from components.quality import (
    QualityData,
    bc_figure,
    best_cells,
    cached_pair_table,
    cached_vectors,
    cost_estimate,
    cs_curve,
    cs_k_figure,
    figure_html,
    format_seconds,
    quality_table,
    score_chunkings,
    stickiness_figure,
    styled_table,
    table_csv,
)

TEXTS = (
    "The cat sat on the mat.",
    "It was warm by the <b>fire</b> & quiet.",
    "Stock prices fell sharply on Monday.",
    "Investors worried about inflation.",
    "The cat went back to sleep.",
)


class LengthScorer:
    """A deterministic stand-in scorer: a pair's "NLL" depends on the two texts' shared words."""

    info = ModelInfo("length-scorer", "tests", "lm", 0, "cpu", "float32", "fp-length-scorer", 4096)

    def conditional_nll(self, pairs, *, progress=None):
        out = []
        for d, q in pairs:
            shared = len(set(d.lower().split()) & set(q.lower().split()))
            out.append(2.0 + 0.01 * len(q) - 0.4 * shared)
        if progress is not None:
            progress(len(pairs), len(pairs))
        return out


class Counting:
    """Wraps a scorer and counts its model calls."""

    def __init__(self, inner) -> None:
        self.inner, self.info, self.calls = inner, inner.info, 0

    def conditional_nll(self, pairs, *, progress=None):
        self.calls += 1
        return self.inner.conditional_nll(pairs, progress=progress)


def _chunking(texts=TEXTS, name: str = "fixed") -> Chunking:
    chunks, pos = [], 0
    for i, t in enumerate(texts):
        chunks.append(Chunk(i, pos, pos + len(t), t, len(t.split())))
        pos += len(t) + 1
    return Chunking(ChunkerConfig(name, (("chunk_size", 10),)), tuple(chunks), 0.0, "doc", pos)


def _table(seed: int, n: int = 6) -> PairTable:
    rng = np.random.default_rng(seed)
    uncond = rng.uniform(2.0, 4.0, n)
    cond = uncond[None, :] + rng.uniform(-1.5, 0.3, (n, n))
    np.fill_diagonal(cond, np.nan)
    return PairTable(uncond=uncond, cond=cond)


def _data(tag: str, seed: int, n: int = 6, vectors: bool = True) -> QualityData:
    texts = tuple(f"chunk {tag}{i} <i>text</i> & more" for i in range(n))
    vec = np.random.default_rng(seed + 100).normal(size=(n, 8)) if vectors else None
    return QualityData(tag, ChunkerConfig(f"c{tag}"), _chunking(texts), _table(seed, n), vec, complete=True)


# --- the table -----------------------------------------------------------------------------------------


def test_table_values_equal_the_backend_metrics() -> None:
    datas = [_data("A", 1), _data("B", 2)]
    table = quality_table(datas, K=0.3, bc_mode="paper", cs_rule="reference", delta=1)
    for d in datas:
        row = table.loc[d.tag]
        assert row["chunks"] == d.n
        assert row["mean_tokens"] == pytest.approx(np.mean(d.chunking.token_counts))
        assert row["bc"] == pytest.approx(np.mean(boundary_clarity(d.table, "paper")))
        assert row["cs_complete"] == pytest.approx(chunk_stickiness(d.table, 0.3, rule="reference"))
        assert row["cs_incomplete"] == pytest.approx(
            chunk_stickiness(d.table, 0.3, rule="reference", graph="incomplete", delta=1)
        )
        assert row["ds"] == pytest.approx(np.mean(dissimilarity(d.vectors)))


def test_bc_only_table_has_no_cs() -> None:
    d = _data("A", 1)
    bc_only = QualityData(d.tag, d.config, d.chunking, d.table, None, complete=False)
    row = quality_table([bc_only]).loc["A"]
    assert math.isfinite(row["bc"])
    assert math.isnan(row["cs_complete"]) and math.isnan(row["cs_incomplete"]) and math.isnan(row["ds"])


def test_best_cells_take_the_max_bc_and_the_min_cs() -> None:
    table = pd.DataFrame(
        {
            "configuration": ["A", "B", "C"],
            "chunker": ["a", "b", "c"],
            "chunks": [3, 9, 5],
            "mean_tokens": [10.0, 90.0, 50.0],
            "bc": [0.80, 0.90, 0.85],
            "cs_complete": [2.1, 2.4, 1.9],
            "cs_incomplete": [1.2, 1.0, 1.0],
            "ds": [0.3, float("nan"), 0.5],
        },
        index=["A", "B", "C"],
    )
    best = best_cells(table)
    assert best == {"bc": ["B"], "cs_complete": ["C"], "cs_incomplete": ["B", "C"], "ds": ["C"]}
    styler = styled_table(table)
    styler._compute()  # fills styler.ctx: (row, column) positions → CSS
    shown = list(table.drop(columns=["configuration"]).columns)
    marked = {(table.index[r], shown[c]) for (r, c), css in styler.ctx.items() if css}
    assert marked == {("B", "bc"), ("C", "cs_complete"), ("B", "cs_incomplete"), ("C", "cs_incomplete"), ("C", "ds")}
    assert "chunks" not in {c for _, c in marked} and "mean_tokens" not in {c for _, c in marked}


def test_an_all_missing_column_has_no_best() -> None:
    table = quality_table([QualityData("A", ChunkerConfig("x"), _chunking(), None, None)])
    assert best_cells(table)["bc"] == [] and best_cells(table)["ds"] == []
    styled_table(table).to_html()  # renders with "—" for the missing values


def test_csv_has_a_row_per_configuration_and_the_settings() -> None:
    table = quality_table([_data("A", 1), _data("B", 2)], K=0.5)
    csv = table_csv(table, K=0.5, bc_mode="reference", cs_rule="paper", delta=0, window=3)
    back = pd.read_csv(__import__("io").StringIO(csv))
    assert list(back["configuration"]) == ["A", "B"]
    assert set(back["K"]) == {0.5} and set(back["window"]) == {3} and set(back["cs_rule"]) == {"paper"}


# --- cost ----------------------------------------------------------------------------------------------


def test_cost_is_the_sum_of_the_backend_estimates() -> None:
    counts = [[10, 20, 30], [5, 5, 5, 5]]
    got = cost_estimate(counts, complete=True, window=1, tokens_per_s=100.0)
    want = [estimate_cost(c, complete=True, window=1) for c in counts]
    assert got["pairs"] == sum(w["pairs"] for w in want)
    assert got["tokens"] == sum(w["tokens"] for w in want)
    assert got["seconds"] == pytest.approx(got["tokens"] / 100.0)
    assert format_seconds(42) == "42 s" and format_seconds(390) == "6.5 min" and format_seconds(8000) == "2.2 h"


# --- scoring once, then no model call -------------------------------------------------------------------


def test_scores_once_then_k_rule_and_graph_changes_call_no_model(tmp_path) -> None:
    cache = OutputCache(tmp_path / "cache")
    scorer = Counting(LengthScorer())
    ch = _chunking()
    ((table, vectors),) = score_chunkings([ch], scorer=scorer, embedder=None, complete=True, window=None, cache=cache)
    assert scorer.calls == 1 and vectors is None
    direct = pair_table(list(TEXTS), LengthScorer(), complete=True)
    np.testing.assert_allclose(table.cond, direct.cond)
    np.testing.assert_allclose(table.uncond, direct.uncond)
    data = QualityData("A", ch.config, ch, table, None, complete=True)
    for K in (0.0, 0.2, 0.5, 0.8, 1.2):
        for rule in ("paper", "reference"):
            quality_table([data], K=K, cs_rule=rule)
            cs_curve(table, [0.1, 0.5, 0.9], rule=rule)
            for graph in ("complete", "incomplete"):
                stickiness_figure(data, K, "#2563eb", rule=rule, graph=graph)
    bc_figure([data], ["#2563eb"], bc_mode="paper")
    cs_k_figure([data], ["#2563eb"], [0.5, 0.8], 0.8)
    assert scorer.calls == 1
    # A second scoring of the same chunks is served by the cache alone.
    score_chunkings([ch], scorer=scorer, embedder=None, complete=True, window=None, cache=cache)
    assert scorer.calls == 1


class Refusing:
    """A scorer with LengthScorer's identity that refuses to compute (what a page's lookup uses)."""

    info = LengthScorer.info

    def __init__(self) -> None:
        self.calls = 0

    def conditional_nll(self, pairs, *, progress=None):
        self.calls += 1
        raise LookupError("not cached")


class CountingCache(OutputCache):
    """An output cache that counts its lookups."""

    gets = 0

    def get(self, key):
        self.gets += 1
        return super().get(key)


def test_cache_only_lookup_probes_before_reading_every_pair(tmp_path) -> None:
    texts = [f"Chunk {i} talks about thing {i}." for i in range(12)]
    cache = CountingCache(tmp_path)
    with pytest.raises(LookupError):
        cached_pair_table(texts, Refusing(), complete=True, window=None, cache=cache)
    assert cache.gets <= 3  # the first probe missed: not 12 + 132 reads
    scored = pair_table(texts, LengthScorer(), complete=True, cache=cache)
    refusing = Refusing()
    got = cached_pair_table(texts, refusing, complete=True, window=None, cache=cache)
    assert refusing.calls == 0
    np.testing.assert_array_equal(got.cond, scored.cond)
    np.testing.assert_array_equal(got.uncond, scored.uncond)


def test_window_scores_only_near_pairs(tmp_path) -> None:
    ch = _chunking()
    ((table, _),) = score_chunkings(
        [ch], scorer=LengthScorer(), embedder=None, complete=True, window=1, cache=OutputCache(tmp_path)
    )
    n = len(TEXTS)
    scored = {(i, j) for i in range(n) for j in range(n) if np.isfinite(table.cond[i, j])}
    assert scored == {(i, j) for i in range(n) for j in range(n) if i != j and abs(i - j) <= 1}


def test_progress_reaches_the_end_and_vectors_come_from_the_embedder(tmp_path) -> None:
    class Embedder:
        info = ModelInfo("emb", "tests", "embedder", 0, "cpu", "float32", "fp-emb")

        def embed(self, texts, *, progress=None):
            return np.array([[len(t), t.count(" ") + 1.0, 1.0] for t in texts], dtype=np.float32)

    seen = []
    cache = OutputCache(tmp_path)
    chs = [_chunking(), _chunking(TEXTS[:3])]
    out = score_chunkings(
        chs, scorer=LengthScorer(), embedder=Embedder, complete=False, window=None, cache=cache,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen[-1][0] == seen[-1][1]
    assert [v.shape for _, v in out] == [(5, 3), (3, 3)]
    np.testing.assert_allclose(cached_vectors(cache, "fp-emb", list(TEXTS)), out[0][1])
    assert cached_vectors(cache, "fp-other", list(TEXTS)) is None


def test_cached_vectors_read_a_plain_entry(tmp_path) -> None:
    cache = OutputCache(tmp_path)
    vec = np.eye(3, dtype=np.float32)
    cache.put(embeddings_key("fp", ["a", "b", "c"]), {"vectors": vec})
    np.testing.assert_array_equal(cached_vectors(cache, "fp", ["a", "b", "c"]), vec)
    assert cached_vectors(cache, "fp", ["a", "b"]) is None


# --- figures -------------------------------------------------------------------------------------------


def _arcs(fig) -> int:
    xs = fig.data[0].x
    return sum(1 for x in xs if x is None)


@pytest.mark.parametrize("rule", ["paper", "reference"])
@pytest.mark.parametrize("graph", ["complete", "incomplete"])
@pytest.mark.parametrize("K", [-0.5, 0.1, 0.4, 0.9, 2.0])
def test_graph_draws_exactly_the_kept_edges(rule: str, graph: str, K: float) -> None:
    d = _data("A", 7, n=8)
    fig = stickiness_figure(d, K, "#2563eb", rule=rule, graph=graph, delta=1)
    kept = kept_edges(edge_values(d.table, rule), K, graph=graph, delta=1)
    assert _arcs(fig) == len(kept) == fig.layout.meta["edges"]
    degree = np.zeros(d.n)
    for i, j in kept:
        degree[i] += 1
        degree[j] += 1
    hover_degrees = [row[0] for row in fig.data[1].customdata]
    assert hover_degrees == degree.astype(int).tolist()
    if kept:  # node size grows with degree
        sizes = fig.data[1].marker.size
        assert sizes[int(degree.argmax())] == max(sizes)


def test_arcs_of_forward_edges_rise_and_of_backward_edges_fall() -> None:
    table = PairTable(uncond=np.array([2.0, 2.0, 2.0]), cond=np.array([[np.nan, 0.1, 3.0], [3.0, np.nan, 3.0], [0.1, 3.0, np.nan]]))
    d = QualityData("A", ChunkerConfig("x"), _chunking(TEXTS[:3]), table, None, complete=True)
    fig = stickiness_figure(d, 0.5, "#000")
    assert fig.layout.meta["edges"] == 2  # 0→1 (d before q) and 2→0 (d after q)
    ys = [y for y in fig.data[0].y if y is not None]
    assert max(ys) > 0 and min(ys) < 0


def test_hovers_escape_document_text() -> None:
    d = _data("A", 3)
    fig = bc_figure([d], ["#2563eb"])
    hover = " ".join(str(v) for row in fig.data[0].customdata for v in row)
    assert "<i>text</i>" not in hover and "&lt;i&gt;text&lt;/i&gt; &amp; more" in hover
    assert list(fig.data[0].x) == [c.start for c in d.chunking.chunks[1:]]
    graph = stickiness_figure(d, 0.3, "#2563eb")
    nodes = " ".join(str(row[2]) for row in graph.data[1].customdata)
    assert "<i>" not in nodes and "&lt;i&gt;" in nodes


def test_bc_hover_shows_the_end_of_one_chunk_and_the_start_of_the_next() -> None:
    long = ("word " * 50 + "END-OF-FIRST", "START-OF-SECOND " + "word " * 50)
    table = PairTable(uncond=np.array([2.0, 2.0]), cond=np.array([[np.nan, 1.0], [1.0, np.nan]]))
    d = QualityData("A", ChunkerConfig("x"), _chunking(long), table, None)
    (_, tail, head), = bc_figure([d], ["#000"]).data[0].customdata
    assert tail.startswith("…") and tail.endswith("END-OF-FIRST") and len(tail) <= 70
    assert head.startswith("START-OF-SECOND") and head.endswith("…") and len(head) <= 70


def test_cs_against_k_is_one_solid_and_one_dashed_line_per_configuration() -> None:
    datas = [_data("A", 1), _data("B", 2)]
    ks = [0.0, 0.25, 0.5, 0.75, 1.0]
    fig = cs_k_figure(datas, ["#111", "#222"], ks, 0.5, rule="paper")
    assert [t.name for t in fig.data] == ["A complete", "A incomplete", "B complete", "B incomplete"]
    complete, incomplete = cs_curve(datas[0].table, ks)
    assert list(fig.data[0].y) == complete and list(fig.data[1].y) == incomplete
    assert complete == [chunk_stickiness(datas[0].table, k) for k in ks]


def test_graph_exports_as_self_contained_html() -> None:
    page = figure_html(stickiness_figure(_data("A", 1), 0.3, "#2563eb"))
    assert page.lstrip().lower().startswith(("<!doctype html>", "<html")) and page.rstrip().endswith("</html>")
    assert "<script src=" not in page and len(page) > 1_000_000  # plotly.js inlined: opens offline


# --- match lengths -------------------------------------------------------------------------------------


def test_match_rows_report_target_achieved_and_status() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i % 7} at some length." for i in range(60))
    doc = Document.from_text(text, source="m.txt")
    cfg = ChunkerConfig.make("recursive", {"chunk_size": 200, "chunk_overlap": 0})
    cfg = run_chunker(doc, cfg).config
    results = run_matches(doc, [(0, cfg), (1, ChunkerConfig.make("no_such_chunker"))], 60.0)
    assert isinstance(results[0][1], MatchResult) and isinstance(results[1][1], str)
    entries = [{"uid": 0, "tag": "A", "config": cfg}, {"uid": 1, "tag": "B", "config": ChunkerConfig("no_such_chunker")}]
    rows = match_rows(entries, MatchOutcome(doc.id, 60, results))
    a, b = rows
    r = results[0][1]
    assert a["parameter"] == "chunk_size" and a["before"] == "200" and a["after"] == str(r.config.params_dict["chunk_size"])
    assert a["achieved"] == pytest.approx(r.achieved, abs=0.05)
    assert a["status"] == ("within ±5%" if r.within else "closest reachable")
    assert b["status"] and b["achieved"] is None
