"""Benchmark page: a question set × configurations × an embedder → the Chroma report's table, charts and heat maps.

The benchmark and question generation run in background jobs with progress and cancel;
page runs only read their results, re-filter generated questions and draw. Query-time
retrievers (MoG, MoGG, FreeChunker) are rows like any configuration; a routed one also gets
a Routing section (chosen levels, oracle agreement, the router's training). What the page
starts and shows is :mod:`backend.lab.benchmark`: the page reads widgets, makes one call per
action and renders.
"""

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.lab.benchmark import benchmark_view, plan_benchmark, qset_name
from backend.lab.questions import (
    generation_form,
    generation_view,
    load_question_set_at,
    merge_questions,
    plan_generation,
    question_set_view,
)
from components.cached import sample_question_sets, sample_questions
from components.keys import BENCHMARK, BENCHMARK_JOB, EMB_CHOICE, QSET
from components.layout import ensure_routed
from components.lm_runs import session_models, start_plan
from components.models import job_outcome
from components.retrieval import (
    COST_COLUMNS,
    SCORE_COLUMNS,
    candidates_frame,
    html_download,
    md_text,
    per_corpus_frame,
    question_set_upload,
    questions_frame,
    start_benchmark,
    summary_column_config,
    summary_frame,
)
from components.routing import routing_panel
from components.settings import get, prepare, spec
from components.state import configurations, current_document

ensure_routed()

_JOB = BENCHMARK_JOB
_GEN_JOB = BENCHMARK("gen_job")
_IMPORTED = BENCHMARK("imported")
_DUP, _EXC = BENCHMARK("dup"), BENCHMARK("exc")
_PLOT = {"displaylogo": False}


def _import_panel():
    """Uploads or server paths → the imported question set (kept in the session)."""
    uploads, paths = st.tabs(["Upload files", "Paths on the server"])
    with uploads:
        uploaded = question_set_upload(BENCHMARK, "Load uploaded set")
        if uploaded is not None:
            st.session_state[_IMPORTED] = uploaded
    with paths:
        csv_path = st.text_input("questions.csv path", key=BENCHMARK("csv_path"), placeholder="/data/set/questions.csv")
        folder = st.text_input("Corpora folder", key=BENCHMARK("corpora_path"), placeholder="/data/set/corpora")
        if st.button("Load from paths", key=BENCHMARK("load_paths"), icon=":material/folder_open:"):
            try:  # no corpora folder given: corpora/ beside the CSV
                st.session_state[_IMPORTED] = load_question_set_at(csv_path, folder)
            except ChunkLabError as e:
                st.error(one_line(str(e)), icon=":material/error:")
    return st.session_state.get(_IMPORTED)


def _sample_panel():
    """A bundled sample's question set (questions with hand-copied excerpts over the sample text)."""
    sets = {entry.name: entry for entry in sample_question_sets()}
    name = st.selectbox(
        "Sample", list(spec("benchmark", "sample").choices), key=prepare("benchmark", "sample"), persist_state="session",
        format_func=lambda n: sets[n].title,
        help="Shipped with Chunk Lab: questions whose excerpts are copied exactly from the sample document.",
    )
    try:
        return sample_questions(name)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
        return None


