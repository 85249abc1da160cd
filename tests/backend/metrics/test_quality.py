"""MoC's chunk-quality metrics, checked against independent computations from their definitions.

The reference values come straight from the bundled SmolLM2 (one forward pass over the
concatenated token ids of d and q, ``log_softmax``, ``gather``) and the bundled MiniLM
(``SentenceTransformer.encode``), then the formulas of the issue, written out with plain
loops; the backend goes through the scorer's batched, KV-shared conditional path and the
output cache. The document is assembled here from pieces of two samples with a seeded shuffle,
so its chunks are not the samples' own.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.chunkers import make_chunker
from backend.errors import ParameterError
from backend.metrics.cost import estimate_cost
from backend.metrics.formulas import (
    PairTable,
    boundary_clarity,
    chunk_stickiness,
    cs_curve,
    edge_values,
    kept_edges,
    stickiness_edges,
    structural_entropy,
)
from backend.metrics.report import QualitySettings
from backend.metrics.scores import information_support, pair_table, quality_report, required_pairs
from backend.models.cache import OutputCache
from backend.models.embeddings import load_text_embedder
from backend.models.scorer import load_scorer
from backend.samples import load_sample
from backend.text.document import Document
from backend.text.segment import sentence_spans
from tests.support.cli import run_main
from tests.support.counting_scorer import CountingScorer
from tests.support.patching import patch_everywhere

ROOT = Path(__file__).resolve().parents[3]
TOL = 1e-3



@pytest.fixture(scope="module")
def scorer():
    return load_scorer(device="cpu")


@pytest.fixture(scope="module")
def embedder():
    return load_text_embedder("default")


def _unseen_text() -> str:
    """Sentences of two samples, shuffled with a fixed seed: about 260 tokens."""
    rng = random.Random(20261123)
    sents = []
    for name in ("narrative", "technical"):
        text = load_sample(name).text
        sents += [text[s.start : s.end] for s in sentence_spans(text[:3000]) if 30 < s.end - s.start < 220]
    rng.shuffle(sents)
    return " ".join(sents[:12])


@pytest.fixture(scope="module")
def chunks() -> list[str]:
    doc = Document.from_text(_unseen_text())
    chunking = make_chunker("sentence", {"chunk_size": 50}).chunk(doc)
    texts = [c.text for c in chunking.chunks]
    assert 5 <= len(texts) <= 9
    return texts


def _ids(scorer, s: str) -> list[int]:
    return scorer.lm.tokenizer(s, add_special_tokens=False)["input_ids"]


def direct_mean_nll(scorer, d: str, q: str) -> float:
    """Mean NLL of q's tokens after d's, from one plain forward pass."""
    d_ids, q_ids = _ids(scorer, d), _ids(scorer, q)
    x = torch.tensor([d_ids + q_ids])
    with torch.inference_mode():
        logp = torch.log_softmax(scorer.lm.model(x).logits.float(), dim=-1)[0]
    nll = -logp[:-1].gather(-1, x[0, 1:, None]).squeeze(-1).double().numpy()
    return float(nll[len(d_ids) - 1 :].mean())


@pytest.fixture(scope="module")
def direct(scorer, chunks):
    """``(uncond, cond)``: direct mean NLLs, ``cond[(i, j)]`` = chunk j given chunk i."""
    uncond = [direct_mean_nll(scorer, " ", q) for q in chunks]
    cond = {(i, j): direct_mean_nll(scorer, chunks[i], chunks[j]) for i, j in permutations(range(len(chunks)), 2)}
    return uncond, cond


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> OutputCache:
    return OutputCache(tmp_path_factory.mktemp("quality-cache"))


@pytest.fixture(scope="module")
def table(scorer, chunks, cache) -> PairTable:
    return pair_table(chunks, scorer, complete=True, cache=cache)


def reference_cs(uncond, cond, n, K, rule, graph, delta=0) -> float:
    """Chunk Stickiness written out from eq. 2 and 3 with plain loops."""
    edges = []
    for i in range(n):
        for j in range(n):
            if i == j or (graph == "incomplete" and not j - i > delta):
                continue
            ppl_q, ppl_qd = math.exp(uncond[j]), math.exp(cond[(i, j)])
            value = (ppl_q - ppl_qd) / ppl_q if rule == "paper" else ppl_qd / ppl_q
            if value > K:
                edges.append((i, j))
    if not edges:
        return 0.0
    degree = [0] * n
    for i, j in edges:
        degree[i] += 1
        degree[j] += 1
    m = len(edges)
    return -sum((d / (2 * m)) * math.log2(d / (2 * m)) for d in degree if d > 0)


def test_pair_table_equals_direct_forward_passes(table, direct, chunks):
    uncond, cond = direct
    assert np.allclose(table.uncond, uncond, atol=TOL)
    n = len(chunks)
    for i in range(n):
        assert math.isnan(table.cond[i, i])
        for j in range(n):
            if i != j:
                assert abs(table.cond[i, j] - cond[(i, j)]) < TOL, (i, j)


def test_boundary_clarity_both_modes(table, direct, chunks):
    uncond, cond = direct
    n = len(chunks)
    ref = [cond[(i, i + 1)] / uncond[i + 1] for i in range(n - 1)]
    paper = [math.exp(cond[(i, i + 1)]) / math.exp(uncond[i + 1]) for i in range(n - 1)]
    assert np.allclose(boundary_clarity(table, "reference"), ref, atol=TOL)
    assert np.allclose(boundary_clarity(table, "paper"), paper, atol=TOL)
    # The reference's published scale: most boundaries are a little under 1 (context helps).
    assert all(0 < b < 2 for b in ref)


def _thresholds(table, rule):
    """K values in the middle of wide gaps between the actual edge values, plus the ends.

    Never close to a value: the backend's batched scores and the direct ones differ by ~1e-5,
    which must not flip an edge.
    """
    vals = np.sort(edge_values(table, rule)[np.isfinite(edge_values(table, rule))])
    mids = [(a + b) / 2 for a, b in zip(vals[:-1], vals[1:]) if b - a > 2e-3]
    picks = [vals[0] - 1, mids[len(mids) // 4], mids[len(mids) // 2], mids[-2], mids[-1], vals[-1] + 1]
    return [float(k) for k in picks]


@pytest.mark.parametrize("rule", ["paper", "reference"])
def test_chunk_stickiness_equals_definition(table, direct, chunks, rule):
    uncond, cond = direct
    n = len(chunks)
    seen = set()
    for K in _thresholds(table, rule):
        for graph, delta in (("complete", 0), ("incomplete", 0), ("incomplete", 1)):
            got = chunk_stickiness(table, K, rule=rule, graph=graph, delta=delta)
            want = reference_cs(uncond, cond, n, K, rule, graph, delta)
            assert abs(got - want) < TOL, (K, graph, delta)
            seen.add(round(want, 6))
    assert len(seen) >= 3  # the thresholds really produce different graphs


def test_dissimilarity_equals_cosine_of_embeddings(embedder, chunks):
    report = quality_report(chunks, [1] * len(chunks), metrics=["ds"], embedder=embedder)
    raw = embedder._model.encode(chunks, convert_to_numpy=True)
    ref = [
        1 - float(np.dot(raw[i], raw[i + 1]) / (np.linalg.norm(raw[i]) * np.linalg.norm(raw[i + 1])))
        for i in range(len(chunks) - 1)
    ]
    assert np.allclose(report.boundaries["ds"], ref, atol=TOL)
    assert report.values["ds"] == pytest.approx(np.mean(ref), abs=TOL)


def test_changing_K_or_rule_calls_no_model(scorer, chunks, cache, table):
    counting = CountingScorer(scorer)
    again = pair_table(chunks, counting, complete=True, cache=cache)  # every pair cached by the fixture
    assert counting.pairs == 0
    assert np.array_equal(np.nan_to_num(again.cond, nan=-1), np.nan_to_num(table.cond, nan=-1))
    for K in (-1.0, 0.0, 0.5, 0.8, 1.0):
        for rule in ("paper", "reference"):
            report = quality_report(chunks, [1] * len(chunks), metrics=["bc", "cs"], scorer=counting,
                                    settings=QualitySettings(K=K, cs_rule=rule), cache=cache)
            assert report.values["cs_complete"] == pytest.approx(chunk_stickiness(table, K, rule=rule))
    assert counting.pairs == 0


def test_window_scores_only_near_pairs(scorer, chunks, cache, table):
    n = len(chunks)
    counting = CountingScorer(scorer)
    windowed = pair_table(chunks, counting, complete=True, window=1, cache=cache)
    assert counting.pairs == 0  # a subset of the cached pairs
    for i in range(n):
        for j in range(n):
            if i != j and abs(i - j) <= 1:
                assert windowed.cond[i, j] == table.cond[i, j]
            else:
                assert math.isnan(windowed.cond[i, j])
    assert len(required_pairs(n, window=1)) == 2 * (n - 1)
    # Unscored pairs are never edges: at a K every scored pair passes, only the window's remain.
    edges = kept_edges(edge_values(windowed, "reference"), -1e9)
    assert sorted(edges) == required_pairs(n, window=1)


def test_information_support_is_answer_nll_given_joined_chunks(scorer, chunks, cache):
    answer = chunks[2][:80]
    got = information_support([chunks[0], chunks[1]], answer, scorer, cache=cache)
    want = direct_mean_nll(scorer, chunks[0] + "\n\n" + chunks[1], answer)
    assert abs(got - want) < TOL
    assert information_support([chunks[2]], answer, scorer, cache=cache) < got  # the answer's own chunk supports it
    with pytest.raises(ParameterError):
        information_support([chunks[0]], "", scorer)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)).filter(lambda e: e[0] != e[1]), max_size=20))
def test_structural_entropy_matches_formula(edges):
    n = 7
    got = structural_entropy(edges, n)
    if not edges:
        assert got == 0.0
        return
    deg = np.zeros(n)
    for i, j in edges:
        deg[i] += 1
        deg[j] += 1
    p = deg[deg > 0] / (2 * len(edges))
    assert got == pytest.approx(float(-(p * np.log2(p)).sum()))
    assert 0 <= got <= math.log2(n) + 1e-9  # bounded by a uniform degree distribution


def test_stickiness_edges_and_cs_curve_are_pinned():
    # Chunk 0 makes chunk 1 easier and chunk 2 chunk 0 (edge 1 - e⁻¹ ≈ 0.63); every other pair is harder.
    table = PairTable(uncond=np.array([2.0, 2.0, 2.0]),
                      cond=np.array([[np.nan, 1.0, 3.0], [3.0, np.nan, 3.0], [1.0, 3.0, np.nan]]))
    assert [stickiness_edges(table, 0.5), stickiness_edges(table, 0.5, graph="incomplete"),
            stickiness_edges(table, 0.7)] == [[(0, 1), (2, 0)], [(0, 1)], []]
    assert cs_curve(table, [0.0, 0.5, 0.7]) == ([1.5, 1.5, 0.0], [1.0, 1.0, 0.0])


def test_estimate_cost_counts_pairs_and_tokens():
    assert estimate_cost([10, 20, 30], complete=False) == {"pairs": 2 + 3, "tokens": (10 + 20) + (20 + 30) + (11 + 21 + 31)}
    full = estimate_cost([10] * 5)
    assert full["pairs"] == 5 * 4 + 5
    assert estimate_cost([10] * 5, window=1)["pairs"] == 2 * 4 + 5


def test_bad_options_are_parameter_errors(table):
    with pytest.raises(ParameterError, match="bc_mode"):
        boundary_clarity(table, "ppl")
    with pytest.raises(ParameterError, match="cs_rule"):
        edge_values(table, "strict")
    with pytest.raises(ParameterError, match="unknown metric"):
        quality_report(["a", "b"], [1, 1], metrics=["iou"])
    with pytest.raises(ParameterError, match="language model"):
        quality_report(["a", "b"], [1, 1], metrics=["bc"])
    with pytest.raises(ParameterError, match="window"):
        required_pairs(4, window=0)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "backend", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def _main(*args: str) -> subprocess.CompletedProcess:
    """``python -m backend ARGS`` in this process (the model loaded once for the file), output as text."""
    done = run_main(*args)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def test_cli_metrics_equals_independent_computation(tmp_path, scorer, chunks, direct, monkeypatch, capsys):
    # In this process, on an empty cache of its own: the CLI scores every pair with the model. Its chunks
    # (chunk_size=50, not the default) are the fixture's, so the direct forward passes are the fixture's.
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", str(tmp_path / "cache"))
    text = _unseen_text()
    path = tmp_path / "unseen.txt"
    path.write_text(text, encoding="utf-8")
    proc = _main("metrics", str(path), "--chunker", "sentence", "--param", "chunk_size=50", "--K", "0.1",
                 "--cs-rule", "reference", "--bc-mode", "paper")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("chunks", "mean_tokens", "bc_mean", "bc", "cs_complete", "cs_incomplete", "ds_mean", "ds", "K",
                "bc_mode", "cs_rule"):
        assert key in out
    chunking = make_chunker("sentence", {"chunk_size": 50}).chunk(Document.from_text(text))
    texts = [c.text for c in chunking.chunks]
    assert texts == chunks
    n = len(texts)
    assert out["chunks"] == n >= 3
    assert out["mean_tokens"] == pytest.approx(np.mean(chunking.token_counts))
    uncond, cond = direct
    bc = [math.exp(cond[(i, i + 1)] - uncond[i + 1]) for i in range(n - 1)]
    assert np.allclose(out["bc"], bc, atol=TOL) and out["bc_mean"] == pytest.approx(np.mean(bc), abs=TOL)
    assert out["cs_complete"] == pytest.approx(reference_cs(uncond, cond, n, 0.1, "reference", "complete"), abs=TOL)
    assert out["cs_incomplete"] == pytest.approx(reference_cs(uncond, cond, n, 0.1, "reference", "incomplete"), abs=TOL)
    assert len(out["ds"]) == n - 1 and (out["K"], out["bc_mode"], out["cs_rule"]) == (0.1, "paper", "reference")

    # A rerun with another K and rule is served from the cache: the model is never loaded.
    from backend.cli.main import main

    def no_loading(*_a, **_k):
        raise AssertionError("the model was loaded although every pair is cached")

    patch_everywhere(monkeypatch, "backend.models.scorer.load_scorer", no_loading)
    capsys.readouterr()
    assert main(["metrics", str(path), "--chunker", "sentence", "--param", "chunk_size=50", "--K", "0.02",
                 "--metrics", "bc,cs"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cs_complete"] == pytest.approx(reference_cs(uncond, cond, n, 0.02, "paper", "complete"), abs=TOL)
    assert again["ds"] is None and again["ds_mean"] is None


def test_cli_metrics_bad_arguments_exit_2(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("One sentence. Two sentences.", encoding="utf-8")
    # The first as a real process (its exit status), the others in this process (no interpreter start each).
    for k, bad in enumerate((["--metrics", "bc,iou"], ["--K", "nan"], ["--window", "0"], ["--bc-mode", "x"],
                             ["--match-length", "-3"])):
        proc = (_cli if k == 0 else _main)("metrics", str(path), "--chunker", "sentence", *bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") <= 1
    proc = _cli("metrics", str(tmp_path / "missing.txt"), "--chunker", "sentence")
    assert proc.returncode == 1 and "no such file" in proc.stderr


def test_cli_metrics_of_a_single_chunk_needs_no_model(tmp_path, monkeypatch, capsys):
    from backend.cli.main import main

    def no_loading(*_a, **_k):
        raise AssertionError("a single chunk has no pair to score")

    patch_everywhere(monkeypatch, "backend.models.scorer.load_scorer", no_loading)
    path = tmp_path / "one.txt"
    path.write_text("Just one short sentence here.", encoding="utf-8")
    capsys.readouterr()
    assert main(["metrics", str(path), "--chunker", "sentence"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["chunks"], out["bc"], out["ds"], out["cs_complete"], out["cs_incomplete"]) == (1, [], [], 0.0, 0.0)
    assert out["bc_mean"] is None and out["pairs"] == 0
