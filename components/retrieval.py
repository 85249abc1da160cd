"""The retrieval lab's tables, the question-set upload, and starting a benchmark: thin wrappers around ``backend.lab``.

Every row, caption and HTML view comes from the backend (:mod:`backend.lab.retrieval`,
:mod:`backend.lab.benchmark`, :mod:`backend.figures.retrieval_html`); here the rows become
``pandas.DataFrame`` objects with the column settings ``st.dataframe`` shows them with.
:func:`question_set_upload` is the one widget: the Chroma-format upload both pages offer.
:func:`start_benchmark` starts the plan :func:`backend.lab.benchmark.plan_benchmark` made, where
the Benchmark page and the Summary both look for it.

The Retrieval page's state lives under the keys below: :func:`follow_configurations` keeps its
selection in step with the session's configurations, :func:`retrieval_state` reads it for a
saved session and :func:`restore_retrieval` puts a saved one back.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd
import streamlit as st

from backend.chunking import ConfigEntry
from backend.errors import ChunkLabError, one_line
from backend.figures.export import figure_html
from backend.figures.markdown import md_text
from backend.lab.benchmark import CANDIDATE_COLUMNS, BenchmarkView, candidate_rows
from backend.lab.jobs import JobPlan
from backend.lab.retrieval import QUESTION_COLUMNS, ScoresView, question_rows
from backend.lab.session import RetrievalState
from backend.retrieval.evaluate import METRIC_LABELS
from backend.retrieval.generation import GeneratedQuestions
from backend.retrieval.questions import QuestionSet, question_set_from_files
from backend.retrieval.retriever.base import UNIT_TERMS
from backend.text.document import Document
from components.keys import BENCHMARK_JOB, RETRIEVAL, PageKeys
from components.lm_runs import start_plan
from components.quality import column_width

__all__ = [
    "RET_CONFIGS",
    "RET_OFFERED",
    "RET_SEARCH_JOB",
    "RET_CP_JOB",
    "RET_MARKS",
    "RET_PICK",
    "RET_QUERY",
    "RET_DOC_ID",
    "follow_configurations",
    "take_search_again",
    "retrieval_state",
    "restore_retrieval",
    "md_text",
    "scores_frame",
    "SCORES_COLUMN_CONFIG",
    "questions_frame",
    "question_set_upload",
    "OMEGA_MARK",
    "SCORE_COLUMNS",
    "COST_COLUMNS",
    "summary_frame",
    "summary_column_config",
    "per_corpus_frame",
    "candidates_frame",
    "start_benchmark",
    "html_download",
]

# The Retrieval page's state (pages/retrieval.py); a saved session reads and writes the same keys.
RET_CONFIGS = RETRIEVAL("configs")  # the uids of the configurations picked (the multiselect's key)
RET_OFFERED = RETRIEVAL("offered")  # the uids the page has offered: one not among them is new, and picked
RET_SEARCH_JOB = RETRIEVAL("search_job")
RET_CP_JOB = RETRIEVAL("cp_job")  # CP: information support
RET_MARKS = RETRIEVAL("marks")  # pasted excerpts' ranges in the current document
RET_PICK = RETRIEVAL("pick")  # picked sentence indices
RET_QUERY = RETRIEVAL("query")
RET_DOC_ID = RETRIEVAL("doc_id")  # the document the marks and picks are about
_SEARCH_AGAIN = RETRIEVAL("search_again")  # an opened session's search, run again on the page's next visit

_PM_WIDTH = 95  # pixels that show "100.0 ± 100.0"
_SUMMARY_CHUNKER_WIDTH = 150
OMEGA_MARK = UNIT_TERMS.table_mark  # on a retriever's precision-Ω: computed on its finest units, not on what it returns
# The summary's two views (one frame): the report's scores, then what each configuration retrieved and cost.
SCORE_COLUMNS = ("chunker", *METRIC_LABELS.values(), "chunks", "mean tokens", "seconds")
COST_COLUMNS = ("retrieved tokens", "texts embedded", "index seconds", "query ms")
SCORES_COLUMN_CONFIG = {
    "recall": st.column_config.NumberColumn("Recall %", format="%.1f"),
    "precision": st.column_config.NumberColumn("Precision %", format="%.1f"),
    "precision_omega": st.column_config.NumberColumn(
        "Precision-Ω %", format="%.1f", help="Precision if exactly the chunks holding the answer were retrieved"
    ),
    "iou": st.column_config.NumberColumn("IoU %", format="%.1f"),
    "cp": st.column_config.NumberColumn("CP (nats)", format="%.3f", help="Lower is better"),
    "omega_on": st.column_config.TextColumn("Ω on", help="What precision-Ω was computed on"),
}


def scores_frame(view: ScoresView) -> pd.DataFrame:
    """The live query's scores (:func:`backend.lab.retrieval.scores_view`), one row per configuration tag."""
    return pd.DataFrame(list(view.rows), columns=list(view.columns)).set_index("config")