def _generation_panel(doc):
    """Question generation from the current document (a background job) and the report's prefilters, live."""
    st.subheader("Generate questions", anchor=False)
    if doc is None:
        st.info("Load a document to generate questions from it.", icon=":material/info:")
        return None
    with st.form(BENCHMARK("gen_form"), border=True):
        c1, c2, c3 = st.columns(3)
        base_url = c1.text_input("Base URL", key=BENCHMARK("gen_url"), placeholder="https://api.openai.com/v1 (OPENAI_BASE_URL)")
        api_key = c2.text_input(
            "API key", key=BENCHMARK("gen_key"), type="password", placeholder="OPENAI_API_KEY",
            help="Held only in this session's widget state; never stored, cached or shown.",
        )
        model = c3.text_input("Model", key=BENCHMARK("gen_model"), placeholder="OPENAI_MODEL, or the server's only model")
        c4, c5 = st.columns([1, 3], vertical_alignment="bottom")
        n = c4.number_input("Questions", min_value=1, max_value=200, value=10, step=1, key=BENCHMARK("gen_n"))
        local = c5.toggle("Use the local model instead of an API", key=BENCHMARK("gen_local"))
        go = st.form_submit_button("Generate", type="primary", icon=":material/auto_awesome:", key=BENCHMARK("gen_go"))
    form = generation_form(local, base_url, api_key, model)
    if form.warning:
        st.warning(form.warning, icon=":material/warning:")
    if go:
        st.session_state[_GEN_JOB] = start_plan(plan_generation(
            doc, int(n), method=form.method, chat=form.chat,
            duplicate_threshold=st.session_state.get(_DUP), excerpt_threshold=st.session_state.get(_EXC),
        ))
    job = job_outcome(_GEN_JOB, BENCHMARK("gen_cancel"), "Generation")
    if job is None:
        return None
    gen = job.result
    if gen.weak and gen.notice:
        st.warning(gen.notice, icon=":material/warning:")
    # The sliders' values are in the session before they are drawn: the view is read at them.
    gen_view = generation_view(gen, st.session_state.get(_DUP), st.session_state.get(_EXC))
    s1, s2 = st.columns(2)
    st.session_state.setdefault(_DUP, gen_view.duplicate_threshold)
    st.session_state.setdefault(_EXC, gen_view.excerpt_threshold)
    s1.slider("Duplicate threshold", -1.0, 1.0, step=0.01, key=_DUP,
              help="Drop a question more similar than this to an earlier kept one (the report: 0.70)")
    s2.slider("Excerpt threshold", -1.0, 1.0, step=0.01, key=_EXC,
              help="Drop a question less similar than this to any of its excerpts (the report: 0.40)")
    shown = gen_view.shown
    st.caption(gen_view.caption)
    h1, h2 = st.columns(2)
    with h1:
        st.plotly_chart(gen_view.duplicate_histogram, key=BENCHMARK("hist_dup"), config=_PLOT)
    with h2:
        st.plotly_chart(gen_view.excerpt_histogram, key=BENCHMARK("hist_exc"), config=_PLOT)
    st.dataframe(
        candidates_frame(shown), key=BENCHMARK("gen_table"), hide_index=True,
        column_config={"excerpt_similarity": st.column_config.NumberColumn("Excerpt sim.", format="%.2f")},
    )
    with st.container(horizontal=True, gap="small"):
        if st.button("Add kept questions to the session set", key=BENCHMARK("gen_add"), icon=":material/playlist_add:",
                     disabled=not shown.questions):
            try:
                st.session_state[QSET] = merge_questions(st.session_state.get(QSET), shown.question_set())
            except ChunkLabError as e:
                st.error(one_line(str(e)), icon=":material/error:")
            else:
                st.toast(f"Added {len(shown.questions)} question(s)", icon=":material/check:")
        if shown.questions:
            st.download_button(
                "CSV + corpus (zip)", question_set_view(shown.question_set()).zip,
                file_name="generated_questions.zip", mime="application/zip", key=BENCHMARK("gen_zip"),
                icon=":material/download:", on_click="ignore",
            )
    return shown.question_set() if shown.questions else None


st.title("Benchmark")
doc = current_document()

# --- the question set ---------------------------------------------------------------------------
st.subheader("Question set", anchor=False)
s_source = spec("benchmark", "source")
source = st.segmented_control(
    "Source", list(s_source.choices), required=True, key=prepare("benchmark", "source"), persist_state="session",
    help=s_source.help,
)
if source == "Import":
    qset = _import_panel()
elif source == "Bundled sample set":
    qset = _sample_panel()
elif source == "Generated":
    qset = None  # set by the generation panel below
