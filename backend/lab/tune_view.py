"""What the Tune page shows of a tuning run's output folder, while it runs and after: one call, one view.

:func:`tune_view` reads the folder with :mod:`backend.tune.result`'s readers (``plan.json``,
``trials.jsonl`` as far as it is written, ``result.json`` once the run ended) and returns a
:class:`TuneView`: the trials so far (their table, the Pareto front, the θ curves), the budget used and
left, what the numbers rest on, and at the end the answer in the words of :mod:`backend.report.tuning`
(verdict, pick with its held-out interval, comparisons, tied set, left-out families, warnings). The page
draws it; nothing is decided there.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from backend.chunking import ChunkerConfig
from backend.chunkers import make_chunker
from backend.errors import ChunkLabError, InputError
from backend.figures.tune import (
    budget_figure,
    objective_label,
    pareto_figure,
    theta_figure,
    theta_points,
    trial_frame,
)
from backend.report.tuning import comparison_rows, left_out_lines, pick_line, rests_on, tied_line
from backend.tune.result import RESULT_FILE, TRIALS_FILE, read_plan, read_result, read_trials
from backend.tune.types import LeftOut, TrialRow, TuneResult

__all__ = ["TuneView", "left_out_sentence", "left_out_sentences", "tune_view", "result_view", "check_tune_folder", "finished_trials"]


def _left_out(plan: Mapping[str, Any] | None) -> tuple[LeftOut, ...]:
    """The plan's left-out families (``[{"family", "reason"}, …]``), skipping entries that are not that shape."""
    raw = (plan or {}).get("left_out") or ()
    out = []
    for x in raw if isinstance(raw, list) else ():
        if isinstance(x, Mapping) and isinstance(x.get("family"), str):
            out.append(LeftOut(x["family"], str(x.get("reason", ""))))
    return tuple(out)


_NOT_LOADED = re.compile(r"^needs (?P<what>.+), which this session has not loaded$")
_OVER_BUDGET = re.compile(r"^one trial needs (?P<needs>.+) at (?P<rate>[\d,.]+) tokens/s measured here; "
                          r"the budget left is (?P<left>.+)$")
_NOT_MEASURED = "the language model's scoring rate is not measured on this machine yet"
_NO_ESTIMATE = "has no measured estimate here"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|min|h)\b")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}


def _duration(text: str) -> float | None:
    """Seconds of a duration as :func:`backend.progress.format_seconds` writes it (``about 3 min``, ``1 h 5 min``)."""
    parts = _DURATION_PART.findall(text)
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts) if parts else None


def _budget_text(seconds: float) -> str:
    """A budget as the Budget box takes it, rounded up to whole minutes: ``4m``, ``1h30m``."""
    minutes = max(1, math.ceil(seconds / 60))
    hours, rest = divmod(minutes, 60)
    return (f"{hours}h" if hours else "") + (f"{rest}m" if rest or not hours else "")


def _names(families: list[str]) -> str:
    return families[0] if len(families) == 1 else ", ".join(families[:-1]) + " and " + families[-1]


def left_out_sentence(item: LeftOut, budget_seconds: float | None = None) -> str:
    """Why a family was not searched, said for the page's user, with what would include it.

    The plan's reasons are the CLI's (``ppl: one trial needs about 3 min at 410 tokens/s measured here;
    the budget left is 1 min``); here each says which family, why, and where to change that: a model
    the session has not loaded (load one on the Models page), a first trial over the budget left (the
    budget that would include it: the run's budget plus what the trial lacked, in whole minutes), a cost
    not measured yet (pick it in Families to try it anyway). A reason not recognised is shown as written.

    Args:
        item: The family left out and the plan's reason.
        budget_seconds: The run's budget (None: the budget that would include it is not said).
    """
    return _sentence([item.family], item.reason.strip(), budget_seconds)


def left_out_sentences(left_out: Sequence[LeftOut], budget_seconds: float | None = None, *,
                       ahead: bool = False) -> list[str]:
    """:func:`left_out_sentence` for each reason, the families with the same reason named together, in order
    (``ahead``: before a run, the form's defaults: "is not searched")."""
    groups: dict[str, list[str]] = {}
    for x in left_out:
        groups.setdefault(x.reason.strip(), []).append(x.family)
    return [_sentence(families, reason, budget_seconds, ahead) for reason, families in groups.items()]


