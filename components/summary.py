"""The Summary page's parts: its table, verdict and notes drawn, the benchmark's panel, the report button.

Nothing here computes a metric: the page's numbers are :func:`backend.lab.summary.summary_view`
(BC, CS and DS from the Quality page's store or the output cache, under the Quality page's
settings; the retrieval numbers from the last benchmark, ``BENCHMARK_JOB``, the Benchmark
page's job). What is missing is computed by the same jobs those pages start — the Quality
plan's scoring job (:func:`components.quality.scoring_job_panel`), the benchmark that
:func:`backend.lab.benchmark.plan_benchmark` plans under the Benchmark page's settings
(:func:`components.retrieval.start_benchmark`) — and their results go where those pages look, so
the three pages and the Summary always show the same numbers.

The numbers are two tables stacked, each narrower than the main pane at 1440×900 (≈ 978 px):
"Chunks and quality" (:data:`QUALITY_COLUMNS`) and "Retrieval on this document"
(:data:`RETRIEVAL_COLUMNS`), every column a fixed width (:data:`COLUMN_WIDTHS`) and rows tall
enough for the configuration label to wrap onto a second line. A benchmark on other corpora
is its own titled section (:func:`elsewhere_section`), never in those tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from backend.chunking import Chunking, ConfigEntry
from backend.errors import ChunkLabError, one_line
from backend.figures.charts import boundary_strip, config_color, size_histogram
from backend.figures.export import export_name
from backend.jobs import Job
from backend.lab.benchmark import plan_benchmark
from backend.lab.summary import SummaryView, question_sets_on_document, summary_estimates
from backend.metrics.report import QualityData
from backend.report.html import cached_curves, report_html
from backend.report.summary import GROUPS, METRIC_INFO, METRICS, ConfigSummary, RetrievalElsewhere, Summary
from backend.retrieval.evaluate import Benchmark
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document
from components.cached import sample_question_sets, sample_questions
from components.keys import BENCHMARK_JOB, EMB_CHOICE, QSET, SUMMARY, TUNE_RESULT
from components.lm_runs import session_models
from components.models import job_outcome
from components.quality import ESTIMATE_ROW_HEIGHT, ESTIMATE_WIDTH, HIGHLIGHT
from components.retrieval import md_text, start_benchmark
from components.settings import get
from components.views import grid

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler


__all__ = [
    "NOT_COMPUTED",
    "QUALITY_COLUMNS",
    "RETRIEVAL_COLUMNS",
    "COLUMN_WIDTHS",
    "INTERVAL_WIDTHS",
    "session_benchmark",
    "summary_frame",
    "styled_summary",
    "summary_column_config",
    "quality_table",
    "estimates_preview",
    "retrieval_table",
    "elsewhere_section",
    "summary_notes",
    "verdict_markdown",
    "retrieval_job_panel",
    "small_multiples",
    "report_button",
    "csv_button",
]

NOT_COMPUTED = "not computed yet"
_PLOT = {"displaylogo": False}
HISTOGRAMS_PER_ROW = 3
RETRIEVAL_COLUMNS = tuple(GROUPS["retrieval"])
QUALITY_COLUMNS = tuple(m for m in METRICS if m not in RETRIEVAL_COLUMNS)
# Pixels per column: the index, the configuration label, then each metric (the header must fit too).
# Chunks and quality: 40 + 300 + 535 = 875 px; retrieval: 40 + 300 + 430 = 770 px; the pane is ≈ 978 px.
INDEX_WIDTH = 40
LABEL_WIDTH = 300
COLUMN_WIDTHS = MappingProxyType({
    "chunks": 70, "tokens_mean": 95, "tokens_std": 85, "seconds": 75, "bc": 70, "cs": 70, "ds": 70,
    "recall": 90, "precision": 90, "iou": 80, "precision_omega": 170,
})
# Streamlit wraps text in a cell only when rows are taller than 4rem (64 px): a long configuration
# label, or "not computed yet" in a narrow column, then takes a second line instead of being cut.
ROW_HEIGHT = 68
ESTIMATE_LABEL_WIDTH = 150  # the least the configuration's label keeps when BC, CS and DS show estimates
# A retrieval column showing its mean's 95% interval over questions (``78.1% [70.0, 85.2]``), and precision-Ω,
# which may add "(on units)": 40 + 300 + 3 × 140 + 190 = 950 px, inside the ≈ 978 px pane.
INTERVAL_WIDTHS = MappingProxyType({"recall": 140, "precision": 140, "iou": 140, "precision_omega": 190})


def session_benchmark() -> tuple[Benchmark | None, Mapping[str, Any]]:
    """The last finished benchmark of the session (the Benchmark page's or the Summary's) and its job's meta."""
    job = st.session_state.get(BENCHMARK_JOB)
    if job is None or job.state != "done" or job.result is None:
        return None, {}
    return job.result.benchmark, job.meta


