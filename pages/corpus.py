"""Corpus page: a set of configurations over a folder (or a zip) of documents, in the background, resumable.

Pick the corpus, the configurations, the metrics, the pair budget, the question set and the
engine; Run starts :func:`backend.lab.corpus.plan_corpus`'s job (the same work as ``python -m
backend corpus``). Its bar counts documents with an ETA from this run's rate, and the rows
written so far show under it as they land. The results — verdict, aggregate table,
distributions, disagreements, skipped files, a click into Compare and the report — are read
from the run's output folder, so a cancelled or interrupted run keeps what it wrote, and
running the same settings again resumes it.
"""

from pathlib import Path

import streamlit as st

from backend.corpus.spec import CORPUS_METRICS
from backend.errors import ChunkLabError, one_line
from backend.figures.markdown import md_text
from backend.lab.benchmark import qset_name
from backend.lab.corpus import (
    PAIRS_MAX,
    available_engines,
    check_results_folder,
    corpus_home,
    corpus_view,
    parse_config_lines,
    plan_corpus,
)
from backend.lab.quality import quality_settings
from components.cached import sample_question_sets, sample_questions
from components.corpus import corpus_source, finished_view, live_rows, results_panel
from components.folders import open_folder_expander
from components.keys import CORPUS, CORPUS_JOB, LM_CHOICE, QSET
from components.layout import ensure_routed
from components.lm_runs import session_models, start_plan
from components.models import job_progress
from components.settings import get, section_values
from components.state import configurations

ensure_routed()

_METRIC_HELP = {
    "stats": "Chunk counts and sizes (no model)", "bc": "Boundary clarity (the language model)",
    "cs": "Chunk stickiness (the language model)", "ds": "Dissimilarity of neighbouring chunks (the embedder)",
    "retrieval": "Recall, precision, IoU on the question set's questions about each document (the embedder)",
}
_METRIC_NAMES = {"stats": "statistics", "bc": "BC", "cs": "CS", "ds": "DS", "retrieval": "retrieval"}
_OPENED = CORPUS("opened")  # an earlier run's output folder opened to be shown (None: the job's is shown)
_NO_SET, _SESSION_SET, _SAMPLE_SET = "None", "Session set", "Bundled sample set"

st.title("Corpus")
st.caption("Run configurations over a whole collection of documents and see where they differ. The same run as "
           "`python -m backend corpus`; its output folder keeps every row, so a run stopped half-way resumes.")

st.subheader("Documents", anchor=False)
source = corpus_source()

st.subheader("Configurations and metrics", anchor=False)
entries = configurations()
by_uid = {e.uid: e for e in entries}
chosen_uids = st.multiselect(
    "Session configurations", list(by_uid), default=list(by_uid), key=CORPUS("configs"),
    format_func=lambda u: by_uid[u].title, help="The Compare page's configurations; add more there or below.",
)
extra = st.text_area(
    "More configurations, one per line", key=CORPUS("specs"), height=80,
    placeholder="recursive chunk_size=400 chunk_overlap=0\nsemantic threshold=0.6",
    help="As `--config` takes them: a chunker's name, then key=value parameters.",
)
m1, m2 = st.columns([3, 1])
metrics = m1.multiselect("Metrics", list(CORPUS_METRICS), default=["stats"], key=CORPUS("metrics"),
                         format_func=lambda m: _METRIC_NAMES[m],
                         help="; ".join(f"{_METRIC_NAMES[m]}: {_METRIC_HELP[m]}" for m in CORPUS_METRICS)
                         + ". Statistics always; BC, CS and DS use the Quality page's settings (K, rules, δ).")
pairs = m2.number_input("Pair budget", min_value=0, max_value=PAIRS_MAX, value=0, step=100, key=CORPUS("pairs"),
                        help="0: every pair (exact). Else at least this many pairs per document, configuration and "
                             "metric, sampled with a seed: estimates with 95% intervals, much faster on long documents.")

q1, q2 = st.columns([1, 2])
qsource = q1.segmented_control("Question set", [_NO_SET, _SESSION_SET, _SAMPLE_SET], default=_NO_SET, required=True,
                               key=CORPUS("qsource"), help="Retrieval is evaluated on the set's questions about each "
                                                           "document (a corpus of the set whose text is the document's).")
