"""Anytime estimates of BC, CS and DS (backend/metrics/estimate.py, quality.py, scores.py): coverage, exactness.

The statistics tests score a bundled sample with a scripted deterministic scorer (NLLs from a
fixed function of the texts: the share of the continuation's words found in the context) and a
bag-of-words embedder, so the exact values are known and 50 seeded samples are cheap. One test
runs the real bundled model.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from backend.chunkers import make_chunker
from backend.errors import Cancelled
from backend.metrics.estimate import Estimate, QualityEstimates, degree_entropy_estimate, stratified_order
from backend.metrics.formulas import (
    bc_estimate,
    boundary_clarity,
    chunk_stickiness,
    cs_estimate,
    dissimilarity,
    ds_estimate,
)
from backend.metrics.report import QualitySettings, quality_row
from backend.metrics.scores import (
    batch_sizes,
    cached_sample_table,
    node_pairs,
    pair_table,
    quality_report,
    sample_nodes,
    sampled_pair_table,
    sampled_vectors,
    score_chunkings,
)
from backend.models.cache import OutputCache
from backend.models.scorer import load_scorer
from backend.models.types import ModelInfo
from backend.progress import CancelToken, Progress
from backend.samples import load_sample
from tests.support.cli import run_main
from tests.support.quality import chunking_of

SEEDS = range(50)


class WordShareScorer:
    """A scripted scorer: ``nll(q|d) = 3 + 0.002·len(q) - 2.5·(share of q's words that occur in d)``."""

    info = ModelInfo("word-share", "tests", "lm", 0, "cpu", "float32", "fp-word-share", 4096)

    def __init__(self) -> None:
        self.pairs = 0

    def conditional_nll(self, pairs, *, progress=None):
        out = []
        for d, q in pairs:
            context = set(re.findall(r"[a-z]+", d.lower()))
            words = re.findall(r"[a-z]+", q.lower())
            out.append(3.0 + 0.002 * len(q) - 2.5 * sum(w in context for w in words) / max(len(words), 1))
        self.pairs += len(pairs)
        if progress is not None:
            progress(len(pairs), len(pairs))
        return out


class BagOfWordsEmbedder:
    """A model-free embedder: each word hashed into one of 64 dimensions, counted."""

    info = ModelInfo("bag-of-words", "tests", "embedder", 0, "cpu", "float32", "fp-bag-of-words")

    def embed(self, texts, *, progress=None):
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for k, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                rows[k, int(hashlib.sha256(w.encode()).hexdigest(), 16) % 64] += 1.0
        return rows


def _texts(sample: str, size: int) -> list[str]:
    chunking = make_chunker("sentence", {"chunk_size": size}).chunk(load_sample(sample))
    return [c.text for c in chunking.chunks]


def _covered(estimates: list[Estimate], exact: float) -> int:
    return sum(e.ci_low <= exact <= e.ci_high for e in estimates)


@pytest.fixture(scope="module")
def technical() -> list[str]:
    return _texts("technical", 60)  # 85 chunks


def test_bc_interval_covers_the_exact_value_in_90_percent_of_50_seeded_samples(technical) -> None:
    exact = float(np.mean(boundary_clarity(pair_table(technical, WordShareScorer(), complete=False))))
    estimates = [bc_estimate(sampled_pair_table(technical, WordShareScorer(), units=15, seed=s, complete=False))
                 for s in SEEDS]
    assert all(e.pairs_scored == 15 and e.pairs_total == 84 and e.method == "t" for e in estimates)
    assert _covered(estimates, exact) >= 45  # measured 48 of 50


@pytest.mark.parametrize(("sample", "size", "K", "units"), [("technical", 60, 0.5, 120), ("narrative", 80, 0.5, 150)])
def test_cs_interval_covers_the_exact_value_in_90_percent_of_50_seeded_samples(sample, size, K, units) -> None:
    texts = _texts(sample, size)
    full = pair_table(texts, WordShareScorer(), complete=True, window=3)  # the page's default window
    for graph in ("complete", "incomplete"):
        exact = chunk_stickiness(full, K, graph=graph)
        estimates = [
            cs_estimate(sampled_pair_table(texts, WordShareScorer(), units=units, seed=s, complete=True, window=3,
                                           boundaries=False), K, graph=graph)
            for s in SEEDS
        ]
        assert all(not e.exact and e.method == "ratio" for e in estimates)
        assert all(e.pairs_scored >= units // (2 if graph == "incomplete" else 1) for e in estimates)
        # measured: technical 47 and 50, narrative 49 and 47 of 50
        assert _covered(estimates, exact) >= 45, (sample, graph)


def test_ds_interval_covers_the_exact_value_in_90_percent_of_50_seeded_samples(technical) -> None:
    embedder = BagOfWordsEmbedder()
    exact = float(np.mean(dissimilarity(embedder.embed(technical))))
    estimates = [ds_estimate(sampled_vectors(technical, embedder, units=15, seed=s)) for s in SEEDS]
    assert all(e.pairs_scored >= 15 and not e.exact for e in estimates)
    assert _covered(estimates, exact) >= 45  # measured 48 of 50


def test_a_sample_of_every_unit_is_the_exact_value(technical) -> None:
    texts = technical[:12]
    full = pair_table(texts, WordShareScorer(), complete=True, window=2)
    everything = sampled_pair_table(texts, WordShareScorer(), units=10_000, seed=3, complete=True, window=2)
    assert not everything.partial and everything.sample is None
    np.testing.assert_array_equal(everything.cond, full.cond)
    settings = QualitySettings(K=0.5, window=2)
    assert quality_row([1] * 12, table=everything, settings=settings).to_json() == \
        quality_row([1] * 12, table=full, settings=settings).to_json()


def test_stars_holding_every_pair_give_the_exact_cs(technical) -> None:
    texts = technical[:10]
    full = pair_table(texts, WordShareScorer(), complete=True, window=2)
    order = stratified_order(10, 0)
    skip = order[-1]
    # Every chunk but one drawn: the others' stars hold all its pairs, so CS is exact (not a ratio estimate).
    nearly = sampled_pair_table(texts, WordShareScorer(), units=10_000, seed=0, complete=True, window=2,
                                boundaries=False)
    assert not nearly.partial  # every chunk drawn: the full table
    drawn = replace(nearly, partial=True, sample=tuple(v for v in order if v != skip))
    for graph in ("complete", "incomplete"):
        got = cs_estimate(drawn, 0.5, graph=graph)
        assert got.exact and got.method == "exact"
        assert got.estimate == chunk_stickiness(full, 0.5, graph=graph)


def test_sample_nodes_and_their_pairs_are_pinned() -> None:
    assert stratified_order(8, 0)[:4] == sample_nodes(8, 4, 0, complete=False)[:4]
    assert node_pairs(6, 0, window=2) == [(0, 1), (0, 2), (1, 0), (2, 0)]
    assert node_pairs(6, 5, window=None)[:2] == [(5, 0), (5, 1)] and len(node_pairs(6, 5)) == 10
    assert batch_sizes(10, 4) == [4, 4, 2] and batch_sizes(0, 3) == []


def test_degree_entropy_estimate_edge_cases() -> None:
    # No kept edge seen: 0, with an upper end from the rule of three (3/12 of 108 other pairs → 27 edges → log2 20).
    none = degree_entropy_estimate([0, 0, 0], 20, 12, 120)
    assert (none.estimate, none.ci_low, none.ci_high) == (0.0, 0.0, pytest.approx(math.log2(20)))
    one = degree_entropy_estimate([3], 8, 5, 40)  # one node: no spread, the interval is [0, log2 n]
    assert (one.ci_low, one.ci_high) == (0.0, 3.0)
    uniform = degree_entropy_estimate([2, 2, 2, 2], 16, 20, 100)  # every degree equal: log2 16, no spread
    assert uniform.estimate == pytest.approx(4.0) and uniform.ci_high == pytest.approx(4.0)
    assert degree_entropy_estimate([], 5, 0, 20).estimate is None


def test_the_job_publishes_narrowing_estimates_and_ends_with_the_exact_tables(tmp_path, technical) -> None:
    texts = technical[:40]
    chunking = chunking_of(tuple(texts))
    published: list[QualityEstimates] = []
    settings = QualitySettings(K=0.5, window=3)
    run = score_chunkings(
        [chunking], scorer=WordShareScorer(), embedder=BagOfWordsEmbedder, complete=True, window=3,
        cache=OutputCache(tmp_path), progress=Progress(partial=published.append), settings=settings,
    )
    ((table, vectors),) = run.results
    exact = pair_table(texts, WordShareScorer(), complete=True, window=3)
    np.testing.assert_array_equal(table.uncond, exact.uncond)
    np.testing.assert_array_equal(table.cond, exact.cond)
    assert (table.window, table.complete, table.partial) == (exact.window, exact.complete, False)
    scored = [p.estimates[0]["cs_complete"].pairs_scored for p in published]
    assert scored == sorted(scored) and scored[0] < scored[-1] == published[-1].estimates[0]["cs_complete"].pairs_total
    first, last = published[0].estimates[0], published[-1].estimates[0]
    assert not first["bc"].exact and "ds" not in first  # DS comes once the chunks are embedded, after the first batch
    assert all(e.exact for e in last.values()) and set(last) == {"bc", "cs_complete", "cs_incomplete", "ds"}
    # The exact run's report, byte for byte.
    report = quality_row(chunking.token_counts, table=exact, vectors=vectors, settings=settings)
    assert {k: e.to_json() for k, e in last.items()} == {k: e.to_json() for k, e in report.estimates.items()}
    assert published[-1].done == published[-1].total
    widths = [p.estimates[0]["cs_complete"].half_width for p in published[:-1]]
    half = len(widths) // 2
    assert np.mean(widths[half:]) < np.mean(widths[:half])  # the interval narrows as pairs are scored


def test_a_cancelled_job_leaves_a_sample_that_is_read_back(tmp_path, technical) -> None:
    texts = technical[:40]
    cache = OutputCache(tmp_path)
    token = CancelToken()
    seen: list[QualityEstimates] = []

    def cancel_after_two(value) -> None:
        seen.append(value)
        if len(seen) == 2:
            token.cancel()

    with pytest.raises(Cancelled):
        score_chunkings([chunking_of(tuple(texts))], scorer=WordShareScorer(), embedder=None, complete=False,
                        window=None, cache=cache, progress=Progress(cancel=token, partial=cancel_after_two))
    back = cached_sample_table(texts, WordShareScorer.info, complete=False, window=None, cache=cache)
    assert back is not None and back.partial
    assert list(back.sample) == stratified_order(40, 0)[: len(back.sample)]
    assert bc_estimate(back).pairs_scored >= seen[-1].estimates[0]["bc"].pairs_scored
    assert cached_sample_table(texts, WordShareScorer.info, complete=True, window=3, cache=cache) is None


def test_the_real_model_estimate_runs_to_the_exact_value(tmp_path) -> None:
    # Six chunks of about 90 tokens: two boundaries sampled of five, as with longer chunks, at half the model time.
    texts = _texts("narrative", 100)[:6]
    scorer = load_scorer(device="cpu")
    cache = OutputCache(tmp_path)
    sampled = quality_report(texts, [1] * 6, metrics=["bc"], scorer=scorer, cache=cache, pairs=2, seed=1)
    estimate = sampled.estimates["bc"]
    assert (estimate.pairs_scored, estimate.pairs_total, estimate.exact) == (2, 5, False)
    assert estimate.ci_low < estimate.estimate < estimate.ci_high
    published: list[QualityEstimates] = []
    run = score_chunkings([chunking_of(tuple(texts))], scorer=scorer, embedder=None, complete=False, window=None,
                          cache=cache, progress=Progress(partial=published.append))
    # The exact run (every pair through the same cache) gives the job's last estimate, byte for byte.
    exact = quality_report(texts, [1] * 6, metrics=["bc"], scorer=scorer, cache=cache)
    assert published[-1].estimates[0]["bc"] == exact.estimates["bc"] and exact.estimates["bc"].exact
    np.testing.assert_array_equal(run.results[0][0].cond, exact.table.cond)
    # On a fresh cache the model batches the pairs differently: the same values to float32 precision.
    fresh = quality_report(texts, [1] * 6, metrics=["bc"], scorer=scorer, cache=OutputCache(tmp_path / "fresh"))
    assert fresh.values["bc"] == pytest.approx(exact.values["bc"], abs=1e-6)
    assert estimate.ci_low <= fresh.values["bc"] <= estimate.ci_high


@pytest.fixture()
def cli(monkeypatch):
    """``python -m backend metrics ARGS`` in this process (the language model loaded once for the file)."""

    def run(*args: str, cache: Path) -> subprocess.CompletedProcess:
        monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(cache))
        done = run_main("metrics", *args)
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())

    return run


