"""The Quality page's table and scoring job: the backend's quality rows as a styled DataFrame, the job's panel.

The numbers are :func:`backend.metrics.report.table_rows` (gathered by
:func:`backend.lab.quality.quality_view`), the computation behind the CLI's ``metrics`` too;
this module only lays them out: one row per configuration, each metric column's best value
highlighted (which way is best comes from :data:`~backend.metrics.report.METRIC_TABLE`). The
figures are in :mod:`backend.figures.quality`. The scores live in the session's store
(:func:`quality_store`), shared by the Quality page and the Summary, which both run the
scoring job of a :class:`~backend.lab.quality.QualityPlan` with :func:`scoring_job_panel`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import streamlit as st

from backend.jobs import Job
from backend.lab.quality import QualityPlan, QualityView, fold_scoring, quality_view
from backend.metrics.cost import Throughput
from backend.metrics.estimate import Estimate
from backend.metrics.report import BEST, COLUMNS, METRIC_TABLE, QualitySettings
from backend.report.html import NOT_COMPUTED
from backend.report.summary import estimate_text, leaders_of
from backend.text.document import Document
from components.keys import QUALITY_STORE, QUALITY_THROUGHPUT
from components.lm_runs import model_job_panel

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

__all__ = [
    "CHUNKER_WIDTH",
    "HIGHLIGHT",
    "METRIC_LABELS",
    "PANE_WIDTH",
    "PLACEHOLDER",
    "best_cells",
    "column_config",
    "estimate_best",
    "estimate_column_config",
    "estimate_frame",
    "estimated",
    "estimates_preview",
    "estimates_table",
    "column_width",
    "column_widths",
    "quality_frame",
    "quality_store",
    "scoring_job_panel",
    "session_throughput",
    "styled_table",
]

METRIC_LABELS = {"bc": "BC — boundary clarity", "cs": "CS — chunk stickiness", "ds": "DS — dissimilarity"}
CHUNKER_WIDTH = 190  # least pixels of the configuration label column (the table's only long text)
PLACEHOLDER = NOT_COMPUTED  # what the table shows for a metric not computed, as the Summary does
# The narrowest main pane the table must fit without scrolling sideways (a 1280-pixel screen's wide
# layout, less the grid's borders); a wider pane (1440×900: about 960) stretches every column alike.
PANE_WIDTH = 816
PLACEHOLDER_WIDTH = 116  # pixels that show "not computed yet" in the grid's font
LABEL_MIN_WIDTH = 100  # the least the configuration's label keeps when every metric is missing
HIGHLIGHT = "background-color: #dcfce7; font-weight: 600"
_FORMATS = {"mean_tokens": "{:.1f}", "bc": "{:.4f}", "cs_complete": "{:.3f}", "cs_incomplete": "{:.3f}", "ds": "{:.4f}"}


def quality_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows of :func:`~backend.metrics.report.table_rows` as a DataFrame indexed by tag; a missing metric is ``nan``."""
    frame = pd.DataFrame(list(rows), columns=list(COLUMNS))
    metrics = [m.name for m in METRIC_TABLE]
    frame[metrics] = frame[metrics].astype(float)  # None (not computed) → nan
    return frame.set_index("configuration", drop=False)


def best_cells(table: pd.DataFrame) -> dict[str, list[Any]]:
    """Per metric column, the index labels of its best value (ties all count; an all-``nan`` column: none)."""
    out: dict[str, list[Any]] = {}
    for col, how in BEST.items():
        if col not in table:
            continue
        values = table[col].astype(float)
        if values.notna().sum() == 0:
            out[col] = []
            continue
        best = values.max() if how == "max" else values.min()
        out[col] = [i for i, v in values.items() if np.isfinite(v) and math.isclose(v, best, abs_tol=1e-12)]
    return out


def styled_table(table: pd.DataFrame) -> Styler:
    """The table with each metric column's best value highlighted (a pandas ``Styler``).

    A metric not computed reads "not computed yet", as on the Summary: in the Styler's HTML here,
    and in the browser through ``st.dataframe(..., placeholder=PLACEHOLDER)`` (the data grid shows
    a missing number as its placeholder, "None" by default, whatever the Styler says).
    """
    best = best_cells(table)

    def mark(col: pd.Series) -> list[str]:
        winners = set(best.get(col.name, ()))
        return [HIGHLIGHT if i in winners else "" for i in col.index]

    shown = table.drop(columns=["configuration"])
    formats = {c: _FORMATS.get(c, "{:.4f}") for c in ("mean_tokens", *BEST)}
    return shown.style.apply(mark, axis=0, subset=[c for c in BEST if c in shown]).format(
        formats, na_rep=PLACEHOLDER
    )


def column_width(label: str) -> int:
    """Pixels that show a numeric column's header ``label`` whole (about 7 px a character, 28 px of padding)."""
    return max(65, 28 + 7 * len(label))