qset, qname = None, None
if qsource == _SESSION_SET:
    qset, qname = st.session_state.get(QSET), qset_name("Session set", None)
    if qset is None:
        q2.caption("The session's set is empty: save questions on the Retrieval or Benchmark page.")
elif qsource == _SAMPLE_SET:
    sets = {s.name: s for s in sample_question_sets()}
    sample = q2.selectbox("Sample", list(sets), key=CORPUS("sample"), format_func=lambda n: sets[n].title)
    try:
        qset, qname = sample_questions(sample), qset_name("Bundled sample set", sample)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")

st.subheader("Run", anchor=False)
r1, r2, r3 = st.columns([1, 1, 3], vertical_alignment="bottom")
engines = available_engines()
engine = r1.selectbox("Engine", list(engines), key=CORPUS("engine"),
                      help="local: this process. ray: documents as Ray tasks (a local Ray, or RAY_ADDRESS's cluster)."
                      + ("" if "ray" in engines else " Ray is not installed here."))
workers = r2.number_input("Workers", min_value=1, max_value=256, value=2, step=1, key=CORPUS("workers"),
                          disabled=engine != "ray", help="Ray: documents run at once")
out_raw = r3.text_input("Output folder", key=CORPUS("out"), placeholder=f"default: {corpus_home() / 'runs'}/<corpus>/<settings>",
                        help="Where the rows are written (results.jsonl). The same folder and settings resume.")

lm_choice = st.session_state.get(LM_CHOICE)
lm = lm_choice[1] if lm_choice and lm_choice[0] == "local" else None
models = session_models()
if any(m != "stats" for m in metrics):
    st.caption(f"Models: the language model {md_text(lm) if lm else 'by default (CHUNKLAB_LM or the bundled one)'}, "
               f"the embedder {md_text(models.embedder_spec) if models.embedder_spec else 'by default (CHUNKLAB_EMBEDDER or the bundled one)'}.")

job = st.session_state.get(CORPUS_JOB)
running = job is not None and job.running
if st.button("Run", key=CORPUS("run"), type="primary", icon=":material/play_arrow:", disabled=running):
    try:
        if source is None:
            raise ChunkLabError("pick a corpus first: upload a zip or give a folder's path")
        configs = [by_uid[u].config for u in chosen_uids] + parse_config_lines(extra)
        if "retrieval" in metrics and qset is None:
            raise ChunkLabError("the retrieval metric needs a question set: pick one above")
        plan = plan_corpus(
            source, configs, metrics=metrics, pairs=int(pairs) or None, questions=qset, questions_name=qname,
            settings=quality_settings(section_values("quality")), retrieve=int(get("benchmark", "retrieve")),
            engine=engine, workers=int(workers) if engine == "ray" else None, lm=lm, embedder=models.embedder_spec,
            out=Path(out_raw.strip()).expanduser() if out_raw.strip() else None,
        )
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        job = st.session_state[CORPUS_JOB] = start_plan(plan)
        st.session_state[_OPENED] = None

open_folder_expander(key=CORPUS, opened_key=_OPENED, check=check_results_folder, command="corpus",
                     placeholder="/data/manuals-run")

opened = st.session_state.get(_OPENED)
if opened is not None and not running:
    st.subheader("Results", anchor=False)
    try:
        view = corpus_view(opened)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        st.caption(f"The output folder {md_text(opened)}.")
        results_panel(view)
    st.stop()

if job is None:
    st.caption("Pick a corpus and configurations, then run.")
    st.stop()
if job.meta.get("resumed"):
    st.info(f"Resumed: {job.meta['resumed']:,} rows from an earlier run in {md_text(job.meta['out'])} are not recomputed.",
            icon=":material/history:")
if job.running:
    job_progress(CORPUS_JOB, CORPUS("cancel"), preview=live_rows)
    st.stop()
if job.state == "failed":
    st.error(job.error or "The corpus run failed.", icon=":material/error:")
elif job.state == "cancelled":
    st.warning("The corpus run was cancelled: the rows it wrote are kept, and Run with the same settings resumes.",
               icon=":material/stop_circle:")
else:
    st.success(md_text(job.result.summary()), icon=":material/check_circle:")

st.subheader("Results", anchor=False)
view = finished_view(job)
if view is not None:
    results_panel(view)