else:
    qset = st.session_state.get(QSET)
    if qset is None:
        st.caption(
            "The session's set is empty: save marked queries on the Retrieval page, pick a bundled sample set, "
            "import a set, or generate one."
        )

if source == "Generated":
    qset = _generation_panel(doc)
if qset is not None:
    st.caption(
        f"{len(qset)} question(s)" + (f" ({md_text(qset.method)})" if qset.method else "")
        + f" over {len(qset.corpus_ids)} corpus/corpora: {md_text(', '.join(qset.corpus_ids))}"
    )
    with st.expander("Questions"):
        st.dataframe(questions_frame(qset), key=BENCHMARK("questions"), hide_index=True)
        st.download_button(
            "questions.csv", question_set_view(qset).csv, file_name="questions.csv", mime="text/csv",
            key=BENCHMARK("dl_questions"), icon=":material/download:", on_click="ignore",
        )

# --- the run ---------------------------------------------------------------------------------------
st.subheader("Run", anchor=False)
entries = configurations()
by_uid = {e.uid: e for e in entries}
held = st.session_state.get(BENCHMARK("configs"))
if held is not None:
    st.session_state[BENCHMARK("configs")] = [u for u in held if u in by_uid]
chosen_uids = st.multiselect(
    "Configurations", list(by_uid), default=list(by_uid) if held is None else None, key=BENCHMARK("configs"),
    persist_state="session",
    format_func=lambda u: f"{by_uid[u].tag} · {by_uid[u].config.label}",
    help="The Compare page's configurations; add more there.",
)
chosen = [by_uid[u] for u in chosen_uids]
r1, r2, r3, r4 = st.columns([2, 1, 1, 1], vertical_alignment="bottom")
emb_default = st.session_state.get(EMB_CHOICE) or ""
embedder = r1.text_input("Embedder", value=emb_default, key=BENCHMARK("embedder"), placeholder="default (bundled all-MiniLM-L6-v2)",
                         help="Empty: CHUNKLAB_EMBEDDER or the bundled MiniLM; else a model folder or hub id")
s_retrieve, s_auto, s_cross = (spec("benchmark", n) for n in ("retrieve", "auto", "cross"))
retrieve = r2.number_input(
    "Chunks retrieved", min_value=s_retrieve.low, max_value=s_retrieve.high, step=s_retrieve.step,
    key=prepare("benchmark", "retrieve"), persist_state="session", help=s_retrieve.help,
)
auto = r3.toggle(
    "As many as hold excerpts", key=prepare("benchmark", "auto"), persist_state="session", help=s_auto.help, wrap=True
)
cross = r4.toggle(
    "Across corpora", key=prepare("benchmark", "cross"), persist_state="session", help=s_cross.help, wrap=True
)
run_clicked = st.button("Run benchmark", key=BENCHMARK("run"), type="primary", icon=":material/play_arrow:",
                disabled=qset is None or not chosen)
if run_clicked:
    try:
        plan = plan_benchmark(
            qset, chosen, session_models(), embedder=embedder.strip() or None, retrieve=retrieve, auto=auto,
            cross_corpus=cross, name=qset_name(source, get("benchmark", "sample")),
        )
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        start_benchmark(plan)

job = job_outcome(_JOB, BENCHMARK("cancel"), "The benchmark")
run = job.result if job is not None else None
benchmark = run.benchmark if run is not None else None
if benchmark is None:
    if st.session_state.get(_JOB) is None:
        st.caption("Pick a question set and configurations, then run.")
    st.stop()

# --- results ---------------------------------------------------------------------------------------
view = benchmark_view(benchmark, job.meta, run.chunkings)
st.subheader("Results", anchor=False)
st.caption(view.caption)
if view.warning:
    st.warning(md_text(view.warning), icon=":material/warning:")
if job.meta.get("from_session"):
    st.caption("Opened from a saved session: these results are the file's (a routed retriever's routing is not saved).")
summary = summary_frame(view)
columns = summary_column_config()
st.dataframe(summary, key=BENCHMARK("table"), column_config=columns, column_order=SCORE_COLUMNS)
for note in view.notes:
    st.caption(note)
