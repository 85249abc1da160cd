"""The ``bc`` objective: trials scored by Boundary Clarity with the bundled SmolLM2, through the output cache.

One module-scoped model load; a cut of the bundled narrative sample (about 300 tokens) in a file;
the recursive family only, three trials. The module's output cache is its own folder, so the first
run scores boundaries with the model and a rerun (a new output folder, the same request) asks it
for nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from backend.cli.main import main
from backend.errors import ModelError
from backend.lab.tune import TuneRequest, check_request
from backend.metrics.intervals import Interval, independent_difference
from backend.models.scorer import load_scorer
from backend.samples import load_sample
from backend.tune import budget
from backend.tune.budget import BC_MIN_BOUNDARIES, plan_bc
from backend.tune.result import read_plan
from backend.tune.run import run_tune
from tests.support.counting_scorer import CountingScorer


SAMPLE = 10  # boundaries per trial (the baseline, chunk_size=64, has about 16)


@pytest.fixture(scope="module")
def lm():
    return CountingScorer(load_scorer(device="cpu"))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("bc-cache")
        mp.setenv("CHUNKLAB_CACHE_DIR", str(path))
        mp.setattr(budget, "BC_BOUNDARIES", SAMPLE)  # a sample smaller than the baseline's boundaries
        yield path


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    text = load_sample("narrative").text[:3000]
    path = tmp_path_factory.mktemp("bc-doc") / "cut.txt"
    path.write_text(text[: text.rfind(".") + 1], encoding="utf-8")
    return path


def _request(text_file: Path, out: Path, **changes) -> TuneRequest:
    fields = dict(sources=(str(text_file),), questions="sample:narrative", out=str(out), families=("recursive",),
                  objective="bc", trials=4, baseline="recursive chunk_size=64 chunk_overlap=0")
    fields.update(changes)
    return check_request(TuneRequest(**fields))


@pytest.fixture(scope="module")
def first(lm, cache_dir, text_file, embedder, tmp_path_factory):
    lm.pairs = 0
    result = run_tune(_request(text_file, tmp_path_factory.mktemp("bc-run") / "a"), scorer=lm, embedder=embedder,
                      models_available={"lm", "embedder"})
    return result, lm.pairs


def test_a_bc_run_scores_trials_by_boundary_clarity_with_intervals(first):
    result, pairs = first
    assert pairs > 0  # the model scored boundaries
    assert result.objective == "bc" and result.tuning_questions == () and result.held_out_questions == ()
    complete = [t for t in result.trials if t.state == "complete"]
    assert complete and all(t.interval is not None and t.interval.low <= t.objective <= t.interval.high
                            for t in complete)
    assert all(0.0 < t.objective < 2.0 and t.questions == 0 for t in complete)
    assert all("over boundaries" in t.reason for t in complete)
    base = result.trials[0]  # the baseline: a sample of its boundaries, so an interval of some width
    assert f"sampled: {SAMPLE} of " in base.reason and base.interval.n == SAMPLE
    assert base.interval.low < base.objective < base.interval.high
    assert result.pick is not None and result.pick_score is not None
    assert result.pick_score.mean == max(t.objective for t in complete)


def test_the_verdict_names_no_question_and_says_intervals_are_over_boundaries(first):
    result, _ = first
    verdict = result.verdict
    assert "bc rests on no question: no held-out check; intervals are over boundaries" in verdict
    assert " of " in verdict and "held-out questions" not in verdict
    assert result.pick.spec in verdict
    for c in (result.vs_baseline, result.vs_runner_up):
        if c is not None:  # a difference of two independent estimates
            assert c.verdict in ("better", "worse", "tied")
            assert math.isclose(c.difference.mean, result.pick_score.mean - c.score.mean, abs_tol=1e-12)


def test_a_rerun_is_served_from_the_cache(first, lm, text_file, embedder, tmp_path):
    result, _ = first
    lm.pairs = 0
    again = run_tune(_request(text_file, tmp_path / "b"), scorer=lm, embedder=embedder,
                     models_available={"lm", "embedder"})
    assert lm.pairs == 0  # no new model tokens
    assert again.pick == result.pick and again.pick_score == result.pick_score
    assert read_plan(tmp_path / "b")["bc"]["boundaries"] == SAMPLE


def test_a_two_objective_bc_run_keeps_a_pareto_front(lm, cache_dir, text_file, embedder, tmp_path):
    result = run_tune(_request(text_file, tmp_path / "c", secondary="mean_tokens", trials=3), scorer=lm, embedder=embedder,
                      models_available={"lm", "embedder"})
    assert result.secondary == "mean_tokens" and result.pareto
    assert all(t.secondary is not None for t in result.trials if t.state == "complete")


def test_bc_without_a_model_is_one_line(text_file, embedder, tmp_path, capsys, monkeypatch):
    with pytest.raises(ModelError, match="bc needs the language model"):
        run_tune(_request(text_file, tmp_path / "d"), scorer=None, embedder=embedder)
    monkeypatch.setenv("CHUNKLAB_LM", str(tmp_path / "no-such-model.gguf"))
    code = main(["tune", str(text_file), "--questions", "sample:narrative", "--objective", "bc",
                 "--families", "recursive", "--trials", "2", "--out", str(tmp_path / "e")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "bc needs the language model" in err and len(err.splitlines()) == 1


def test_the_bc_sample_fits_the_budget_and_the_difference_is_unpaired():
    assert plan_bc(200, None, 600).boundaries == budget.BC_BOUNDARIES
    slow = plan_bc(200, 50.0, 60)  # 50 tokens/s, one minute: the smallest sample, and a note
    assert slow.boundaries == BC_MIN_BOUNDARIES and "affords only" in slow.note
    assert plan_bc(200, 5000.0, 600).note == ""
    d = independent_difference(Interval(0.9, 0.87, 0.93, 20), Interval(0.8, 0.76, 0.84, 30))
    assert math.isclose(d.mean, 0.1) and math.isclose(d.high - d.mean, math.hypot(0.03, 0.04))
    assert d.excludes_zero() and d.n == 20
    exact = independent_difference(Interval(0.9, 0.9, 0.9, 5), Interval(0.9, 0.9, 0.9, 5))
    assert not exact.excludes_zero()