# --- question sets --------------------------------------------------------------------------------


def questions_frame(qset: QuestionSet) -> pd.DataFrame:
    """One row per question (:func:`backend.lab.retrieval.question_rows`)."""
    return pd.DataFrame(question_rows(qset), columns=list(QUESTION_COLUMNS))


def question_set_upload(keys: PageKeys, label: str) -> QuestionSet | None:
    """The Chroma-format upload: ``questions.csv`` and its corpus files, read into a validated question set.

    Draws two file uploaders and a button (keys ``<prefix>_import_csv``, ``<prefix>_import_corpora``
    and ``<prefix>_import``); the files are read by
    :func:`backend.retrieval.questions.question_set_from_files`, as a script would read them.

    Args:
        keys: The page's keys (the widgets' prefix).
        label: The button's label.

    Returns:
        The set, on the run where the button was pressed and the files are valid; else None
        (a bad upload shows a one-line error).
    """
    csv_file = st.file_uploader("questions.csv", type=["csv"], key=keys("import_csv"))
    corpus_files = st.file_uploader(
        "Corpora (<corpus_id>.md or .txt)", type=["md", "txt"], accept_multiple_files=True, key=keys("import_corpora")
    )
    if not st.button(label, key=keys("import"), icon=":material/upload_file:", disabled=csv_file is None):
        return None
    try:
        return question_set_from_files(
            csv_file.getvalue(), [(f.name, f.getvalue()) for f in corpus_files or []], name=csv_file.name
        )
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return None


# --- the benchmark's tables -----------------------------------------------------------------------


def summary_frame(view: BenchmarkView) -> pd.DataFrame:
    """The results table and what each configuration retrieved and cost (:func:`backend.lab.benchmark.summary_rows`).

    The page shows it in two views, :data:`SCORE_COLUMNS` and :data:`COST_COLUMNS`.
    """
    return pd.DataFrame(list(view.summary)).set_index("config")


def summary_column_config() -> dict[str, Any]:
    """``st.dataframe``'s column configuration of :func:`summary_frame`: fixed widths, short headers, help.

    As on the Quality page, the configuration label is the one long text: with it held to a
    fixed width, each view's columns (:data:`SCORE_COLUMNS`, :data:`COST_COLUMNS`), the last
    included, fit the wide layout on a 1280-pixel screen.
    """
    metric = {label: max(_PM_WIDTH, column_width(label)) for label in METRIC_LABELS.values()}
    omega = METRIC_LABELS["precision_omega"]
    pm_help = "mean ± standard deviation over questions, in %"
    return {
        "_index": st.column_config.TextColumn("", width=40),
        "chunker": st.column_config.TextColumn(
            "Chunker", width=_SUMMARY_CHUNKER_WIDTH, help="The configuration (its full label is in the CSV)."
        ),
        **{label: st.column_config.TextColumn(label, width=w, help=pm_help) for label, w in metric.items()},
        omega: st.column_config.TextColumn(
            omega, width=metric[omega],
            help=f"{pm_help}. {OMEGA_MARK}: a retriever's, computed on its finest units (MoG's level 1, MoGG's "
                 "nodes, FreeChunker's units), not on the entries it returns.",
        ),
        "chunks": st.column_config.NumberColumn(
            "Chunks", format="%d", width=column_width("Chunks"),
            help="Chunks over all corpora; a retriever: its entries over all its levels.",
        ),
        "mean tokens": st.column_config.NumberColumn(
            "Tokens", format="%.1f", width=column_width("Tokens"),
            help="Mean tokens per chunk; a retriever: per finest unit.",
        ),
        "seconds": st.column_config.NumberColumn(
            "Time (s)", format="%.2f", width=column_width("Time (s)"),
            help="Wall time of the configuration: chunking, embedding, indexing, retrieval, scoring "
                 "(and training a cv router).",
        ),
        "retrieved tokens": st.column_config.NumberColumn(
            "Retrieved tokens", format="%.1f", width=column_width("Retrieved tokens"),
            help="Mean tokens retrieved per question (a coarse level returns far more text for the same number).",
        ),
        "texts embedded": st.column_config.NumberColumn(
            "Texts embedded", format="%d", width=column_width("Texts embedded"),
            help="Texts the embedder embedded for this configuration in this run (0: all from the cache or the store).",
        ),
        "index seconds": st.column_config.NumberColumn(
            "Index (s)", format="%.2f", width=column_width("Index (s)"),
            help="Chunking (a retriever: building its levels), embedding and indexing every corpus.",
        ),
        "query ms": st.column_config.NumberColumn(
            "Query (ms)", format="%.2f", width=column_width("Query (ms)"),
            help="Mean milliseconds per question from its vector to the scored answer (training a cv router excluded).",
        ),
    }


