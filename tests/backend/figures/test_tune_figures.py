"""The tuning figures: the trial table, the Pareto front and its figure, the θ curve, the budget bar."""

from __future__ import annotations

import math

import pytest

from backend.figures.tune import (
    budget_figure,
    objective_text,
    pareto_figure,
    pareto_front,
    theta_figure,
    theta_families,
    theta_points,
    trial_frame,
)
from tests.support.tune_rows import config, sample_result, sample_trials, trial


def test_trial_frame_has_one_line_per_trial_in_order_with_its_interval() -> None:
    trials = sample_trials()
    frame = trial_frame(tuple(reversed(trials)))
    assert list(frame["number"]) == [0, 1, 2, 3, 4, 5]
    assert list(frame.columns) == ["number", "configuration", "family", "state", "objective", "low", "high",
                                   "interval", "questions", "chunks", "mean_tokens", "index_cost", "seconds", "reason"]
    first = frame.iloc[0]
    assert first["configuration"] == "recursive(chunk_overlap=0, chunk_size=200) · cl100k"
    assert (first["objective"], first["low"], first["high"]) == pytest.approx((30.0, 25.0, 35.0))
    assert first["interval"] == "30.0% [25.0, 35.0] (95%, 8 questions)"
    assert frame.iloc[4]["state"] == "pruned" and "incumbent" in frame.iloc[4]["reason"]


def test_a_failed_trial_has_no_score_in_the_table() -> None:
    frame = trial_frame((trial(0, "recursive chunk_size=50", math.nan, state="failed", reason="boom"),))
    row = frame.iloc[0]
    assert row["objective"] is None and row["low"] is None and row["interval"] == "" and row["reason"] == "boom"


def test_bc_is_not_a_percentage() -> None:
    assert objective_text(0.8421, "bc") == "0.842"
    assert objective_text(0.8421, "iou") == "84.2%"
    assert objective_text(math.nan, "recall") == "n/a"


@pytest.mark.parametrize(("axis", "front"), [("mean_tokens", [2, 0, 5, 3]), ("chunks", [1, 3]), ("index_cost", [3])])
def test_the_pareto_front_keeps_complete_trials_no_other_dominates(axis: str, front: list[int]) -> None:
    assert [t.number for t in pareto_front(sample_trials(), axis)] == front


def test_a_pruned_trial_is_never_on_the_front_even_when_cheapest() -> None:
    trials = (trial(0, "recursive chunk_size=100", 0.2, mean_tokens=90),
              trial(1, "recursive chunk_size=50", 0.9, mean_tokens=40, state="pruned"))
    assert [t.number for t in pareto_front(trials)] == [0]


def test_an_unknown_axis_is_refused() -> None:
    with pytest.raises(ValueError, match="axis must be one of"):
        pareto_front(sample_trials(), "tokens")


def test_the_pareto_figure_colours_families_fades_pruned_and_marks_baseline_and_pick() -> None:
    result = sample_result()
    fig = pareto_figure(result.trials, objective="iou", axis="mean_tokens", baseline=result.baseline, pick=result.pick)
    names = [d.name for d in fig.data]
    assert names == ["fixed_token (1 complete)", "paragraph (1 pruned)", "ppl (1 complete)", "recursive (2 complete)",
                     "sentence (1 complete)", "Pareto front (4)", "baseline", "pick"]
    by = {d.name: d for d in fig.data}
    assert by["paragraph (1 pruned)"].marker.opacity < by["sentence (1 complete)"].marker.opacity
    front = by["Pareto front (4)"]
    assert front.line.shape == "hv" and list(front.x) == [95, 180, 240, 260]
    assert list(front.y) == pytest.approx([25.0, 30.0, 33.0, 41.0])
    assert list(by["pick"].x) == [260] and list(by["baseline"].x) == [180]
    assert fig.layout.yaxis.title.text == "IoU (%)"


def test_the_pareto_figure_escapes_labels_and_skips_marks_no_trial_ran() -> None:
    fig = pareto_figure(sample_trials()[:1], pick=config("sentence chunk_size=999"))
    assert [d.name for d in fig.data] == ["recursive (1 complete)", "Pareto front (1)"]
    assert "<b>" not in fig.data[0].hovertext[0].split("<br>")[0].replace("#0 ", "")


def test_theta_points_take_the_results_curves_else_the_ppl_trials() -> None:
    assert "ppl" in theta_families() and "recursive" not in theta_families()
    trials = sample_trials() + (trial(6, "ppl threshold=0.2", 0.31),)
    assert theta_points(trials) == {"ppl": [(0.2, 0.31), (0.5, 0.33)]}
    assert theta_points(trials, {"ppl": [(0.8, 0.1), (0.1, 0.2)]}) == {"ppl": [(0.1, 0.2), (0.8, 0.1)]}
    fig = theta_figure(theta_points(trials), "iou")
    assert [d.name for d in fig.data] == ["ppl"] and list(fig.data[0].y) == pytest.approx([31.0, 33.0])


def test_the_budget_bar_shows_used_and_left() -> None:
    fig = budget_figure(42.0, 600.0)
    assert [d.x[0] for d in fig.data] == [42.0, 558.0]
    over = budget_figure(700.0, 600.0)
    assert [d.x[0] for d in over.data] == [700.0, 0.0]