def _sentence(families: list[str], reason: str, budget_seconds: float | None, ahead: bool = False) -> str:
    one = len(families) == 1
    who, it, its = _names(families), "it" if one else "each", "its" if one else "each one's"
    was = ("is" if one else "are") if ahead else ("was" if one else "were")
    if m := _NOT_LOADED.match(reason):
        return (f"{who} {was} not searched: {it} needs {m['what']}, and this session has none loaded. "
                "Load one on the Models page, then Start again.")
    if m := _OVER_BUDGET.match(reason):
        text = (f"{who} {was} not searched: {its} first trial (one scoring pass over the documents at "
                f"{m['rate']} tokens/s, the rate measured on this machine) needs {m['needs']}, but only "
                f"{m['left']} of the budget was left after planning.")
        needs, left = _duration(m["needs"]), _duration(m["left"])
        if budget_seconds is not None and needs is not None and left is not None:
            text += (f" A budget of at least {_budget_text(budget_seconds + max(needs - left, 0.0))} "
                     f"would include {'it' if one else 'them'}.")
        else:
            text += f" A longer budget would include {'it' if one else 'them'}."
        return text
    if reason.startswith(_NOT_MEASURED):
        return (f"{who} {was} not searched by default: how fast the language model scores text on this machine "
                "is not measured yet, so the cost cannot be planned. Score a document once on the Meta-Chunking "
                f"page to measure it, or pick {'it' if one else 'them'} in Families to try anyway (the first "
                "trial measures it).")
    if _NO_ESTIMATE in reason:
        return (f"{who} {was} not searched by default: {it} calls the language model for every sentence on "
                f"every trial, and no measured rate prices that yet. Pick {'it' if one else 'them'} in Families "
                "to try anyway.")
    return f"{who} {was} not searched: {reason}"


def _number(plan: Mapping[str, Any] | None, *names: str) -> float | None:
    for name in names:
        value = (plan or {}).get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


