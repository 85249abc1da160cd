"""What a tuning run returns and reports: its trials, what it left out, its progress and its answer.

These are the contract between the tuner (:mod:`backend.tune.run`), the CLI (``python -m backend tune``),
the Tune page, its figures and the report. Every number names what it rests on: the document(s), the question
set and its split, the objective, and each interval's level and method.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from backend.chunkers import make_chunker
from backend.chunking import ChunkerConfig
from backend.metrics.intervals import Interval

__all__ = ["Interval", "TrialRow", "LeftOut", "TuneProgress", "Comparison", "TuneResult", "OBJECTIVES"]

# The objectives a tuning run maximises (``bc`` is MoC's Boundary Clarity, higher is better) and the
# secondary objectives (minimised) that turn a run into a two-objective (NSGA-II) search.
OBJECTIVES = ("iou", "recall", "precision", "precision_omega", "bc")


def _config(spec: str) -> ChunkerConfig:
    """The configuration a spec string names, its parameters converted and checked by the chunker."""
    name, params, tokenizer = ChunkerConfig.parse(spec)
    return make_chunker(name, params, tokenizer).config


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


@dataclass(frozen=True)
class TrialRow:
    """One trial: a configuration and what it scored on the tuning questions.

    Attributes:
        number: Optuna's trial number (0 is the baseline, enqueued first).
        config: The configuration tried.
        state: ``complete``, ``pruned`` (dropped on a subset of the questions) or ``failed``.
        objective: The mean objective on the questions it was scored on (NaN when failed).
        interval: Its interval over those questions (None when failed).
        questions: How many tuning questions it was scored on (a pruned trial: the subset's size).
        chunks: Chunks over the document(s).
        mean_tokens: Mean tokens per chunk.
        index_cost: Tokens embedded to index it (the chunks' tokens, overlap counted).
        seconds: Wall time of the trial.
        secondary: The second objective's value in a two-objective run (None otherwise).
        reason: Why it was pruned or failed ("" otherwise), one line.
    """

    number: int
    config: ChunkerConfig
    state: str
    objective: float
    interval: Interval | None
    questions: int
    chunks: int
    mean_tokens: float
    index_cost: int
    seconds: float
    secondary: float | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the configuration as its spec string)."""
        return {
            "number": self.number, "config": self.config.spec, "label": self.config.label, "state": self.state,
            "objective": _num(self.objective), "interval": self.interval.to_json() if self.interval else None,
            "questions": self.questions, "chunks": self.chunks, "mean_tokens": round(self.mean_tokens, 2),
            "index_cost": self.index_cost, "seconds": round(self.seconds, 3), "secondary": _num(self.secondary),
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, t: Mapping[str, Any]) -> TrialRow:
        """The trial a :meth:`to_json` object holds (a line of ``trials.jsonl``)."""
        return cls(
            number=int(t["number"]), config=_config(t["config"]), state=str(t["state"]),
            objective=math.nan if t["objective"] is None else float(t["objective"]),
            interval=Interval.from_json(t["interval"]) if t.get("interval") else None, questions=int(t["questions"]),
            chunks=int(t["chunks"]), mean_tokens=float(t["mean_tokens"]), index_cost=int(t["index_cost"]),
            seconds=float(t["seconds"]), secondary=None if t.get("secondary") is None else float(t["secondary"]),
            reason=str(t.get("reason", "")),
        )


@dataclass(frozen=True)
class LeftOut:
    """A family the plan did not search, and why (one line: a missing model, the budget by a measured rate)."""

    family: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """``{"family", "reason"}``."""
        return {"family": self.family, "reason": self.reason}


@dataclass(frozen=True)
class TuneProgress:
    """What a running tuning job shows: the trials so far, the budget used and left, the best so far."""

    trials: tuple[TrialRow, ...]
    budget_seconds: float
    used_seconds: float
    best: int | None  # the best complete trial's number so far
    stage: str  # "planning", "scoring PPL", "searching", "held-out", "done"

    @property
    def left_seconds(self) -> float:
        """Budget left (never negative)."""
        return max(0.0, self.budget_seconds - self.used_seconds)


@dataclass(frozen=True)
class Comparison:
    """The pick against another configuration on the held-out questions: a paired bootstrap difference."""

    against: str  # "runner-up" | "baseline" | a trial's label
    config: ChunkerConfig
    score: Interval  # the other configuration's held-out score
    difference: Interval  # pick minus other, paired over the held-out questions

    @property
    def verdict(self) -> str:
        """``better``, ``worse`` or ``tied`` (the interval contains zero)."""
        if self.difference.low > 0:
            return "better"
        if self.difference.high < 0:
            return "worse"
        return "tied"

    def to_json(self) -> dict[str, Any]:
        """A JSON object."""
        return {"against": self.against, "config": self.config.spec, "label": self.config.label,
                "score": self.score.to_json(), "difference": self.difference.to_json(), "verdict": self.verdict}


@dataclass(frozen=True)
class TuneResult:
    """A finished (or cancelled) tuning run's answer.

    Attributes:
        documents: The document(s) it rests on (names).
        question_set: The question set's name (``sample:NAME``, a CSV path, ``generate:METHOD``).
        question_method: How the questions were made (``hand-written``, ``model-free``, ``bundled-lm``…).
        tuning_questions: Indices (in the set) of the tuning questions.
        held_out_questions: Indices of the held-out questions (disjoint from the tuning ones).
        objective: The objective maximised; ``secondary``: the second one in a two-objective run.
        constraints: The constraints as written (``mean_tokens<=400``).
        seed: The run's seed (sampler and split).
        trials: Every trial, in order.
        pick: The recommended configuration (None when no trial completed).
        pick_score: The pick's held-out score.
        baseline: The baseline configuration and ``vs_baseline`` the pick against it.
        vs_runner_up: The pick against the runner-up (None when there is none).
        tied: Configurations that cannot be told apart from the pick on the held-out questions.
        pareto: Trial numbers on the Pareto front (objective against the secondary objective, or mean tokens).
        left_out: Families the plan did not search, and why.
        warnings: One line each: a small or model-free question set, a cancelled run…
        verdict: The sentence the result states (never more than its table shows).
        budget_seconds, used_seconds: The budget and the time used.
        cancelled: True when the run stopped before its budget or trials were spent.
    """

    documents: tuple[str, ...]
    question_set: str
    question_method: str
    tuning_questions: tuple[int, ...]
    held_out_questions: tuple[int, ...]
    objective: str
    secondary: str | None
    constraints: tuple[str, ...]
    seed: int
    trials: tuple[TrialRow, ...]
    pick: ChunkerConfig | None
    pick_score: Interval | None
    baseline: ChunkerConfig
    vs_baseline: Comparison | None
    vs_runner_up: Comparison | None
    tied: tuple[ChunkerConfig, ...]
    pareto: tuple[int, ...]
    left_out: tuple[LeftOut, ...]
    warnings: tuple[str, ...]
    verdict: str
    budget_seconds: float
    used_seconds: float
    cancelled: bool = False
    theta_curves: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict)

    @property
    def beats_baseline(self) -> bool:
        """Whether the pick is better than the baseline on the held-out questions (interval above zero)."""
        return self.vs_baseline is not None and self.vs_baseline.verdict == "better"

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` object the CLI writes and ``--json`` prints."""
        return {
            "documents": list(self.documents), "question_set": self.question_set,
            "question_method": self.question_method, "tuning_questions": list(self.tuning_questions),
            "held_out_questions": list(self.held_out_questions), "objective": self.objective,
            "secondary": self.secondary, "constraints": list(self.constraints), "seed": self.seed,
            "pick": self.pick.spec if self.pick else None, "pick_label": self.pick.label if self.pick else None,
            "pick_score": self.pick_score.to_json() if self.pick_score else None, "baseline": self.baseline.spec,
            "vs_baseline": self.vs_baseline.to_json() if self.vs_baseline else None,
            "vs_runner_up": self.vs_runner_up.to_json() if self.vs_runner_up else None,
            "beats_baseline": self.beats_baseline, "tied": [c.spec for c in self.tied], "pareto": list(self.pareto),
            "left_out": [x.to_json() for x in self.left_out], "warnings": list(self.warnings),
            "verdict": self.verdict, "budget_seconds": round(self.budget_seconds, 1),
            "used_seconds": round(self.used_seconds, 1), "cancelled": self.cancelled,
            "theta_curves": {k: [list(p) for p in v] for k, v in self.theta_curves.items()},
            "trials": [t.to_json() for t in self.trials],
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TuneResult:
        """The result a :meth:`to_json` object holds (``result.json``; untrusted: fields are checked by use).

        Raises:
            KeyError, TypeError, ValueError: a missing or ill-typed field (callers turn it into one line).
        """
        cfg = _config
        ivl = lambda x: Interval.from_json(x) if x else None  # noqa: E731

        def comparison(x: Mapping[str, Any] | None) -> Comparison | None:
            if not x:
                return None
            return Comparison(str(x["against"]), cfg(x["config"]), Interval.from_json(x["score"]),
                              Interval.from_json(x["difference"]))

        trials = tuple(TrialRow.from_json(t) for t in raw["trials"])
        return cls(
            documents=tuple(map(str, raw["documents"])), question_set=str(raw["question_set"]),
            question_method=str(raw["question_method"]),
            tuning_questions=tuple(map(int, raw["tuning_questions"])),
            held_out_questions=tuple(map(int, raw["held_out_questions"])), objective=str(raw["objective"]),
            secondary=raw.get("secondary"), constraints=tuple(map(str, raw["constraints"])), seed=int(raw["seed"]),
            trials=trials, pick=cfg(raw["pick"]) if raw.get("pick") else None, pick_score=ivl(raw.get("pick_score")),
            baseline=cfg(raw["baseline"]), vs_baseline=comparison(raw.get("vs_baseline")),
            vs_runner_up=comparison(raw.get("vs_runner_up")), tied=tuple(cfg(s) for s in raw["tied"]),
            pareto=tuple(map(int, raw["pareto"])), left_out=tuple(LeftOut(str(x["family"]), str(x["reason"]))
                                                                 for x in raw["left_out"]),
            warnings=tuple(map(str, raw["warnings"])), verdict=str(raw["verdict"]),
            budget_seconds=float(raw["budget_seconds"]), used_seconds=float(raw["used_seconds"]),
            cancelled=bool(raw.get("cancelled", False)),
            theta_curves={str(k): [(float(a), float(b)) for a, b in v] for k, v in raw.get("theta_curves", {}).items()},
        )
