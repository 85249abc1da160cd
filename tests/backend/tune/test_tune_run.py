"""A tuning run end to end on the bundled narrative sample: reproducible, resumable, honest about the baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import ParameterError
from backend.progress import CancelToken, Progress
from backend.tune.result import TRIALS_FILE, read_plan, read_result, read_trials
from backend.tune.types import TuneProgress


def _trials(result):
    return [(t.number, t.config.spec, t.state, round(t.objective, 9) if t.state == "complete" else None)
            for t in result.trials]


def test_a_seeded_run_gives_the_same_trials_and_pick_twice(tune_request, run_counted):
    first = run_counted(tune_request("one"))
    second = run_counted(tune_request("two"))
    assert _trials(first) == _trials(second)
    assert first.pick == second.pick and first.pick is not None
    assert first.pick_score == second.pick_score
    assert first.trials[0].config == first.baseline  # trial 0 is the baseline
    assert read_result(tune_request("one").out).to_json() == first.to_json()
    plan = read_plan(tune_request("one").out)
    assert plan["families"] == ["recursive", "fixed_token"] and plan["split"]["held_out"] == [0, 9, 10, 11]


def test_held_out_scoring_only_ever_sees_held_out_questions(tune_request, run_counted):
    for seed in (0, 1):
        result = run_counted(tune_request(f"seed{seed}", seed=seed, trials=3))
        tuning, held = set(result.tuning_questions), set(result.held_out_questions)
        assert tuning.isdisjoint(held) and len(held) == 4
        searched = len([t for t in result.trials if t.state != "failed" and t.interval is not None])
        calls = run_counted.calls
        # Search calls (a subset, then the rest) score tuning questions only; the held-out stage's calls are last.
        held_calls = [c for c in calls if set(c[1]) & held]
        assert all(set(ix) == held for _, ix in held_calls)
        assert all(set(ix) <= tuning for _, ix in calls[: len(calls) - len(held_calls)])
        assert calls[len(calls) - len(held_calls):] == held_calls and searched >= 1
        assert result.pick_score.n == 4


def test_a_cancelled_run_resumes_without_scoring_a_finished_trial_again(tune_request, run_counted):
    token = CancelToken()

    def watch(value):
        if isinstance(value, TuneProgress) and len(value.trials) >= 3:
            token.cancel()

    request = tune_request("resume", trials=6)
    cancelled = run_counted(request, progress=Progress(cancel=token, partial=watch))
    assert cancelled.cancelled and len(cancelled.trials) == 3
    assert any("cancelled" in w for w in cancelled.warnings)
    def search_calls(result):
        return [c for c in run_counted.calls if not set(c[1]) & set(result.held_out_questions)]

    def scorings(trials):  # on the subset, then on the rest unless pruned; never for a violation or a repeat
        return sum(0 if t.reason.startswith(("violates", "repeats")) else 1 if t.state == "pruned" else 2
                   for t in trials)

    assert len(search_calls(cancelled)) == scorings(cancelled.trials)
    done = read_trials(request.out)
    resumed = run_counted(request)
    assert not resumed.cancelled and [t.number for t in resumed.trials] == [0, 1, 2, 3, 4, 5]
    assert resumed.trials[:3] == done  # the first three rows are the cancelled run's, untouched
    # Only the new trials were scored by the search, and none of the finished trials' configurations.
    assert len(search_calls(resumed)) == scorings(resumed.trials[3:]) >= 2
    assert not {spec for spec, _ in search_calls(resumed)} & {t.config.spec for t in done}
    lines = Path(request.out, TRIALS_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6


def test_a_pick_that_does_not_beat_the_baseline_says_so(tune_request, run_counted):
    result = run_counted(tune_request("base", families=("recursive",), trials=1))
    assert [t.config for t in result.trials] == [result.baseline]
    assert result.pick == result.baseline and result.vs_baseline is None and not result.beats_baseline
    assert "no configuration beats the baseline on the held-out questions" in result.verdict
    assert "small: 4 held-out questions" in result.warnings[0]


def test_a_constraint_prunes_unscored_and_another_request_in_the_folder_is_refused(tune_request, run_counted):
    result = run_counted(tune_request("cons", constraints=("mean_tokens<=150",), trials=2))
    base = result.trials[0]
    assert base.state == "pruned" and base.reason.startswith("violates mean_tokens<=150 (")
    assert base.interval is None and base.mean_tokens > 150
    assert not any(spec == base.config.spec and set(ix) <= set(result.tuning_questions)
                   for spec, ix in run_counted.calls)
    with pytest.raises(ParameterError, match="holds another tuning run"):
        run_counted(tune_request("cons", trials=2))


def test_two_objectives_give_the_non_dominated_trials(tune_request, run_counted):
    result = run_counted(tune_request("two", secondary="mean_tokens", trials=5))
    complete = {t.number: t for t in result.trials if t.state == "complete"}
    assert result.pareto and set(result.pareto) <= set(complete)
    assert all(complete[n].secondary == complete[n].mean_tokens for n in complete)

    def dominates(a, b):
        return (a.objective >= b.objective and a.mean_tokens <= b.mean_tokens
                and (a.objective > b.objective or a.mean_tokens < b.mean_tokens))

    for n, t in complete.items():
        dominated = any(dominates(o, t) for o in complete.values())
        assert (n in result.pareto) == (not dominated)


def test_a_small_space_converges_and_no_configuration_is_scored_twice(tune_request, run_counted):
    result = run_counted(tune_request("para", families=("paragraph",), trials=None))
    assert result.warnings[-1].startswith("stopped: the last 10 trials proposed configurations already scored")
    assert result.trials[0].config == result.baseline  # run as it is: recursive is not in the space
    scored = [t for t in result.trials if not t.reason.startswith("repeats")]
    assert len({t.config for t in scored}) == len(scored) <= 12  # the space's 11 and the baseline
    held = set(result.held_out_questions)
    searched = [spec for spec, ix in run_counted.calls if not set(ix) & held]
    assert len(searched) == sum(1 if t.state == "pruned" else 2 for t in scored)
