"""A tuning run's answer in words and in the one-file report: what it rests on, the pick, the comparisons, the tie.

The sentences are made here once, from a :class:`~backend.tune.types.TuneResult`, and shown alike by the
Tune page (:mod:`backend.lab.tune_view`), the Summary and the report's Tuning section
(:func:`tuning_section`). They state only what the result holds: the pick's held-out score with its
interval, each comparison's paired difference with its interval and what that interval says (better,
worse, or not told apart when it contains zero), the configurations tied with the pick, what was left
out and why, and the run's own warnings. Document names and configuration labels are untrusted: the
HTML section escapes every one.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go

from backend.figures.export import figure_div
from backend.figures.tune import objective_label, objective_text, pareto_figure, theta_figure, theta_points
from backend.metrics.intervals import Interval
from backend.tune.types import Comparison, LeftOut, TrialRow, TuneResult

__all__ = [
    "TOP_TRIALS",
    "SECTION_ID",
    "interval_text",
    "rests_on",
    "pick_line",
    "comparison_rows",
    "comparison_line",
    "tied_line",
    "left_out_lines",
    "top_trials",
    "tuning_lines",
    "tuning_section",
]

TOP_TRIALS = 10  # trials in the report's table, best first
SECTION_ID = "tuning"
_VERDICT_WORDS = {"better": "better", "worse": "worse", "tied": "not told apart (the interval contains 0)"}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def interval_text(ivl: Interval | None, objective: str, *, difference: bool = False) -> str:
    """``40.0% [31.0, 49.0]`` (BC: ``0.842 [0.8, 0.9]``); a difference signed, in points: ``+11.0 pts [2.0, 20.0]``."""
    if ivl is None or math.isnan(ivl.mean):
        return "n/a"
    ratio = objective != "bc"
    if not difference:
        return ivl.text(100.0, "%", 1) if ratio else ivl.text(1.0, "", 3)
    scale, unit, digits = (100.0, " pts", 1) if ratio else (1.0, "", 3)
    ends = ""
    if math.isfinite(ivl.low) and math.isfinite(ivl.high):
        ends = f" [{ivl.low * scale:+.{digits}f}, {ivl.high * scale:+.{digits}f}]"
    return f"{ivl.mean * scale:+.{digits}f}{unit}{ends}"


def rests_on(result: TuneResult) -> str:
    """What the numbers rest on: the document(s), the question set and how it was made, the split, the objective."""
    docs = ", ".join(result.documents) or "no document"
    n_docs = len(result.documents)
    sec = f", then {result.secondary} (minimised)" if result.secondary else ""
    cons = f"; constraints {', '.join(result.constraints)}" if result.constraints else ""
    return (f"On {'the document' if n_docs == 1 else f'{n_docs} documents'} {docs}, question set "
            f"{result.question_set} ({result.question_method} questions): "
            f"{_plural(len(result.tuning_questions), 'tuning question')}, {len(result.held_out_questions):,} held out "
            f"(seed {result.seed}); objective {objective_label(result.objective)}{sec}{cons}.")


def pick_line(result: TuneResult) -> str:
    """``Pick: <label> — held-out IoU 40.0% [31.0, 49.0] (95%, 4 questions).`` (or why there is none)."""
    if result.pick is None:
        return "No pick: no trial completed."
    score = result.pick_score
    if score is None:
        return f"Pick: {result.pick.label} (no held-out score)."
    return (f"Pick: {result.pick.label} — held-out {objective_label(result.objective)} "
            f"{interval_text(score, result.objective)} ({score.level:.0%}, {_plural(score.n, 'question')}).")


def _comparisons(result: TuneResult) -> list[Comparison]:
    return [c for c in (result.vs_runner_up, result.vs_baseline) if c is not None]


def comparison_rows(result: TuneResult) -> list[dict[str, Any]]:
    """One record per comparison (runner-up, baseline): against, configuration, its score, the difference, verdict."""
    return [
        {"against": c.against, "configuration": c.config.label,
         "score": interval_text(c.score, result.objective),
         "difference": interval_text(c.difference, result.objective, difference=True),
         "verdict": _VERDICT_WORDS[c.verdict]}
        for c in _comparisons(result)
    ]


def comparison_line(result: TuneResult, c: Comparison) -> str:
    """``Against the baseline <label> (29.0% …): +11.0 pts [2.0, 20.0] — better.``"""
    return (f"Against the {c.against} {c.config.label} ({interval_text(c.score, result.objective)}): "
            f"{interval_text(c.difference, result.objective, difference=True)} — {_VERDICT_WORDS[c.verdict]}.")


def tied_line(result: TuneResult) -> str:
    """The configurations not told apart from the pick on the held-out questions (or that none is)."""
    if result.pick is None:
        return ""
    if not result.tied:
        return "No other configuration is tied with the pick on the held-out questions."
    return (f"Not told apart from the pick on the held-out questions ({len(result.tied)}): "
            f"{'; '.join(c.label for c in result.tied)}.")


def left_out_lines(left_out: Sequence[LeftOut]) -> list[str]:
    """``semantic: needs an embedder, none is loaded`` — one line per family the plan did not search."""
    return [f"{x.family}: {x.reason}" for x in left_out]


def top_trials(trials: Sequence[TrialRow], n: int = TOP_TRIALS) -> list[TrialRow]:
    """The ``n`` best complete trials by objective (ties: the earlier trial first)."""
    done = [t for t in trials if t.state == "complete" and not math.isnan(t.objective)]
    return sorted(done, key=lambda t: (-t.objective, t.number))[:n]


def tuning_lines(result: TuneResult) -> list[str]:
    """The answer in lines (the Summary's Tuning section): verdict, pick, comparisons, tie, warnings."""
    lines = [result.verdict, pick_line(result)]
    lines += [comparison_line(result, c) for c in _comparisons(result)]
    tie = tied_line(result)
    if tie:
        lines.append(tie)
    if result.cancelled:
        lines.append("The run was cancelled before its budget was spent: the answer rests on the trials it finished.")
    lines += [f"Warning: {w}" for w in result.warnings]
    return lines


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    cell = ('<td class="num">{}</td>', "<td>{}</td>")
    body = "".join(
        "<tr>" + "".join(cell[0 if num else 1].format(_e(v)) for v, num in zip(row, numeric)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _default_div() -> Callable[[go.Figure], str]:
    count = [0]

    def div(fig: go.Figure) -> str:
        count[0] += 1
        return f'<div class="figure">{figure_div(fig, f"tuning-figure-{count[0]}")}</div>'

    return div


def tuning_section(result: TuneResult, div: Callable[[go.Figure], str] | None = None) -> str:
    """The report's Tuning section (``<section id="tuning">``): verdict, pick with its interval, comparisons, the
    tied set, left-out families, warnings, the top trials and the Pareto front (and θ curves for PPL families).

    Args:
        result: The tuning run's answer.
        div: Draws a figure as an HTML ``<div>`` (the report's, so figure ids stay unique); default: its own.
    """
    div = div or _default_div()
    obj = result.objective
    out = [f'<p class="meta">{_e(rests_on(result))}</p>', '<ul class="verdict">']
    out += [f"<li>{_e(line)}</li>" for line in tuning_lines(result)]
    out.append("</ul>")
    rows = comparison_rows(result)
    if rows:
        out.append("<h3>The pick against the runner-up and the baseline (paired, held-out questions)</h3>")
        out.append(_table(["Against", "Configuration", f"Its held-out {objective_label(obj)}",
                           "Pick minus it (95% interval)", "Verdict"],
                          [[r["against"], r["configuration"], r["score"], r["difference"], r["verdict"]] for r in rows],
                          [False, False, True, True, False]))
    if result.left_out:
        out.append("<h3>Families not searched</h3><ul>")
        out += [f"<li>{_e(line)}</li>" for line in left_out_lines(result.left_out)]
        out.append("</ul>")
    top = top_trials(result.trials)
    n_done = sum(1 for t in result.trials if t.state == "complete")
    out.append(f"<h3>Top trials on the tuning questions ({len(top)} of {_plural(n_done, 'complete trial')}, "
               f"{_plural(len(result.trials), 'trial')} in all)</h3>")
    if top:
        out.append(_table(
            ["#", "Configuration", f"{objective_label(obj)} (tuning)", "Interval", "Questions", "Chunks",
             "Mean tokens", "Index cost", "Seconds"],
            [[t.number, t.config.label, objective_text(t.objective, obj), interval_text(t.interval, obj), t.questions,
              t.chunks, f"{t.mean_tokens:,.1f}", f"{t.index_cost:,}", f"{t.seconds:.2f}"] for t in top],
            [True, False, True, True, True, True, True, True, True]))
        title = _e(f"{objective_label(obj)} against mean chunk tokens, every trial")
        out.append(div(pareto_figure(result.trials, objective=obj, axis="mean_tokens", baseline=result.baseline,
                                     pick=result.pick, title=title)))
        curves = theta_points(result.trials, result.theta_curves)
        if curves:
            out.append(div(theta_figure(curves, obj, title=_e(f"{objective_label(obj)} against θ (PPL families)"))))
    else:
        out.append('<p class="note">No trial completed.</p>')
    return f'<section id="{SECTION_ID}"><h2>Tuning</h2>{"".join(out)}</section>'