def _cell(row: ConfigSummary, metric: str) -> str:
    value = row.values.get(metric)
    if value is None:
        return NOT_COMPUTED
    note = row.notes.get(metric)
    return row.cell(metric) + (f" ({note})" if note else "")


def summary_frame(summary: Summary | RetrievalElsewhere, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """A table: one row per configuration (indexed by tag), its label, then each of ``metrics`` as shown.

    Args:
        summary: This document's Summary, or the section of a benchmark on other corpora.
        metrics: The columns (default every one of :data:`METRICS`).
    """
    rows = [{"configuration": r.config.label, **{m: _cell(r, m) for m in metrics}} for r in summary.rows]
    return pd.DataFrame(rows, index=[r.tag for r in summary.rows], columns=["configuration", *metrics])


def styled_summary(summary: Summary, metrics: Sequence[str] = METRICS) -> Styler:
    """:func:`summary_frame` with each column's best cell highlighted (:meth:`Summary.best`)."""
    frame = summary_frame(summary, metrics)
    best = {m: summary.best(m) for m in metrics}

    def mark(col: pd.Series) -> list[str]:
        return [HIGHLIGHT if best.get(col.name) == tag else "" for tag in col.index]

    return frame.style.apply(mark, axis=0, subset=list(metrics))


def _estimated_columns(summary: Summary | RetrievalElsewhere | None, metrics: Sequence[str]) -> set[str]:
    """The columns of ``metrics`` where some row shows an estimate from some of the pairs (loops over configurations)."""
    if summary is None:
        return set()
    return {m for m in metrics for r in summary.rows if r.estimate(m) is not None}


def _interval_columns(summary: Summary | RetrievalElsewhere | None, metrics: Sequence[str]) -> set[str]:
    """The retrieval columns of ``metrics`` where some row shows its mean's interval over questions."""
    if summary is None:
        return set()
    return {m for m in metrics if m in INTERVAL_WIDTHS and any(r.interval(m) is not None for r in summary.rows)}


def summary_column_config(
    metrics: Sequence[str] = METRICS, summary: Summary | RetrievalElsewhere | None = None
) -> dict[str, Any]:
    """``st.dataframe``'s columns: each metric's label and fixed width, and its meaning in one sentence on hover.

    A column showing an estimate (``0.93 ± 0.02 (120 of 1,747 pairs)``) is wider
    (:data:`~components.quality.ESTIMATE_WIDTH`) and the configuration's label narrower by
    as much, so the table still fits the pane. A retrieval column showing its means' 95%
    intervals over questions (``78.1% [70.0, 85.2]``) is :data:`INTERVAL_WIDTHS` wide.
    """
    wide = _estimated_columns(summary, metrics)
    spans = _interval_columns(summary, metrics)
    label = max(ESTIMATE_LABEL_WIDTH, LABEL_WIDTH - sum(ESTIMATE_WIDTH - COLUMN_WIDTHS[m] for m in wide))
    config: dict[str, Any] = {
        "_index": st.column_config.TextColumn("", width=INDEX_WIDTH),
        "configuration": st.column_config.TextColumn(
            "Configuration", width=label, help="The chunker and its parameters (hover for all of it)."
        ),
    }
    for m in metrics:
        info = METRIC_INFO[m]
        way = {True: " Higher is better.", False: " Lower is better.", None: ""}[info.higher_is_better]
        if m in wide:
            way += " With ±: an estimate from the pairs scored so far and its 95% interval."
        if m in spans:
            way += (" In brackets: the mean's 95% interval over the questions; a best is marked only where its "
                    "difference to every other configuration, question by question, excludes zero.")
        width = ESTIMATE_WIDTH if m in wide else INTERVAL_WIDTHS[m] if m in spans else COLUMN_WIDTHS[m]
        config[m] = st.column_config.TextColumn(info.label, help=info.help + way, width=width)
    return config


def _table(data: Any, metrics: Sequence[str], key: str, summary: Summary | RetrievalElsewhere | None = None) -> None:
    tall = bool(_estimated_columns(summary, metrics))
    st.dataframe(data, key=key, column_config=summary_column_config(metrics, summary),
                 row_height=ESTIMATE_ROW_HEIGHT if tall else ROW_HEIGHT)


def quality_table(summary: Summary, key: str = SUMMARY("table")) -> None:
    """This document's "Chunks and quality" table (an estimate reads ``0.93 ± 0.02 (120 of 1,747 pairs)``)."""
    st.markdown("**Chunks and quality**")
    _table(styled_summary(summary, QUALITY_COLUMNS), QUALITY_COLUMNS, key, summary)


def estimates_preview(view: SummaryView, doc_source: str) -> Callable[[Job], None]:
    """What the Summary's running scoring job shows under its bar: the verdict and table with its estimates so far.

    :func:`backend.lab.summary.summary_estimates` of the job's latest estimates, redrawn at every
    rerun of its progress (every second); the verdict calls a difference only where the
    intervals do not overlap.
    """

    def draw(job: Job) -> None:
        live = summary_estimates(view, doc_source, job.partial)
        st.markdown("**So far** (estimates from the pairs scored so far, ± their 95% intervals)")
        st.markdown(verdict_markdown(live.verdict))
        quality_table(live.summary, key=SUMMARY("estimates_table"))

    return draw


def retrieval_table(summary: Summary, no_set_line: str) -> None:
    """This document's "Retrieval on this document" table, or, where it would be, why there is none."""
    scope = summary.retrieval
    if scope is None:
        st.markdown("**Retrieval on this document**")
        st.info(md_text(no_set_line), icon=":material/quiz:")
        return
    questions = f"{scope.questions} question{'s' if scope.questions != 1 else ''}"
    st.markdown(
        "**" + md_text(f"Retrieval on this document — {questions} of {scope.set_title}") + "**"
        + (md_text(f" ({scope.across})") if scope.across else ""),
        help="Only the questions whose answers are in this document's text count.",
    )
    _table(styled_summary(summary, RETRIEVAL_COLUMNS), RETRIEVAL_COLUMNS, SUMMARY("retrieval_table"), summary)


def elsewhere_section(elsewhere: RetrievalElsewhere | None) -> None:
    """A benchmark's numbers on other corpora, under their own title (nothing when there are none)."""
    if elsewhere is None:
        return
    st.subheader(md_text(elsewhere.heading), anchor=False)
    st.caption(md_text(elsewhere.caption))
    _table(summary_frame(elsewhere, RETRIEVAL_COLUMNS), RETRIEVAL_COLUMNS, SUMMARY("elsewhere_table"), elsewhere)


def verdict_markdown(verdict: Sequence[str]) -> str:
    """The verdict as a Markdown list (every line escaped: configuration labels are user input)."""
    return "\n".join(f"- {md_text(line)}" for line in verdict)


def summary_notes(notes: str) -> None:
    """The line under the table, escaped (question-set and model names are user input)."""
    st.caption(md_text(notes))


# --- computing what is missing ----------------------------------------------------------------------


def _question_sets(doc: Document) -> tuple[dict[str, QuestionSet], dict[str, str], str]:
    """The question sets with questions on ``doc`` (name → those questions), their titles, and the one to start on.

    The session's set first, then the bundled samples' sets: only those on this document (a set
    on another document never gives its numbers), so the default is never another document's.
    """
    candidates: dict[str, QuestionSet] = {}
    titles = {}
    if st.session_state.get(QSET) is not None:
        candidates["session"] = st.session_state[QSET]
    for entry in sample_question_sets():
        candidates[f"sample:{entry.name}"] = sample_questions(entry.name)
        titles[f"sample:{entry.name}"] = f"Bundled: {entry.title}"
    on_doc = question_sets_on_document(doc, candidates)
    options = {
        name: titles.get(name, "The session's question set") + f" ({len(q)} question{'s' if len(q) != 1 else ''} on it)"
        for name, q in on_doc.items()
    }
    return on_doc, options, next(iter(options), "")


def retrieval_job_panel(doc: Document, entries: Sequence[ConfigEntry], missing: Sequence[str]) -> None:
    """Pick a question set and run the benchmark of every configuration (the Benchmark page's job), or its progress."""
    job = st.session_state.get(BENCHMARK_JOB)
    if job is not None and job.running:
        job_outcome(BENCHMARK_JOB, SUMMARY("bm_cancel"), "The benchmark")
        return
    sets, options, start = _question_sets(doc)
    if not options:
        st.caption(
            "No question set with questions on this document to run: generate one here, mark answers on the "
            "Retrieval page and save them, or import one on the Benchmark page."
        )
        return
    cols = st.columns([3, 2], vertical_alignment="bottom")
    name = cols[0].selectbox(
        "Question set", list(options), index=list(options).index(start), format_func=options.get,
        key=SUMMARY("qset"),
        help="Recall, precision, IoU and precision-Ω are measured on this set's questions on this document.",
    )
    n = len(entries)
    if cols[1].button(
        "Run the benchmark", key=SUMMARY("bm_run"), icon=":material/play_arrow:", type="primary",
        help=f"All {n} configuration(s) on one question set, as on the Benchmark page (missing: {', '.join(missing)}).",
    ):
        try:
            plan = plan_benchmark(
                sets[name], entries, session_models(), embedder=st.session_state.get(EMB_CHOICE) or None,
                retrieve=get("benchmark", "retrieve"), auto=get("benchmark", "auto"),
                cross_corpus=get("benchmark", "cross"), name=name,
            )
        except ChunkLabError as e:
            st.error(one_line(str(e)), icon=":material/error:")
            return
        start_benchmark(plan)
        job_outcome(BENCHMARK_JOB, SUMMARY("bm_cancel"), "The benchmark")
    elif job is not None:
        job_outcome(BENCHMARK_JOB, SUMMARY("bm_cancel"), "The benchmark")  # a failed or cancelled run says so


# --- figures and the report ----------------------------------------------------------------------------


def small_multiples(doc: Document, chunked: Sequence[tuple[ConfigEntry, Chunking]]) -> None:
    """The boundary strip (one row per configuration) and each configuration's chunk-size histogram side by side."""
    chunkings = [ch for _, ch in chunked]
    tags = [e.tag for e, _ in chunked]
    st.plotly_chart(
        boundary_strip(chunkings, tags, len(doc.text), revision=f"{doc.id}:summary:" + ",".join(tags)),
        key=SUMMARY("strip"), config=_PLOT,
    )
    for col, (e, ch) in grid(list(chunked), HISTOGRAMS_PER_ROW):
        with col:
            st.plotly_chart(
                size_histogram([ch], [e.tag], [config_color(e.uid)], "tokens"), key=SUMMARY(f"hist_{e.tag}"),
                config=_PLOT,
            )


def csv_button(summary: Summary, doc: Document) -> None:
    """"CSV": the Summary's rows, every metric, and their intervals (:meth:`Summary.to_csv`)."""
    st.download_button(
        "CSV", summary.to_csv, file_name=f"{export_name(doc.source, 'summary')}.csv", mime="text/csv",
        key=SUMMARY("csv"), icon=":material/download:", on_click="ignore",
        help="One row per configuration: every number of the tables, for BC, CS and DS the 95% interval "
        "(ci_low, ci_high) and the pairs scored of all (equal when exact), and for recall, precision, IoU and "
        "precision-Ω the 95% interval over the questions (ci_low, ci_high) and how many questions.",
    )


def report_button(
    summary: Summary,
    doc: Document,
    chunkings: Mapping[str, Chunking],
    *,
    benchmark: Benchmark | None,
    quality: Mapping[str, QualityData] | None,
    questions: QuestionSet | None = None,
) -> None:
    """"Download report": the one-file HTML report of this Summary, built only when clicked."""

    def build() -> str:
        lm = session_models()
        curves, ppl = cached_curves(doc, chunkings, lm.cache_only() if lm.error is None else None)
        return report_html(summary, doc, chunkings, benchmark=benchmark, quality=quality, curves=curves, ppl=ppl,
                           questions=questions, models={"language model": lm.label},
                           tuning=st.session_state.get(TUNE_RESULT))

    st.download_button(
        "Download report", build, file_name=f"{export_name(doc.source, 'summary')}.html", mime="text/html",
        key=SUMMARY("report"), icon=":material/download:", on_click="ignore", type="primary",
        help="One self-contained HTML file (figures included, opens offline): the verdict, the table and the charts "
             "(and the session's tuning result, when it has one).",
    )