def per_corpus_frame(view: BenchmarkView) -> pd.DataFrame:
    """Per configuration and corpus (:func:`backend.lab.benchmark.per_corpus_rows`)."""
    return pd.DataFrame(list(view.per_corpus))


def candidates_frame(gen: GeneratedQuestions) -> pd.DataFrame:
    """Every generated candidate (:func:`backend.lab.benchmark.candidate_rows`)."""
    return pd.DataFrame(candidate_rows(gen), columns=list(CANDIDATE_COLUMNS))


def html_download(label: str, fig: Any, name: str, key: str) -> None:
    """A download button for ``fig`` as a standalone HTML file (built on click, opens offline)."""
    st.download_button(
        label, lambda f=fig: figure_html(f), file_name=name, mime="text/html", key=key,
        icon=":material/download:", on_click="ignore", help="A standalone HTML file of this chart (opens offline)",
    )


def start_benchmark(plan: JobPlan) -> None:
    """Start the benchmark ``plan`` in the background where the Benchmark page and the Summary look for it.

    A benchmark still running is cancelled first (its thread stops at its next progress report).
    """
    previous = st.session_state.get(BENCHMARK_JOB)
    if previous is not None and previous.running:
        previous.cancel()
    st.session_state[BENCHMARK_JOB] = start_plan(plan)


# --- the Retrieval page's state ---------------------------------------------------------------------------


def follow_configurations(entries: Sequence[ConfigEntry]) -> None:
    """Keep the page's picked configurations in step with the session's (before its multiselect is drawn).

    A configuration the page has not offered yet (every one on a first visit, one added on
    Compare since) is picked; one the user unpicked stays unpicked; a removed one drops out.
    """
    uids = [e.uid for e in entries]
    held = st.session_state.get(RET_CONFIGS)
    offered = st.session_state.get(RET_OFFERED)
    if held is None:
        picked = uids
    else:
        seen = set(uids) if offered is None else set(offered)  # None: state from before the page kept it
        picked = [u for u in held if u in uids] + [u for u in uids if u not in seen and u not in held]
    st.session_state[RET_CONFIGS] = picked
    st.session_state[RET_OFFERED] = uids


def take_search_again() -> bool:
    """Whether an opened session's search should run now: True once after :func:`restore_retrieval`."""
    return bool(st.session_state.pop(_SEARCH_AGAIN, False))


def retrieval_state(doc: Document, entries: Sequence[ConfigEntry]) -> RetrievalState | None:
    """The Retrieval page's state to save with the session (None: the page was not used on ``doc``)."""
    if st.session_state.get(RET_DOC_ID) != doc.id:
        return None
    tags = {e.uid: e.tag for e in entries}
    held = st.session_state.get(RET_CONFIGS)
    job = st.session_state.get(RET_SEARCH_JOB)
    return RetrievalState(
        query=st.session_state.get(RET_QUERY) or "",
        marks=tuple((int(a), int(b)) for a, b in st.session_state.get(RET_MARKS) or ()),
        picks=tuple(int(i) for i in st.session_state.get(RET_PICK) or ()),
        picked=None if held is None else tuple(tags[u] for u in held if u in tags),
        offered=tuple(tags[u] for u in st.session_state.get(RET_OFFERED) or () if u in tags),
        searched=job is not None and job.state == "done" and job.meta.get("doc_id") == doc.id,
    )


def restore_retrieval(state: RetrievalState | None, doc: Document, entries: Sequence[ConfigEntry]) -> None:
    """Put a saved session's Retrieval state back (None: the page starts afresh); its search runs on the next visit."""
    for key in (RET_SEARCH_JOB, RET_CP_JOB):
        job = st.session_state.pop(key, None)
        if job is not None and job.running:
            job.cancel()
    for key in (RET_CONFIGS, RET_OFFERED, RET_QUERY, _SEARCH_AGAIN):
        st.session_state.pop(key, None)
    st.session_state[RET_DOC_ID] = doc.id
    st.session_state[RET_MARKS] = list(state.marks) if state is not None else []
    st.session_state[RET_PICK] = list(state.picks) if state is not None else []
    if state is None:
        return
    uids = {e.tag: e.uid for e in entries}
    st.session_state[RET_QUERY] = state.query
    if state.picked is not None:
        st.session_state[RET_CONFIGS] = [uids[t] for t in state.picked if t in uids]
        st.session_state[RET_OFFERED] = [uids[t] for t in state.offered if t in uids]
    st.session_state[_SEARCH_AGAIN] = state.searched and bool(state.query.strip())
