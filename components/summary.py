"""The Summary page's parts: the session's numbers gathered where the other pages keep them, and their views.

Nothing here computes a metric. BC, CS and DS are :func:`~backend.metrics.report.quality_row` of
the pair tables and vectors the Quality page keeps (``QUALITY_STORE``) or the output cache holds
(:func:`backend.report.summary.cached_scores`), under the Quality page's settings
(:func:`components.quality.page_settings`); the retrieval numbers are the last benchmark's
(``BENCHMARK_JOB``, the Benchmark page's job). What is missing is computed by the same jobs
those pages start — :func:`~backend.metrics.scores.score_chunkings` with the session's language
model, :func:`components.retrieval.start_benchmark` — and their results go where those pages
look, so the three pages and the Summary always show the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from backend.chunking import Chunking, ConfigEntry
from backend.lab.jobs import JobPlan
from backend.lab.models import SessionModels
from backend.figures.charts import boundary_strip, size_histogram
from backend.metrics.cost import CONFIRM_SECONDS, Throughput, cost_estimate, cost_label, format_seconds, needs_confirmation
from backend.metrics.report import QualityData, QualityReport, QualitySettings, quality_row
from backend.metrics.scores import score_chunkings, table_key, vectors_key
from backend.models.cache import default_cache
from backend.report.summary import METRIC_INFO, METRICS, Summary, cached_scores, format_value
from components.cached import sample_question_sets, sample_questions
from components.documents import current_sample
from components.keys import BENCHMARK, BENCHMARK_JOB, EMB_CHOICE, QSET, QUALITY_STORE, QUALITY_THROUGHPUT, SUMMARY
from components.lm_runs import model_job_panel
from components.models import job_outcome
from components.quality import CHUNKER_WIDTH, HIGHLIGHT, embedder_identity, embedder_loader
from components.retrieval import md_text, start_benchmark
from components.views import export_name, grid

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

    from backend.retrieval.evaluate import Benchmark
    from backend.retrieval.questions import QuestionSet
    from backend.text.document import Document

__all__ = [
    "NOT_COMPUTED",
    "session_quality",
    "session_benchmark",
    "summary_frame",
    "styled_summary",
    "summary_column_config",
    "verdict_markdown",
    "quality_job_panel",
    "retrieval_job_panel",
    "small_multiples",
    "report_button",
]

NOT_COMPUTED = "not computed yet"
_PLOT = {"displaylogo": False}
HISTOGRAMS_PER_ROW = 3



def _store(doc: Document) -> dict:
    """The Quality page's store of pair tables and vectors for ``doc`` (a new one for another document)."""
    store = st.session_state.get(QUALITY_STORE)
    if store is None or store.get("doc") != doc.id:
        store = st.session_state[QUALITY_STORE] = {"doc": doc.id}
    return store


def session_quality(
    doc: Document, tagged: Sequence[tuple[str, Chunking]], lm: SessionModels, settings: QualitySettings
) -> tuple[dict[str, QualityReport], dict[str, QualityData]]:
    """Per tag, its quality row from what the Quality page scored or the output cache holds (no model call).

    Returns ``(rows, data)``: the rows the table shows, and per tag the pair table and vectors
    they came from (what the report's BC and CS figures draw).

    A pair table of every pair within the window (BC and CS) is preferred to one of the
    adjacent pairs (BC); tables and vectors read from the cache join the Quality page's store.
    """
    store = _store(doc)
    cache = default_cache()
    emb_fp, _name = embedder_identity()
    context = lm.cache_only() if lm.error is None else None
    refusing = context.scorer if context is not None else None
    out, data = {}, {}
    for tag, ch in tagged:
        keys = [table_key(ch, lm.identity, complete=c, window=settings.window) for c in (True, False)]
        table = next((store[k] for k in keys if k in store), None)
        vkey = vectors_key(ch, emb_fp)
        vectors = store.get(vkey)
        if table is None or (vectors is None and emb_fp is not None):
            found, vecs = cached_scores(
                ch, scorer=refusing if table is None else None,
                embedder_fingerprint=emb_fp if vectors is None else None, window=settings.window, cache=cache,
            )
            if found is not None:
                table = store[table_key(ch, lm.identity, complete=found.complete, window=settings.window)] = found
            if vecs is not None:
                vectors = store[vkey] = vecs
        out[tag] = quality_row(ch.token_counts, table=table, vectors=vectors, settings=settings)
        data[tag] = QualityData(tag, ch.config, ch, table, vectors)
    return out, data


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


def verdict_markdown(sentences: Sequence[str]) -> str:
    """The verdict as a Markdown list (every sentence escaped: configuration labels are user input)."""
    return "\n".join(f"- {md_text(s)}" for s in sentences)


# --- computing what is missing ----------------------------------------------------------------------


