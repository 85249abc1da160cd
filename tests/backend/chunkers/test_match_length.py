"""Match lengths: each configuration tuned to a target mean chunk length (±5 %), or the closest reachable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.chunkers.match_length import match_length, mean_length
from backend.chunking import ChunkerConfig
from backend.errors import ParameterError
from backend.models.cache import OutputCache
from backend.models.types import ModelInfo
from backend.samples import load_sample
from tests.support.fake_scores import fake_token_scores

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def doc():
    return load_sample("technical")


@pytest.mark.parametrize(
    "name, params",
    [("recursive", {}), ("fixed_token", {"chunk_overlap": 20}), ("sentence", {}), ("paragraph", {})],
)
@pytest.mark.parametrize("target", [60, 150, 300])
def test_size_chunkers_reach_the_target_or_report_the_closest(doc, name, params, target):
    config = ChunkerConfig.make(name, params)
    result = match_length(doc, config, target)
    achieved = mean_length(result.chunking)
    assert result.achieved == pytest.approx(achieved)
    assert result.chunking.config == result.config
    assert result.within == (abs(achieved / target - 1) <= 0.05)
    spec = type(make_chunker(name, params)).length_parameter()
    if spec is None:
        assert result.parameter is None and result.config == make_chunker(name, params).config
        return
    assert result.parameter == spec.name
    for key, value in params.items():  # the other parameters are kept
        assert result.config.params_dict[key] == value
    if result.within:
        return
    # Not within: no other value of the parameter does better (checked on a grid around it).
    best = abs(achieved / target - 1)
    value = result.config.params_dict[spec.name]
    for other in {max(1, value - 2), max(1, value - 1), value + 1, value + 2, target, 2 * target}:
        if name == "fixed_token" and other <= params.get("chunk_overlap", 0):
            continue
        alt = make_chunker(name, {**params, spec.name: other}).chunk(doc)
        assert abs(mean_length(alt) / target - 1) >= best - 1e-9, other


def test_recursive_hits_common_targets(doc):
    for target in (100, 200, 400):
        result = match_length(doc, ChunkerConfig.make("recursive"), target)
        assert result.within, (target, result.achieved)
        assert result.steps <= 40


class _FakeScorer:
    """Token NLLs from a fixed pseudo-random pattern: a PPL curve with many minima, no model."""

    info = ModelInfo("fake", "", "lm", 0, "cpu", "float32", "fake-match-length")

    def __init__(self) -> None:
        self.calls = 0

    def token_nll(self, text, *, window=None, progress=None):
        self.calls += 1
        return fake_token_scores(text, seed=7, window=window)


def test_ppl_threshold_is_tuned_from_one_scoring_pass(doc, tmp_path):
    scorer = _FakeScorer()
    context = ModelContext(scorer=scorer, _cache=OutputCache(tmp_path))
    coarse = match_length(doc, ChunkerConfig.make("ppl", {"threshold": 0.0}), 120, context=context)
    assert coarse.parameter == "threshold"
    assert coarse.steps > 1
    thresholds = [0.0, 0.5, 1.0, 2.0, 4.0]
    means = [mean_length(make_chunker("ppl", {"threshold": t}).chunk(doc, context)) for t in thresholds]
    assert means == sorted(means)  # longer chunks as the threshold grows: what bisection relies on
    assert means[0] < 120 < means[-1]  # the target is reachable on this curve…
    assert coarse.within and abs(coarse.achieved / 120 - 1) <= 0.05  # …and reached
    assert 0.5 < coarse.config.params_dict["threshold"] < 2.0
    assert scorer.calls == 1  # every step re-chunks the same cached scores


def test_bad_targets_are_parameter_errors(doc):
    for bad in (0, -5, float("nan"), float("inf")):
        with pytest.raises(ParameterError):
            match_length(doc, ChunkerConfig.make("recursive"), bad)
    with pytest.raises(ParameterError):
        match_length(doc, ChunkerConfig.make("recursive"), 100, tolerance=0)


def test_compare_match_length_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "backend", "compare", "sample:technical", "--config", "recursive",
         "--config", "sentence chunk_size=50", "--match-length", "180"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 2
    for row in rows:
        match = row["match"]
        assert match["target"] == 180 and match["parameter"] == "chunk_size"
        assert match["within"] and abs(match["achieved"] / 180 - 1) <= 0.05
        assert match["value"] == match["config"]["params"]["chunk_size"]
    bad = subprocess.run([sys.executable, "-m", "backend", "compare", "sample:technical", "--config", "recursive",
                          "--match-length", "zero"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