@dataclass(frozen=True)
class TuneView:
    """A tuning run's output folder, as far as it is written.

    Attributes:
        out: The folder.
        plan: ``plan.json`` (None: not written yet).
        trials: The trials so far, in number order.
        result: ``result.json`` (None: the run has not ended).
        elapsed: Seconds the page knows the running job has taken (None: not running here).
    """

    out: Path
    plan: Mapping[str, Any] | None
    trials: tuple[TrialRow, ...]
    result: TuneResult | None
    elapsed: float | None = field(default=None)

    @property
    def finished(self) -> bool:
        """Whether the run wrote its answer (finished, or cancelled with what it had)."""
        return self.result is not None

    @property
    def objective(self) -> str:
        """The objective maximised (the result's, else the plan's, else ``iou``)."""
        if self.result is not None:
            return self.result.objective
        value = (self.plan or {}).get("objective")
        return value if isinstance(value, str) else "iou"

    @property
    def counts(self) -> dict[str, int]:
        """Trials by state (``complete``, ``pruned``, ``failed``)."""
        out = {"complete": 0, "pruned": 0, "failed": 0}
        for t in self.trials:
            out[t.state] = out.get(t.state, 0) + 1
        return out

    @property
    def budget_seconds(self) -> float | None:
        """The run's budget (the result's, else the plan's; None when neither says)."""
        if self.result is not None:
            return self.result.budget_seconds
        return _number(self.plan, "budget_seconds", "budget")

    @property
    def used_seconds(self) -> float:
        """Seconds used: the result's; while running, the job's elapsed time, else the trials' own seconds."""
        if self.result is not None:
            return self.result.used_seconds
        if self.elapsed is not None:
            return self.elapsed
        return sum(t.seconds for t in self.trials)

    @property
    def left_out(self) -> tuple[LeftOut, ...]:
        """Families not searched, and why (the result's, else the plan's)."""
        return self.result.left_out if self.result is not None else _left_out(self.plan)

    def caption(self) -> str:
        """What the numbers rest on: the result's own sentence, or while running the plan's documents and set."""
        if self.result is not None:
            return rests_on(self.result)
        plan = self.plan or {}
        docs = plan.get("documents") or []
        docs = [str(d) for d in docs] if isinstance(docs, list) else [str(docs)]
        qset = plan.get("question_set") or "the question set"
        method = plan.get("question_method")
        c = self.counts
        split = plan.get("split")
        sizes = ""
        if isinstance(split, Mapping) and all(isinstance(split.get(k), list) for k in ("tuning", "held_out")):
            sizes = f"{len(split['tuning']):,} tuning questions, {len(split['held_out']):,} held out"
        about = ": ".join(x for x in (f"{method} questions" if isinstance(method, str) else "", sizes) if x)
        return (f"On {', '.join(docs) or 'the document'}, question set {qset}"
                f"{f' ({about})' if about else ''}; objective "
                f"{objective_label(self.objective)} on the tuning questions · {len(self.trials):,} trials so far "
                f"({c['complete']:,} complete, {c['pruned']:,} pruned, {c['failed']:,} failed).")

    def budget_line(self) -> str:
        """``Budget: 42 s used of 600 s, 558 s left`` (or the seconds used when the budget is unknown)."""
        used = self.used_seconds
        budget = self.budget_seconds
        if budget is None:
            return f"Budget: {used:,.0f} s used."
        return f"Budget: {used:,.0f} s used of {budget:,.0f} s, {max(0.0, budget - used):,.0f} s left."

    def trial_table(self) -> pd.DataFrame:
        """The live trial table (:func:`~backend.figures.tune.trial_frame`)."""
        return trial_frame(self.trials, self.objective)

    def pareto(self, axis: str = "mean_tokens") -> go.Figure:
        """The Pareto front against ``axis`` (``mean_tokens``, ``chunks``, ``index_cost``), pick and baseline marked."""
        baseline = self.result.baseline if self.result is not None else self._plan_baseline()
        pick = self.result.pick if self.result is not None else None
        return pareto_figure(self.trials, objective=self.objective, axis=axis, baseline=baseline, pick=pick)

    def _plan_baseline(self) -> ChunkerConfig | None:
        """The plan's baseline; without a readable one, trial 0 (the baseline is enqueued first)."""
        spec = (self.plan or {}).get("baseline")
        if isinstance(spec, str):
            try:
                name, params, tokenizer = ChunkerConfig.parse(spec)
                return make_chunker(name, params, tokenizer).config
            except (ChunkLabError, ValueError):
                pass
        return next((t.config for t in self.trials if t.number == 0), None)

    def theta(self) -> go.Figure | None:
        """θ → objective for the PPL families (None: no PPL trial or curve yet)."""
        points = theta_points(self.trials, self.result.theta_curves if self.result is not None else None)
        return theta_figure(points, self.objective) if points else None

    def budget(self) -> go.Figure | None:
        """The budget used and left (None when the budget is unknown)."""
        budget = self.budget_seconds
        return None if budget is None else budget_figure(self.used_seconds, budget)

    # --- the answer (after the run) -------------------------------------------------------------------------

    @property
    def verdict(self) -> str:
        """The result's verdict ("" while running)."""
        return self.result.verdict if self.result is not None else ""

    @property
    def pick(self) -> ChunkerConfig | None:
        """The recommended configuration (None while running, or when no trial completed)."""
        return self.result.pick if self.result is not None else None

    def pick_line(self) -> str:
        """The pick with its held-out interval ("" while running)."""
        return pick_line(self.result) if self.result is not None else ""

    def tied_line(self) -> str:
        """The configurations not told apart from the pick ("" while running)."""
        return tied_line(self.result) if self.result is not None else ""

    def comparisons(self) -> list[dict[str, Any]]:
        """The pick against the runner-up and the baseline (records; none while running)."""
        return comparison_rows(self.result) if self.result is not None else []

    def left_out_sentences(self) -> list[str]:
        """Why each family was not searched, in plain words (:func:`left_out_sentence`), with the run's budget."""
        return left_out_sentences(self.left_out, self.budget_seconds)

    def left_out_lines(self) -> list[str]:
        """One plain line per family not searched, with why."""
        return left_out_lines(self.left_out)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The result's warnings (and a cancelled run's note)."""
        if self.result is None:
            return ()
        note = ("The run was cancelled before its budget was spent: the answer rests on the trials it finished.",)
        return (note if self.result.cancelled else ()) + tuple(self.result.warnings)


def tune_view(out: str | os.PathLike[str], elapsed: float | None = None) -> TuneView:
    """Read the output folder ``out`` (as far as it is written) into a :class:`TuneView`.

    Args:
        out: A tuning run's output folder (a folder not written yet gives an empty view).
        elapsed: The running job's seconds so far (the budget bar), if the page holds the job.

    Raises:
        InputError: a file in it is not what a tuning run writes (one line).
    """
    folder = Path(out)
    result = read_result(folder)
    trials = result.trials if result is not None and result.trials else read_trials(folder)
    return TuneView(out=folder, plan=read_plan(folder), trials=trials, result=result, elapsed=elapsed)


def result_view(result: TuneResult, out: str | os.PathLike[str] = "") -> TuneView:
    """The view of a result held without its folder (a saved session's): its own trials, no plan."""
    return TuneView(out=Path(out), plan=None, trials=result.trials, result=result)


def check_tune_folder(raw: str) -> Path:
    """A folder a user typed to open an earlier tuning run: it must hold ``result.json`` or ``trials.jsonl``.

    Raises:
        InputError: empty, missing, or not a tuning run's folder (one line).
    """
    text = raw.strip()
    if not text:
        raise InputError("give the output folder of a tuning run")
    folder = Path(text).expanduser()
    if not folder.is_dir():
        raise InputError(f"{text}: no such folder")
    if not (folder / RESULT_FILE).is_file() and not (folder / TRIALS_FILE).is_file():
        raise InputError(f"{text}: not a tuning run's folder (no {RESULT_FILE} or {TRIALS_FILE})")
    return folder


def finished_trials(out: str | os.PathLike[str]) -> int:
    """How many trials ``out`` holds already (a run started there resumes them: "Resumed: N trials")."""
    return len(read_trials(out))