def quality_job_panel(
    doc: Document, tagged: Sequence[tuple[str, Chunking]], lm: SessionModels, settings: QualitySettings
) -> None:
    """The button (with its cost) that scores BC, CS and DS of ``tagged`` in a background job, its progress, its end.

    The job is the Quality page's (:func:`~backend.metrics.scores.score_chunkings` on every pair
    within the Quality page's window, and the chunks' embeddings); its tables and vectors go to
    the Quality page's store, so both pages show them.
    """
    if lm.error:
        st.error(lm.error, icon=":material/error:")
        return
    store = _store(doc)
    cache = default_cache()
    emb_fp, _name = embedder_identity()
    window = settings.window
    chunkings = [ch for _, ch in tagged]
    speed = st.session_state.get(QUALITY_THROUGHPUT, Throughput())
    cost = cost_estimate(
        [ch.token_counts for ch in chunkings], complete=True, window=window, tokens_per_s=speed.tokens_per_s,
        chunk_texts=[[c.text for c in ch.chunks] for ch in chunkings],
    )
    signature = ("summary-quality", doc.id, lm.identity, emb_fp, tuple(ch.config for ch in chunkings), window)
    load_embedder = embedder_loader()

    def run(scorer, progress, c=chunkings, emb=load_embedder, win=window, oc=cache):
        return score_chunkings(c, scorer=scorer, embedder=emb, complete=True, window=win, cache=oc, progress=progress)

    plan = JobPlan(f"Scoring {', '.join(t for t, _ in tagged)} with {lm.name}", signature, run, models=lm)
    long_run = needs_confirmation(cost["seconds"])
    job = model_job_panel(
        SUMMARY("quality_job"), plan,
        run_label=f"Compute BC, CS and DS for {', '.join(t for t, _ in tagged)} with {lm.name}: {cost_label(cost)}",
        run_key=SUMMARY("quality_run"), cancel_key=SUMMARY("quality_cancel"), auto=False, what="Scoring",
        confirm=(
            f"Yes, run for ≈ {format_seconds(cost['seconds'])} (over {format_seconds(CONFIRM_SECONDS)} at this speed)"
            if long_run else None
        ),
        confirm_key=SUMMARY("quality_confirm"),
    )
    if job is None:
        return
    for ch, (table, vectors) in zip(chunkings, job.result.results):
        if table is not None:
            store[table_key(ch, lm.identity, complete=True, window=window)] = table
        if vectors is not None:
            store[vectors_key(ch, emb_fp)] = vectors
    st.session_state[QUALITY_THROUGHPUT] = speed.after_run(cost["tokens"], job.result.seconds)
    st.session_state.pop(SUMMARY("quality_job"), None)
    st.rerun()


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
        retrieve = -1 if st.session_state.get(BENCHMARK("auto")) else int(st.session_state.get(BENCHMARK("retrieve"), 5))
        problem = start_benchmark(
            _question_set(name), entries, embedder=st.session_state.get(EMB_CHOICE) or None, retrieve=retrieve,
            cross_corpus=bool(st.session_state.get(BENCHMARK("cross"), True)), qset_name=name,
        )
        if problem is not None:
            st.error(problem, icon=":material/error:")
            return
        job_outcome(BENCHMARK_JOB, SUMMARY("bm_cancel"), "The benchmark")
    elif job is not None:
        job_outcome(BENCHMARK_JOB, SUMMARY("bm_cancel"), "The benchmark")  # a failed or cancelled run says so


# --- figures and the report ----------------------------------------------------------------------------


def small_multiples(doc: Document, tagged: Sequence[tuple[str, Chunking]], colors: Sequence[str]) -> None:
    """The boundary strip (one row per configuration) and each configuration's chunk-size histogram side by side."""
    chunkings = [ch for _, ch in tagged]
    tags = [t for t, _ in tagged]
    st.plotly_chart(
        boundary_strip(chunkings, tags, len(doc.text), revision=f"{doc.id}:summary:" + ",".join(tags)),
        key=SUMMARY("strip"), config=_PLOT,
    )
    for col, (tag, ch, color) in grid(list(zip(tags, chunkings, colors)), HISTOGRAMS_PER_ROW):
        with col:
            st.plotly_chart(size_histogram([ch], [tag], [color], "tokens"), key=SUMMARY(f"hist_{tag}"), config=_PLOT)


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
        from backend.report.html import cached_curves, report_html
        from components.lm_runs import session_models

        lm = session_models()
        curves, ppl = cached_curves(doc, chunkings, lm.cache_only() if lm.error is None else None)
        return report_html(summary, doc, chunkings, benchmark=benchmark, quality=quality, curves=curves, ppl=ppl,
                           questions=questions, models={"language model": lm.label})

    st.download_button(
        "Download report", build, file_name=f"{export_name(doc.source, 'summary')}.html", mime="text/html",
        key=SUMMARY("report"), icon=":material/download:", on_click="ignore", type="primary",
        help="One self-contained HTML file (figures included, opens offline): the verdict, the table and the charts.",
    )
