"""Small tuning trials, results and output folders written as a run writes them (the files' contract).

A test of what shows a tuning run (figures, the page's view, the report, saved sessions) builds its trials
here and writes them with ``TrialRow.to_json()`` lines, ``TuneResult.to_json()`` and a plan object, exactly
the files ``backend.tune.run`` leaves in ``--out DIR``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backend.chunkers import make_chunker
from backend.chunking import ChunkerConfig
from backend.metrics.intervals import Interval
from backend.tune.types import Comparison, LeftOut, TrialRow, TuneResult

__all__ = ["config", "trial", "sample_trials", "sample_result", "write_out"]

BASELINE = "recursive chunk_size=200 chunk_overlap=0"


def config(spec: str) -> ChunkerConfig:
    """The configuration a spec names (defaults filled in)."""
    name, params, tokenizer = ChunkerConfig.parse(spec)
    return make_chunker(name, params, tokenizer).config


def trial(number: int, spec: str, objective: float, *, state: str = "complete", mean_tokens: float = 200.0,
          chunks: int = 10, questions: int = 8, reason: str = "") -> TrialRow:
    """A trial with an interval of ±0.05 around ``objective`` (none when failed)."""
    ivl = None if state == "failed" else Interval(objective, objective - 0.05, objective + 0.05, questions, 0.95)
    return TrialRow(number=number, config=config(spec), state=state, objective=objective, interval=ivl,
                    questions=questions, chunks=chunks, mean_tokens=mean_tokens, index_cost=int(chunks * mean_tokens),
                    seconds=0.5 + number / 10, reason=reason)


def sample_trials() -> tuple[TrialRow, ...]:
    """Six trials: the baseline, three complete, one pruned, one PPL trial; the front (mean tokens) is #2, #0, #5, #3."""
    return (
        trial(0, BASELINE, 0.30, mean_tokens=180, chunks=12),
        trial(1, "recursive chunk_size=400 chunk_overlap=0", 0.28, mean_tokens=350, chunks=6),
        trial(2, "fixed_token chunk_size=100 chunk_overlap=0", 0.25, mean_tokens=95, chunks=22),
        trial(3, "sentence chunk_size=300 chunk_overlap=0", 0.41, mean_tokens=260, chunks=8),
        trial(4, "paragraph chunk_size=500", 0.05, state="pruned", mean_tokens=420, chunks=5, questions=3,
              reason="upper end 10.0% below the incumbent's lower end 25.0% on 3 questions"),
        trial(5, "ppl threshold=0.5", 0.33, mean_tokens=240, chunks=9),
    )


def sample_result(*, beats: bool = True, documents: tuple[str, ...] = ("<b>guide</b>.pdf",)) -> TuneResult:
    """A finished run's result over :func:`sample_trials` (the pick #3; beats the baseline unless ``beats`` is False)."""
    trials = sample_trials()
    pick, base, runner = trials[3].config, trials[0].config, trials[5].config
    low = 0.02 if beats else -0.03
    return TuneResult(
        documents=documents, question_set="generate:model-free", question_method="model-free",
        tuning_questions=(0, 1, 2, 3, 4, 5, 6, 7), held_out_questions=(8, 9, 10, 11), objective="iou",
        secondary=None, constraints=("mean_tokens<=400",), seed=0, trials=trials, pick=pick,
        pick_score=Interval(0.40, 0.31, 0.49, 4, 0.95), baseline=base,
        vs_baseline=Comparison("baseline", base, Interval(0.29, 0.2, 0.38, 4, 0.95),
                               Interval(0.11, low, 0.2, 4, 0.95)),
        vs_runner_up=Comparison("runner-up", runner, Interval(0.35, 0.25, 0.45, 4, 0.95),
                                Interval(0.05, -0.04, 0.14, 4, 0.95)),
        tied=(runner,), pareto=(2, 0, 5, 3), left_out=(LeftOut("semantic", "needs an embedder: none is loaded"),),
        warnings=("4 held-out questions: a small set, wide intervals",),
        verdict=("sentence(…) beats the baseline on the held-out questions" if beats else
                 "no configuration beats the baseline on the held-out questions"),
        budget_seconds=600.0, used_seconds=42.0, theta_curves={"ppl": [(0.2, 0.30), (0.5, 0.33), (0.8, 0.31)]},
    )


def write_out(out: Path, trials: tuple[TrialRow, ...] = (), result: TuneResult | None = None,
              plan: dict[str, Any] | None = None, *, partial_line: bool = False) -> Path:
    """Write a run's output folder: ``trials.jsonl`` (and a cut last line), ``result.json``, ``plan.json``."""
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(t.to_json()) + "\n" for t in trials)
    if partial_line:
        lines += '{"number": 99, "conf'
    (out / "trials.jsonl").write_text(lines, encoding="utf-8")
    if result is not None:
        (out / "result.json").write_text(json.dumps(result.to_json()), encoding="utf-8")
    if plan is not None:
        (out / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    return out