def test_cli_pairs_and_seed_print_estimates_and_an_exact_run_has_width_0(tmp_path, cli) -> None:
    path = tmp_path / "doc.txt"
    # Eight chunks (seven boundaries): more boundaries than the two sampled, fewer for the model to score.
    path.write_text(" ".join(_texts("narrative", 400)[:2]), encoding="utf-8")
    args = (str(path), "--chunker", "sentence", "--param", "chunk_size=120", "--metrics", "bc")
    proc = cli(*args, "--pairs", "2", "--seed", "4", cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    est = out["bc_estimate"]
    assert set(est) == {"estimate", "ci_low", "ci_high", "pairs_scored", "pairs_total", "method"}
    assert est["pairs_scored"] == 2 < est["pairs_total"] == out["chunks"] - 1 and est["method"] == "t"
    assert est["ci_low"] < est["estimate"] == out["bc_mean"] < est["ci_high"]
    assert out["sample"] == {"pairs": 2, "seed": 4} and out["cs_complete_estimate"] is None
    assert sum(x is not None for x in out["bc"]) == 2  # the boundaries not sampled are null
    exact = json.loads(cli(*args, cache=tmp_path / "cache").stdout)["bc_estimate"]
    assert exact["pairs_scored"] == exact["pairs_total"] == est["pairs_total"]
    assert exact["ci_low"] == exact["estimate"] == exact["ci_high"] and exact["method"] == "exact"
    assert est["ci_low"] <= exact["estimate"] <= est["ci_high"]


def test_cli_bad_pairs_and_seed_exit_2_with_one_line(tmp_path, cli) -> None:
    path = tmp_path / "d.txt"
    path.write_text("One sentence. Two sentences.", encoding="utf-8")
    for bad in (["--pairs", "0"], ["--pairs", "many"], ["--seed", "-1"], ["--pairs", "-3"]):
        proc = cli(str(path), "--chunker", "sentence", *bad, cache=tmp_path / "cache")
        assert proc.returncode == 2, (bad, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") <= 1
        assert ("--pairs" if "--pairs" in bad else "--seed") in proc.stderr
