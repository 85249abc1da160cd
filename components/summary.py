"""The Summary page's parts: its table, verdict and notes drawn, the benchmark's panel, the report button.

Nothing here computes a metric: the page's numbers are :func:`backend.lab.summary.summary_view`
(BC, CS and DS from the Quality page's store or the output cache, under the Quality page's
settings; the retrieval numbers from the last benchmark, ``BENCHMARK_JOB``, the Benchmark
page's job). What is missing is computed by the same jobs those pages start — the Quality
plan's scoring job (:func:`components.quality.scoring_job_panel`), the benchmark that
:func:`backend.lab.benchmark.plan_benchmark` plans under the Benchmark page's settings
(:func:`components.retrieval.start_benchmark`) — and their results go where those pages look, so
the three pages and the Summary always show the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from backend.chunking import Chunking, ConfigEntry
from backend.errors import ChunkLabError, one_line
from backend.figures.charts import boundary_strip, config_color, size_histogram
from backend.figures.export import export_name
from backend.lab.benchmark import plan_benchmark
from backend.metrics.report import QualityData
from backend.report.html import cached_curves, report_html
from backend.report.summary import METRIC_INFO, METRICS, Summary, format_value
from backend.retrieval.evaluate import Benchmark
from backend.retrieval.questions import QuestionSet
from backend.text.document import Document
from components.cached import sample_question_sets, sample_questions
from components.documents import current_sample
from components.keys import BENCHMARK_JOB, EMB_CHOICE, QSET, SUMMARY
from components.lm_runs import session_models
from components.models import job_outcome
from components.quality import CHUNKER_WIDTH, HIGHLIGHT
from components.retrieval import md_text, start_benchmark
from components.settings import get
from components.views import grid

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler


__all__ = [
    "NOT_COMPUTED",
    "session_benchmark",
    "summary_frame",
    "styled_summary",
    "summary_column_config",
    "summary_notes",
    "verdict_markdown",
    "retrieval_job_panel",
    "small_multiples",
    "report_button",
]

NOT_COMPUTED = "not computed yet"
_PLOT = {"displaylogo": False}
HISTOGRAMS_PER_ROW = 3



def session_benchmark() -> tuple[Benchmark | None, Mapping[str, Any]]:
    """The last finished benchmark of the session (the Benchmark page's or the Summary's) and its job's meta."""
    job = st.session_state.get(BENCHMARK_JOB)
    if job is None or job.state != "done" or job.result is None:
        return None, {}
    return job.result.benchmark, job.meta


def _cell(summary: Summary, tag: str, metric: str) -> str:
    row = summary.row(tag)
    value = row.values.get(metric)
    if value is None:
        return NOT_COMPUTED
    note = row.notes.get(metric)
    return format_value(metric, value) + (f" ({note})" if note else "")


def summary_frame(summary: Summary) -> pd.DataFrame:
    """The table: one row per configuration (indexed by tag), its label, then every metric as shown."""
    rows = [
        {"configuration": r.config.label, **{m: _cell(summary, r.tag, m) for m in METRICS}} for r in summary.rows
    ]
    return pd.DataFrame(rows, index=[r.tag for r in summary.rows], columns=["configuration", *METRICS])


def styled_summary(summary: Summary) -> Styler:
    """:func:`summary_frame` with each column's best cell highlighted (:meth:`Summary.best`)."""
    frame = summary_frame(summary)
    best = {m: summary.best(m) for m in METRICS}

    def mark(col: pd.Series) -> list[str]:
        return [HIGHLIGHT if best.get(col.name) == tag else "" for tag in col.index]

    return frame.style.apply(mark, axis=0, subset=list(METRICS))


def summary_column_config() -> dict[str, Any]:
    """``st.dataframe``'s columns: each metric's label, and its meaning in one sentence on hover."""
    config: dict[str, Any] = {
        "_index": st.column_config.TextColumn("", width=40),
        "configuration": st.column_config.TextColumn(
            "Configuration", width=CHUNKER_WIDTH, help="The chunker and its parameters (hover for all of it)."
        ),
    }
    for m in METRICS:
        info = METRIC_INFO[m]
        way = {True: " Higher is better.", False: " Lower is better.", None: ""}[info.higher_is_better]
        config[m] = st.column_config.TextColumn(info.label, help=info.help + way)
    return config


def verdict_markdown(verdict: Sequence[str]) -> str:
    """The verdict as a Markdown list (every line escaped: configuration labels are user input)."""
    return "\n".join(f"- {md_text(line)}" for line in verdict)


def summary_notes(notes: str) -> None:
    """The line under the table, escaped (question-set and model names are user input)."""
    st.caption(md_text(notes))


# --- computing what is missing ----------------------------------------------------------------------


def _question_sets(doc: Document) -> tuple[dict[str, str], str]:
    """The question sets to offer (name → title) and the one to start on: the session's, else the sample's."""
    options = {}
    if st.session_state.get(QSET) is not None:
        options["session"] = f"The session's question set ({len(st.session_state[QSET])} questions)"
    for entry in sample_question_sets():
        options[f"sample:{entry.name}"] = f"Bundled: {entry.title}"
    sample = current_sample()
    if "session" in options:
        return options, "session"
    mine = f"sample:{sample.name}" if sample is not None else None
    return options, mine if mine in options else next(iter(options), "")


def _question_set(name: str) -> QuestionSet:
    """The question set ``name`` (``session`` or ``sample:NAME``)."""
    if name == "session":
        return st.session_state[QSET]
    return sample_questions(name.removeprefix("sample:"))


def retrieval_job_panel(doc: Document, entries: Sequence[ConfigEntry], missing: Sequence[str]) -> None:
    """Pick a question set and run the benchmark of every configuration (the Benchmark page's job), or its progress."""
    job = st.session_state.get(BENCHMARK_JOB)
    if job is not None and job.running:
        job_outcome(BENCHMARK_JOB, SUMMARY("bm_cancel"), "The benchmark")
        return
    options, start = _question_sets(doc)
    if not options:
        st.caption("No question set: save marked queries on the Retrieval page or import one on the Benchmark page.")
        return
    cols = st.columns([3, 2], vertical_alignment="bottom")
    name = cols[0].selectbox(
        "Question set", list(options), index=list(options).index(start), format_func=options.get,
        key=SUMMARY("qset"), help="Recall, precision, IoU and precision-Ω are measured on these questions' excerpts.",
    )
    n = len(entries)
    if cols[1].button(
        "Run the benchmark", key=SUMMARY("bm_run"), icon=":material/play_arrow:", type="primary",
        help=f"All {n} configuration(s) on one question set, as on the Benchmark page (missing: {', '.join(missing)}).",
    ):
        try:
            plan = plan_benchmark(
                _question_set(name), entries, session_models(), embedder=st.session_state.get(EMB_CHOICE) or None,
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
                           questions=questions, models={"language model": lm.label})

    st.download_button(
        "Download report", build, file_name=f"{export_name(doc.source, 'summary')}.html", mime="text/html",
        key=SUMMARY("report"), icon=":material/download:", on_click="ignore", type="primary",
        help="One self-contained HTML file (figures included, opens offline): the verdict, the table and the charts.",
    )