def column_widths(table: pd.DataFrame | None = None) -> dict[str, int]:
    """Pixels per column: numbers as wide as their header or "not computed yet" (where one is), the label the rest.

    The whole table fits :data:`PANE_WIDTH` (a 1280-pixel screen) and a wider pane stretches it;
    the configuration's label takes what the numbers leave (at least :data:`LABEL_MIN_WIDTH`), so
    it is as long as it can be while DS stays in view. Without ``table`` every metric column is
    sized for "not computed yet".
    """
    widths = {"_index": 40, "chunks": column_width("Chunks"), "mean_tokens": column_width("Mean tokens")}
    for m in METRIC_TABLE:
        missing = table is None or m.name not in table or bool(table[m.name].isna().any())
        widths[m.name] = max(column_width(m.label), PLACEHOLDER_WIDTH if missing else column_width("0.0000"))
    return {"_index": widths.pop("_index"), "chunker": max(LABEL_MIN_WIDTH, PANE_WIDTH - 40 - sum(widths.values())),
            **widths}


def _leading_columns(widths: dict[str, int], mean_tokens: Any) -> dict[str, Any]:
    """The columns before the metrics: index, chunker, chunks, and mean tokens as ``mean_tokens`` (a column type)."""
    return {
        "_index": st.column_config.TextColumn("", width=widths["_index"]),
        "chunker": st.column_config.TextColumn(
            "Chunker", width=widths["chunker"], help="The configuration (its full label is in the CSV)."
        ),
        "chunks": st.column_config.NumberColumn("Chunks", format="%d", width=widths["chunks"]),
        "mean_tokens": mean_tokens("Mean tokens", width=widths["mean_tokens"]),
    }


def column_config(table: pd.DataFrame | None = None) -> dict[str, Any]:
    """``st.dataframe``'s column configuration of ``table`` (:func:`quality_frame`): headers and help from the metric table.

    Every column has a fixed width (:func:`column_widths`): the numbers as wide as their header
    or "not computed yet", the configuration's label the rest of the pane (hover or the CSV for
    all of it), so the whole table, DS included, fits the wide layout's main column instead of a
    long label pushing the last metrics out of sight.
    """
    widths = column_widths(table)
    config = _leading_columns(widths, st.column_config.Column)
    for m in METRIC_TABLE:
        config[m.name] = st.column_config.Column(m.label, help=m.help, width=widths[m.name])
    return config


# --- while the scoring job runs: estimates with their intervals --------------------------------------------------

ESTIMATE_WIDTH = 150  # pixels of a metric column holding "0.93 ± 0.02 (120 of 1,747 pairs)" (wrapped)
# Streamlit wraps a cell's text only in rows taller than 4rem (64 px); three lines fit an estimate's label.
ESTIMATE_ROW_HEIGHT = 84
ESTIMATES_NOTE = (
    "Estimates so far, redrawn as the job scores: each ± narrows as pairs are scored and closes on the exact value "
    "once every pair is. Green marks a column's best only where its interval does not overlap another's. The BC "
    "chart, CS against K and the stickiness graphs need every pair: they are drawn when the job ends."
)
SAMPLE_NOTE = (
    "Estimates from the pairs a stopped run scored (how many, in brackets): scoring again goes on from them. Green "
    "marks a column's best only where its interval does not overlap another's. The figures need every pair of a "
    "configuration."
)


def _estimate(row: Mapping[str, Any], name: str) -> Estimate | None:
    """The row's estimate of metric ``name`` when it stands on only some of the pairs; None when exact or unknown."""
    est = (row.get("estimates") or {}).get(name)
    return est if est is not None and est.estimate is not None and not est.exact else None


