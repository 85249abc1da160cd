"""Figures and tables of a tuning run: the trial table, the Pareto front, the θ → objective curve, the budget.

Each takes the run's :class:`~backend.tune.types.TrialRow` objects (read from ``trials.jsonl`` while the
run goes on, or a finished :class:`~backend.tune.types.TuneResult`'s), so the Tune page and the one-file
report draw the same thing. No rule is decided here but the Pareto front's, which is a definition: a
complete trial is on it when no other complete trial scores at least as high at no greater cost, and
strictly better on one of the two. Configuration labels reach a hover or a legend escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from backend.chunkers import REGISTRY
from backend.chunking import ChunkerConfig
from backend.figures.charts import config_color, legend_with_title
from backend.tune.types import TrialRow

__all__ = [
    "PARETO_AXES",
    "OBJECTIVE_LABELS",
    "THETA_PARAM",
    "objective_label",
    "objective_text",
    "trial_frame",
    "pareto_front",
    "pareto_figure",
    "theta_families",
    "theta_points",
    "theta_figure",
    "budget_figure",
]

# The cost axes the Pareto front is drawn against (each minimised): the trial's attribute and its axis title.
PARETO_AXES: Mapping[str, str] = {
    "mean_tokens": "mean chunk tokens",
    "chunks": "chunks",
    "index_cost": "index cost (tokens embedded)",
}
OBJECTIVE_LABELS: Mapping[str, str] = {
    "iou": "IoU", "recall": "recall", "precision": "precision", "precision_omega": "precision-Ω", "bc": "BC",
}
THETA_PARAM = "threshold"  # θ's name in code (a PPL chunker's parameter)
_RATIOS = ("iou", "recall", "precision", "precision_omega")  # shown as percentages
_FAINT = 0.25
_PICK, _BASELINE, _FRONT = "#dc2626", "#475569", "#0f172a"


def objective_label(objective: str) -> str:
    """``IoU``, ``recall``… (an unknown name as it is)."""
    return OBJECTIVE_LABELS.get(objective, objective)


def _scale(objective: str) -> tuple[float, str]:
    return (100.0, "%") if objective in _RATIOS else (1.0, "")


def objective_text(value: float, objective: str) -> str:
    """A value of ``objective`` as the page writes it: ``31.4%`` for a ratio, ``0.842`` for BC; NaN: ``n/a``."""
    if value is None or math.isnan(value):
        return "n/a"
    scale, unit = _scale(objective)
    return f"{value * scale:.1f}{unit}" if unit else f"{value:.3f}"


def trial_frame(trials: Sequence[TrialRow], objective: str = "iou") -> pd.DataFrame:
    """The live trial table: one line per trial, in trial order.

    Columns: ``number``, ``configuration`` (its label), ``family``, ``state``, ``objective`` (the mean on the
    questions it was scored on, scaled as :func:`objective_text`), ``low`` and ``high`` (its interval's ends),
    ``interval`` (the interval as text, with its level), ``questions``, ``chunks``, ``mean_tokens``,
    ``index_cost``, ``seconds``, ``reason``.
    """
    scale, _ = _scale(objective)
    rows = []
    for t in sorted(trials, key=lambda t: t.number):
        ivl = t.interval
        finite = ivl is not None and math.isfinite(ivl.low) and math.isfinite(ivl.high)
        rows.append({
            "number": t.number, "configuration": t.config.label, "family": t.config.name, "state": t.state,
            "objective": None if math.isnan(t.objective) else t.objective * scale,
            "low": ivl.low * scale if finite else None, "high": ivl.high * scale if finite else None,
            "interval": (f"{ivl.text(scale, '%' if scale != 1 else '', 1 if scale != 1 else 3)} "
                         f"({ivl.level:.0%}, {ivl.n} questions)") if ivl is not None else "",
            "questions": t.questions, "chunks": t.chunks, "mean_tokens": round(t.mean_tokens, 1),
            "index_cost": t.index_cost, "seconds": round(t.seconds, 2), "reason": t.reason,
        })
    columns = ["number", "configuration", "family", "state", "objective", "low", "high", "interval", "questions",
               "chunks", "mean_tokens", "index_cost", "seconds", "reason"]
    return pd.DataFrame(rows, columns=columns)


def _cost(t: TrialRow, axis: str) -> float:
    if axis not in PARETO_AXES:
        raise ValueError(f"axis must be one of {', '.join(PARETO_AXES)}, got {axis!r}")
    return float(getattr(t, axis))


def pareto_front(trials: Sequence[TrialRow], axis: str = "mean_tokens") -> tuple[TrialRow, ...]:
    """The complete trials no other complete trial dominates (objective up, ``axis`` down), cheapest first.

    Of trials with the same objective and cost, the first (lowest number) stands for them.

    Raises:
        ValueError: an unknown ``axis``.
    """
    done = [t for t in trials if t.state == "complete" and not math.isnan(t.objective)]
    done.sort(key=lambda t: (_cost(t, axis), -t.objective, t.number))
    front: list[TrialRow] = []
    best = -math.inf
    for t in done:  # cheapest first: a trial is on the front when it beats every cheaper one
        if t.objective > best:
            front.append(t)
            best = t.objective
    return tuple(front)


def _family_colors(trials: Sequence[TrialRow]) -> dict[str, str]:
    families = sorted({t.config.name for t in trials})
    return {f: config_color(i) for i, f in enumerate(families)}


def _hover(t: TrialRow, objective: str, axis: str) -> str:
    return (f"#{t.number} {html.escape(t.config.label, quote=False)}<br>{objective_label(objective)} "
            f"{objective_text(t.objective, objective)} on {t.questions} questions ({t.state})<br>"
            f"{PARETO_AXES[axis]}: {_cost(t, axis):,.1f}")


def _marker(fig: go.Figure, t: TrialRow | None, objective: str, axis: str, name: str, symbol: str,
            color: str) -> None:
    if t is None or math.isnan(t.objective):
        return
    scale, _ = _scale(objective)
    fig.add_trace(go.Scatter(
        x=[_cost(t, axis)], y=[t.objective * scale], mode="markers", name=name,
        marker={"symbol": symbol, "size": 16, "color": "rgba(0,0,0,0)", "line": {"color": color, "width": 2.5}},
        hovertext=[_hover(t, objective, axis)], hoverinfo="text",
    ))


def _find(trials: Sequence[TrialRow], config: ChunkerConfig | None) -> TrialRow | None:
    if config is None:
        return None
    for t in trials:
        if t.config == config and t.state == "complete":
            return t
    return None


def pareto_figure(trials: Sequence[TrialRow], *, objective: str = "iou", axis: str = "mean_tokens",
                  baseline: ChunkerConfig | None = None, pick: ChunkerConfig | None = None,
                  title: str = "") -> go.Figure:
    """The objective against a cost: complete trials coloured by family, pruned ones faint, the front as a step line.

    Args:
        trials: The trials so far (failed ones are not drawn: they have no score).
        objective: The objective's name (the y axis; ratios in percent).
        axis: The cost axis, a key of :data:`PARETO_AXES`.
        baseline: The baseline configuration, ringed (a grey square) when a complete trial ran it.
        pick: The recommended configuration, ringed (a red star) when a complete trial ran it.
        title: The legend's heading, already escaped (what the numbers rest on).

    Raises:
        ValueError: an unknown ``axis``.
    """
    if axis not in PARETO_AXES:
        raise ValueError(f"axis must be one of {', '.join(PARETO_AXES)}, got {axis!r}")
    scale, unit = _scale(objective)
    colors = _family_colors(trials)
    fig = go.Figure()
    for family, color in colors.items():
        for state, opacity in (("complete", 0.9), ("pruned", _FAINT)):
            mine = [t for t in trials if t.config.name == family and t.state == state and not math.isnan(t.objective)]
            if not mine:
                continue
            fig.add_trace(go.Scatter(
                x=[_cost(t, axis) for t in mine], y=[t.objective * scale for t in mine], mode="markers",
                name=f"{family} ({len(mine)} {state})", legendgroup=family,
                marker={"color": color, "size": 9 if state == "complete" else 7, "opacity": opacity},
                hovertext=[_hover(t, objective, axis) for t in mine], hoverinfo="text",
            ))
    front = pareto_front(trials, axis)
    if front:
        fig.add_trace(go.Scatter(
            x=[_cost(t, axis) for t in front], y=[t.objective * scale for t in front], mode="lines",
            line={"shape": "hv", "color": _FRONT, "width": 1.5, "dash": "dot"},
            name=f"Pareto front ({len(front)})", hoverinfo="skip",
        ))
    _marker(fig, _find(trials, baseline), objective, axis, "baseline", "square", _BASELINE)
    _marker(fig, _find(trials, pick), objective, axis, "pick", "star", _PICK)
    fig.update_layout(
        xaxis_title=PARETO_AXES[axis], yaxis_title=f"{objective_label(objective)}{' (%)' if unit else ''}",
        height=420, margin={"l": 60, "r": 20, "t": 40, "b": 50}, legend=legend_with_title(title),
    )
    return fig


def theta_families() -> tuple[str, ...]:
    """The registered chunkers with a θ (``threshold``) parameter: the PPL families."""
    return tuple(name for name, cls in REGISTRY.items() if any(p.name == THETA_PARAM for p in cls.params))


def theta_points(trials: Sequence[TrialRow],
                 curves: Mapping[str, Sequence[tuple[float, float]]] | None = None) -> dict[str, list[tuple[float, float]]]:
    """θ → objective per PPL family, sorted by θ: the result's curves when it has them, else its complete trials.

    A family in ``curves`` (``TuneResult.theta_curves``: θ searched on scores computed once) is taken as
    given; another PPL family's points are its complete trials' (θ, objective).
    """
    out: dict[str, list[tuple[float, float]]] = {
        str(k): sorted((float(a), float(b)) for a, b in v) for k, v in (curves or {}).items() if v
    }
    ppl = set(theta_families())
    for t in trials:
        family = t.config.name
        if family in ppl and family not in (curves or {}) and t.state == "complete" and not math.isnan(t.objective):
            theta = t.config.params_dict.get(THETA_PARAM)
            if theta is not None:
                out.setdefault(family, []).append((float(theta), t.objective))
    return {k: sorted(v) for k, v in sorted(out.items())}


def theta_figure(points: Mapping[str, Sequence[tuple[float, float]]], objective: str = "iou",
                 title: str = "") -> go.Figure:
    """One line per PPL family: the objective at each θ tried (:func:`theta_points`)."""
    scale, unit = _scale(objective)
    fig = go.Figure()
    for i, (family, pts) in enumerate(points.items()):
        fig.add_trace(go.Scatter(
            x=[p[0] for p in pts], y=[p[1] * scale for p in pts], mode="lines+markers", name=family,
            line={"color": config_color(i)},
            hovertemplate=f"{html.escape(family, quote=False)} θ=%{{x:.3g}}: %{{y:.3g}}{unit}<extra></extra>",
        ))
    fig.update_layout(
        xaxis_title="θ (threshold)", yaxis_title=f"{objective_label(objective)}{' (%)' if unit else ''}", height=360,
        margin={"l": 60, "r": 20, "t": 40, "b": 50}, legend=legend_with_title(title),
    )
    return fig


def budget_figure(used_seconds: float, budget_seconds: float) -> go.Figure:
    """One horizontal bar: the budget's seconds used and left (used beyond the budget shows as used)."""
    used = max(0.0, used_seconds)
    left = max(0.0, budget_seconds - used)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[used], y=["budget"], orientation="h", name=f"used {used:,.0f} s",
                         marker={"color": "#2563eb"}, hovertemplate="used %{x:,.0f} s<extra></extra>"))
    fig.add_trace(go.Bar(x=[left], y=["budget"], orientation="h", name=f"left {left:,.0f} s",
                         marker={"color": "#cbd5e1"}, hovertemplate="left %{x:,.0f} s<extra></extra>"))
    fig.update_layout(barmode="stack", height=140, xaxis_title="seconds", showlegend=True,
                      margin={"l": 60, "r": 20, "t": 30, "b": 40},
                      legend={**legend_with_title(""), "traceorder": "normal"}, yaxis={"showticklabels": False})
    return fig