st.markdown("**Retrieved text and cost**")
st.dataframe(summary[list(COST_COLUMNS)], key=BENCHMARK("cost"), column_config=columns)
st.plotly_chart(view.bars(), key=BENCHMARK("bars"), config=_PLOT)
if view.per_corpus:
    st.markdown("**Per corpus**")
    st.dataframe(per_corpus_frame(view), key=BENCHMARK("per_corpus"), hide_index=True)
with st.container(horizontal=True, gap="small"):
    st.download_button("Results CSV", view.results_csv(), file_name="benchmark.csv",
                       mime="text/csv", key=BENCHMARK("dl_csv"), icon=":material/download:", on_click="ignore")
    st.download_button("Results JSON", view.results_json(), file_name="benchmark.json",
                       mime="application/json", key=BENCHMARK("dl_json"), icon=":material/download:", on_click="ignore")
    st.download_button("Per-question CSV", lambda: view.per_question().to_csv(),
                       file_name="benchmark_questions.csv", mime="text/csv", key=BENCHMARK("dl_questions_csv"),
                       icon=":material/download:", on_click="ignore")
    st.download_button("Per-question JSON", lambda: view.per_question().to_json(),
                       file_name="benchmark_questions.json", mime="application/json",
                       key=BENCHMARK("dl_questions_json"), icon=":material/download:", on_click="ignore")

# --- routing ------------------------------------------------------------------------------------------
routed = view.routed
if routed:
    st.subheader("Routing", anchor=False)
    pick = (
        st.selectbox("Routed configuration", list(routed), key=BENCHMARK("routing_config"),
                     format_func=lambda t: f"{t} · {routed[t].config.label}")
        if len(routed) > 1 else next(iter(routed))
    )
    routing_panel(BENCHMARK, pick, routed[pick])

# --- heat maps ---------------------------------------------------------------------------------------
st.subheader("Questions × configurations", anchor=False)
metric = st.segmented_control(
    "Metric", ["iou", "recall", "precision"], default="iou", required=True, key=BENCHMARK("heat_metric"),
    format_func=lambda m: view.metric_labels[m],
)
heat = view.question_heatmap(metric)
st.plotly_chart(heat, key=BENCHMARK("heat_q"), config=_PLOT)
html_download("Heat map (HTML)", heat, f"questions_{metric}.html", BENCHMARK("dl_heat_q"))

st.subheader("Agreement and coverage", anchor=False)
corpora = view.corpora
corpus = st.selectbox("Corpus", list(corpora), key=BENCHMARK("corpus")) if len(corpora) > 1 else corpora[0]
tolerance = st.slider("Boundary tolerance (characters)", 0, 200, 0, 5, key=BENCHMARK("tolerance"),
                      help="Two boundaries this close count as the same cut")
for note in view.agreement_notes:
    st.caption(note)
agreement = view.agreement(corpus, tolerance)
if agreement is not None:
    fig_b, fig_o = agreement
    a1, a2 = st.columns(2)
    with a1:
        st.plotly_chart(fig_b, key=BENCHMARK("agree_bounds"), config=_PLOT)
        html_download("Boundary IoU (HTML)", fig_b, f"agreement_boundaries_{corpus}.html", BENCHMARK("dl_agree_b"))
    with a2:
        st.plotly_chart(fig_o, key=BENCHMARK("agree_overlap"), config=_PLOT)
        html_download("Span overlap (HTML)", fig_o, f"agreement_overlap_{corpus}.html", BENCHMARK("dl_agree_o"))
else:
    st.caption("Agreement needs two configurations or more.")
st.caption("How many questions retrieved each stretch of the corpus, per configuration; the last row is where the excerpts are.")
strip = view.coverage(corpus)
st.plotly_chart(strip, key=BENCHMARK("coverage"), config=_PLOT)
html_download("Coverage strip (HTML)", strip, f"coverage_{corpus}.html", BENCHMARK("dl_coverage"))