def estimated(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any value of the rows is an estimate from some of the pairs (not the exact value yet)."""
    return any(_estimate(r, m.name) is not None for r in rows for m in METRIC_TABLE)


def _estimate_cell(row: Mapping[str, Any], name: str) -> str:
    est = _estimate(row, name)
    if est is not None:
        return estimate_text(est)
    value = row.get(name)
    if value is None or not math.isfinite(float(value)):
        return PLACEHOLDER
    return _FORMATS[name].format(float(value))


def estimate_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows as text, indexed by tag: an estimate reads ``0.93 ± 0.02 (120 of 1,747 pairs)``, an exact value as the table formats it."""
    frame = pd.DataFrame(
        [
            {"configuration": r["configuration"], "chunker": r["chunker"], "chunks": int(r["chunks"]),
             "mean_tokens": _FORMATS["mean_tokens"].format(float(r["mean_tokens"])),
             **{m.name: _estimate_cell(r, m.name) for m in METRIC_TABLE}}
            for r in rows
        ],
        columns=list(COLUMNS),
    )
    return frame.set_index("configuration", drop=False)


def estimate_best(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Per metric column, the tags to highlight: its best, only where it is told apart from every other.

    :func:`backend.report.summary.leaders_of`, the verdict's rule: an estimate is best only when
    its 95% interval overlaps no other's; exact values compare as the exact table does (a tie
    as shown marks every tied row).
    """
    out: dict[str, list[Any]] = {}
    for m in METRIC_TABLE:
        items = []
        for r in rows:
            value = r.get(m.name)
            if value is None or not math.isfinite(float(value)):
                continue
            exact = Estimate(float(value), float(value), float(value), 0, 0)
            items.append((r["configuration"], _estimate(r, m.name) or exact))
        fmt = _FORMATS[m.name]
        leaders = leaders_of(items, higher=m.best == "max", shown=lambda e, f=fmt: f.format(e.estimate))
        ties = all(e.exact for name, e in items if name in leaders)
        out[m.name] = leaders if len(leaders) == 1 or ties else []
    return out


def estimate_column_config(frame: pd.DataFrame) -> dict[str, Any]:
    """``st.dataframe``'s columns of :func:`estimate_frame`: a column holding an estimate is wide enough for its label."""
    widths = column_widths(None)
    for m in METRIC_TABLE:
        if frame[m.name].str.contains("±", regex=False).any():
            widths[m.name] = ESTIMATE_WIDTH
        elif not (frame[m.name] == PLACEHOLDER).any():
            widths[m.name] = max(column_width(m.label), column_width("0.0000"))
    widths.pop("chunker")
    widths["chunker"] = max(LABEL_MIN_WIDTH, PANE_WIDTH - sum(widths.values()))
    config = _leading_columns(widths, st.column_config.TextColumn)
    for m in METRIC_TABLE:
        config[m.name] = st.column_config.TextColumn(
            m.label, width=widths[m.name],
            help=f"{m.help}. While the job runs: the estimate ± its 95% interval (pairs scored of all).",
        )
    return config


def estimates_table(view: QualityView, key: str, *, running: bool = True) -> None:
    """The table of ``view`` with estimates: a running job's (:func:`~backend.lab.quality.quality_view` with
    ``partial``), or, ``running=False``, those of the pairs a stopped run left."""
    frame = estimate_frame(view.rows)
    best = estimate_best(view.rows)

    def mark(col: pd.Series) -> list[str]:
        winners = set(best.get(col.name, ()))
        return [HIGHLIGHT if i in winners else "" for i in col.index]

    shown = frame.drop(columns=["configuration"])
    st.dataframe(
        shown.style.apply(mark, axis=0, subset=[c for c in BEST if c in shown]), key=key,
        column_config=estimate_column_config(frame), row_height=ESTIMATE_ROW_HEIGHT, placeholder=PLACEHOLDER,
    )
    st.caption((ESTIMATES_NOTE if running else SAMPLE_NOTE) + " " + view.notes)


def estimates_preview(plan: QualityPlan, settings: QualitySettings, doc_source: str, key: str) -> Callable[[Job], None]:
    """What a running scoring job shows under its bar: the table of its estimates so far (:func:`estimates_table`).

    Drawn at every rerun of the job's progress (every second), from the job's latest
    :class:`~backend.metrics.estimate.QualityEstimates` (``job.partial``), under ``settings``.
    """

    def draw(job: Job) -> None:
        view = quality_view(plan, settings, doc_source, partial=job.partial)
        if view.rows:
            estimates_table(view, key)

    return draw


def quality_store(doc: Document) -> dict[Hashable, Any]:
    """The session's pair tables and vectors of ``doc`` (a new store for another document), shared with the Summary."""
    store = st.session_state.get(QUALITY_STORE)
    if store is None or store.get("doc") != doc.id:
        store = st.session_state[QUALITY_STORE] = {"doc": doc.id}
    return store


def session_throughput() -> Throughput | None:
    """The scoring speed measured on this session's last scoring job (None: none measured yet)."""
    return st.session_state.get(QUALITY_THROUGHPUT)


def scoring_job_panel(
    plan: QualityPlan,
    store: dict[Hashable, Any],
    *,
    job_key: str,
    run_key: str,
    cancel_key: str,
    confirm_key: str,
    run_label: str,
    preview: Callable[[Job], None] | None = None,
) -> bool:
    """The button that starts ``plan``'s scoring job (ticked first when long), its progress, its end.

    The finished job's tables and vectors go to ``store`` and its measured speed to the
    session (the next cost estimate's), then the page reruns to show them. ``preview(job)``
    draws the running job's estimates under its bar (:func:`estimates_preview`).

    Returns:
        Whether ``plan``'s job is running (its estimates are what the page has to show).
    """
    if plan.job is None:
        return False
    job = model_job_panel(
        job_key, plan.job, run_label=run_label, run_key=run_key, cancel_key=cancel_key, auto=False, what="Scoring",
        confirm=plan.confirm_label, confirm_key=confirm_key, preview=preview,
    )
    if job is None:
        running: Job | None = st.session_state.get(job_key)
        return running is not None and running.running and running.meta.get("signature") == plan.job.signature
    st.session_state[QUALITY_THROUGHPUT] = fold_scoring(plan, job.result, store)
    st.session_state.pop(job_key, None)
    st.rerun()
