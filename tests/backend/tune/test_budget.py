"""The wall-clock budget: measured seconds per trial, what fits, model-backed families by a measured rate."""

from __future__ import annotations

import itertools

from backend.tune.budget import Budget, model_left_out_reason, model_trial_seconds, plan_model_families


def test_the_budget_counts_a_scripted_clock_and_expects_the_dearest_measured_family():
    now = [100.0]
    b = Budget(60, clock=lambda: now[0], already_used=10)
    b.start()
    now[0] = 130.0
    assert b.used == 40 and b.left == 20  # 10 from an earlier run + 30 on the clock
    assert b.expected("recursive") == 0.0  # nothing measured yet: the first trial measures
    b.priors = {"ppl": 30.0}  # a model-backed family's planned first trial
    b.record("recursive", 4)
    b.record("recursive", 6)
    b.record("fixed_token", 9)
    assert b.rate("recursive") == 5 and b.expected("fixed_token") == 9
    assert b.expected("sentence") == 7  # an unmeasured family: the mean of the others stands in
    assert b.expected("ppl") == 30 and b.cheapest(("ppl", "fixed_token", "recursive")) == 5
    now[0] = 140.0
    assert b.fits(9) is True  # 50 used, 10 left
    assert b.fits(10.5) is False
    now[0] = 200.0
    assert b.left == 0 and b.fits(0) is False


def test_a_model_trial_is_estimated_from_the_rate_measured_here_and_said_in_human_units():
    assert model_trial_seconds(73_800, None) is None
    seconds = model_trial_seconds(73_800, 410.0)
    assert seconds == 180.0
    assert model_left_out_reason(seconds, 410.0, 60) == (
        "one trial needs about 3 min at 410 tokens/s measured here; the budget left is 60 s")


def test_a_model_backed_family_is_planned_only_when_its_first_trial_fits():
    def needs(family):
        return ("lm",) if family in ("ppl", "ppl_combined", "margin_sampling") else ()

    families = ("recursive", "ppl", "ppl_combined", "margin_sampling")
    plan = plan_model_families(families, needs, 73_800, 410.0, left=60)
    assert plan.kept == ("recursive",) and [x.family for x in plan.left_out] == ["ppl", "ppl_combined",
                                                                                 "margin_sampling"]
    assert plan.left_out[0].reason.startswith("one trial needs about 3 min at 410 tokens/s")
    assert "no measured estimate" in plan.left_out[2].reason
    roomy = plan_model_families(families, needs, 73_800, 410.0, left=200)
    assert roomy.kept == families[:3] and roomy.priors == {"ppl": 180.0, "ppl_combined": 180.0}
    # No rate measured: left out unless the user named the families (then the first trial measures it).
    assert plan_model_families(families, needs, 73_800, None, left=60).kept == ("recursive",)
    assert plan_model_families(families, needs, 73_800, None, left=60, named=True).kept == families


def test_a_run_stops_before_a_trial_that_would_not_fit(tune_request, run_counted):
    # A scripted clock: every reading moves it 0.5 s. A trial reads it a fixed number of times, so its
    # measured cost is what the next one costs; the run must stop before the budget is spent.
    clock = itertools.count(0, 0.5).__next__
    result = run_counted(tune_request("budget", budget="12s", trials=None), clock=clock)
    assert not result.cancelled
    assert 1 <= len(result.trials) < 20
    assert result.used_seconds <= result.budget_seconds == 12
