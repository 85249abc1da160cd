"""Retrieval page: a live query against the Compare configurations indexed in Chroma, marked and scored.

Indexing, embedding and querying run in a background job (the embedder is a model, and a
Chroma server may be slow); CP runs the language model in another. Every configuration is
answered by its retriever, chunkings and multi-granularity retrievers (mog, mogg, freechunker)
alike; a retriever's panel explains its answer. What the page shows is
:mod:`backend.lab.retrieval`: the page reads widgets, makes one call per action and renders.
"""

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.lab.questions import merge_questions, question_set_view, save_question
from backend.lab.retrieval import (
    PAGE_STYLE,
    add_marks,
    answer_marks,
    answer_view,
    indexing_resume_note,
    plan_cp,
    plan_search,
    retrieval_inputs,
    search_view,
    sentence_picker,
    store_caption,
)
from components.cached import chunk_document
from components.demo import demo_question, take_demo_start
from components.keys import COMPARE, EMB_CHOICE, QSET, RETRIEVAL
from components.layout import ensure_routed
from components.lm_runs import model_chunking, session_models, start_plan
from components.models import job_outcome
from components.multi import retriever_panel
from components.questions import panel_expanded, question_generation_panel
from components.retrieval import (
    RET_CONFIGS,
    RET_CP_JOB,
    RET_DOC_ID,
    RET_MARKS,
    RET_PICK,
    RET_QUERY,
    RET_SEARCH_JOB,
    SCORES_COLUMN_CONFIG,
    follow_configurations,
    question_set_upload,
    questions_frame,
    scores_frame,
    take_search_again,
)
from components.settings import prepare, spec
from components.state import configurations, require_configurations, require_document
from components.views import grid

ensure_routed()

_CONFIGS = RET_CONFIGS
_SEARCH_JOB = RET_SEARCH_JOB
_CP_JOB = RET_CP_JOB
_MARKS = RET_MARKS
_PICK = RET_PICK
_QUERY = RET_QUERY
_PASTE = RETRIEVAL("paste")
_ANSWER = RETRIEVAL("answer")
HITS_PER_ROW = 2  # top-k tables side by side: wide enough to read the chunks' text


def _reset_for(doc_id: str) -> None:
    """A new document: its marks and picks start empty."""
    if st.session_state.get(RET_DOC_ID) != doc_id:
        st.session_state[RET_DOC_ID] = doc_id
        st.session_state[_MARKS] = []
        st.session_state[_PICK] = []


def _marks(doc):
    """The marked answer (pasted excerpts and picked sentences): its ranges and caption."""
    return answer_marks(doc, st.session_state.get(_MARKS, []), st.session_state.get(_PICK, []))


def _on_mark(text: str) -> None:
    try:
        st.session_state[_MARKS] = add_marks(text, st.session_state.get(_PASTE, ""), st.session_state.get(_MARKS, []))
    except ChunkLabError as e:
        st.session_state[RETRIEVAL("mark_error")] = one_line(str(e))
        return
    st.session_state[_PASTE] = ""


def _on_clear_marks() -> None:
    st.session_state[_MARKS] = []
    st.session_state[_PICK] = []


def _load_question(saved: list) -> None:
    """Put a saved question of this document back into the query box and the marks."""
    i = st.session_state.get(RETRIEVAL("saved_pick"))
    if i is None or not 0 <= i < len(saved):
        return
    q = saved[i]
    st.session_state[_QUERY] = q.question
    st.session_state[_MARKS] = q.spans
    st.session_state[_PICK] = []


def _supersede(*keys: str) -> None:
    """Cancel the jobs at ``keys`` that still run (their threads stop at their next progress report)."""
    for key in keys:
        job = st.session_state.get(key)
        if job is not None and job.running:
            job.cancel()


st.html(PAGE_STYLE)
st.title("Retrieval")
doc = require_document()
_reset_for(doc.id)
demo_search = take_demo_start(RETRIEVAL)  # demo mode's first visit: the demo question, its answer marked, searched
if demo_search:
    question = demo_question()
    st.session_state[_QUERY] = question.question
    st.session_state[_MARKS] = list(question.spans)
    st.session_state[_PICK] = []
    st.session_state.pop(_CONFIGS, None)

try:
    st.caption(store_caption())
except ChunkLabError as e:
    st.error(f"Chroma: {one_line(str(e))}", icon=":material/error:")

# --- configurations and the query -----------------------------------------------------------
entries = configurations()
by_uid = {e.uid: e for e in entries}
require_configurations()
follow_configurations(entries)  # new ones (added on Compare) picked, ones the user unpicked left out
chosen_uids = st.multiselect(
    "Configurations",
    list(by_uid),
    format_func=lambda u: f"{by_uid[u].tag} · {by_uid[u].config.label}",
    key=_CONFIGS,
    persist_state="session",
    help="The Compare page's configurations; add more there.",
)
chosen = [by_uid[u] for u in chosen_uids]
lm = session_models()
inputs = retrieval_inputs(
    doc, chosen, lambda d, c: chunk_document(d, d.id, c),
    lambda d, c: model_chunking(d, c, lm, COMPARE),  # Compare's model runs, or the cache
)
for note in inputs.notes:
    st.caption(note)
labels = inputs.labels

with st.form(RETRIEVAL("query_form"), border=True):
    left, right = st.columns([5, 1], vertical_alignment="bottom")
    # Kept across page switches: coming back, the box holds the query of the results shown below.
    query = left.text_input(
        "Query", key=_QUERY, placeholder="Ask something the document answers…", persist_state="session"
    )
    s_k = spec("retrieval", "k")
    k = right.number_input(
        "Top k", min_value=s_k.low, max_value=s_k.high, step=s_k.step, key=prepare("retrieval", "k"),
        persist_state="session", help=s_k.help,
    )
    search = st.form_submit_button("Search", type="primary", icon=":material/search:", key=RETRIEVAL("search"))

emb_spec = st.session_state.get(EMB_CHOICE)
search_again = take_search_again()  # an opened session's search: its results come back
if search or demo_search or search_again:
    try:
        plan = plan_search(doc, inputs.chunkings, emb_spec, query, k, marks=_marks(doc).ranges,
                           train_on=st.session_state.get(QSET))
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        _supersede(_CP_JOB, _SEARCH_JOB)
        st.session_state[_CP_JOB] = None
        st.session_state[_SEARCH_JOB] = start_plan(plan)

running = st.session_state.get(_SEARCH_JOB)
if inputs.chunkings and (running is None or not running.running):
    interrupted = indexing_resume_note(inputs.chunkings, emb_spec)
    if interrupted is not None:
        st.info(f"Indexing was interrupted: {interrupted}. Search resumes it from there.", icon=":material/history:")
job = job_outcome(_SEARCH_JOB, RETRIEVAL("search_cancel"), "The search", lambda j: j.meta.get("doc_id") == doc.id)
view = search_view(doc, job.result if job is not None else None, list(inputs.chunkings))

# --- results side by side ----------------------------------------------------------------------
if view.tags:
    st.subheader("Top chunks", anchor=False)
    st.caption(view.caption)
    for col, tag in grid(list(view.tags), HITS_PER_ROW):
        with col:
            st.html(inputs.header(tag))
            st.html(view.tables[tag])  # RET_STYLE is on the page already
elif job is None:
    st.caption("Type a query and press Search: every selected configuration returns its top chunks.")

# --- each retriever's levels and routing -----------------------------------------------------------
if view.panels:
    st.subheader("Retrievers", anchor=False)
    st.caption("How each multi-granularity retriever answered: the router's weights, every level's candidates "
               "along the document, and what it returned. Open a retriever to see them.")
    marked_now = _marks(doc).ranges  # the panels' top-1 IoU bars follow the marks without a new search
    for tag, live in view.panels.items():
        retriever_panel(tag, labels[tag], inputs.colors[tag], live, marked_now, RETRIEVAL, inputs.uids[tag])

# --- the true answer ---------------------------------------------------------------------------
st.subheader("True answer", anchor=False)
st.caption(
    "Paste the answer's text as it appears in the document (found exactly, or ignoring whitespace; "
    "separate several excerpts with a line holding only ---), or pick sentences."
)
paste_col, pick_col = st.columns(2)
with paste_col:
    st.text_area("Excerpt", key=_PASTE, height=110)
    with st.container(horizontal=True, gap="small"):
        st.button("Mark", key=RETRIEVAL("mark"), icon=":material/ink_highlighter:", on_click=_on_mark, args=(doc.text,))
        st.button("Clear marks", key=RETRIEVAL("clear"), icon=":material/ink_eraser:", type="tertiary", on_click=_on_clear_marks)
    error = st.session_state.pop(RETRIEVAL("mark_error"), None)
    if error:
        st.error(error, icon=":material/error:")
with pick_col:
    picker = sentence_picker(doc, view, st.session_state.get(_PICK, []))
    st.session_state[_PICK] = list(picker.picked)
    st.multiselect(
        "Sentences",
        list(picker.options),
        key=_PICK,
        persist_state="session",
        format_func=picker.labels.get,
        help="Long documents list the sentences of the retrieved chunks only.",
    )
marked = _marks(doc)
marks = marked.ranges
if marks:
    st.caption(marked.caption)

# --- scores and CP -----------------------------------------------------------------------------
cp_values = None
if view.tags:
    answer = st.text_input(
        "Answer (optional, for CP)", key=_ANSWER, persist_state="session",
        help="CP (information support): the language model's mean NLL of this answer given each "
        "configuration's retrieved chunks; lower means the chunks support the answer better.",
    )
    try:
        cp_plan, cp_problem = plan_cp(doc, view, answer, lm), None
    except ChunkLabError as e:
        cp_plan, cp_problem = None, one_line(str(e))
    if st.button(f"Compute CP with {lm.name}", key=RETRIEVAL("cp"), icon=":material/play_arrow:", disabled=not answer.strip()):
        if cp_plan is None:
            st.error(cp_problem, icon=":material/error:")
        else:
            _supersede(_CP_JOB)
            st.session_state[_CP_JOB] = start_plan(cp_plan)
    done = job_outcome(
        _CP_JOB, RETRIEVAL("cp_cancel"), "CP",
        lambda j: cp_plan is not None and j.meta.get("signature") == cp_plan.signature,
    )
    if done is not None:
        cp_values = done.result

answered = answer_view(doc, view, inputs, marks, cp_values)
if answered.scores is not None:
    st.subheader("Scores", anchor=False)
    st.dataframe(scores_frame(answered.scores), key=RETRIEVAL("scores"), column_config=SCORES_COLUMN_CONFIG)
    st.caption(answered.scores.caption)
elif view.tags:
    st.caption("Mark the true answer to see recall, precision, precision-Ω and IoU per configuration.")

# --- the document view -----------------------------------------------------------------------------
if answered.document is not None:
    st.subheader("In the document", anchor=False)
    shown = answered.document
    st.html(shown.legend)
    with st.container(height=600, border=True, key=RETRIEVAL("view")):
        st.html(shown.html)

# --- the session's question set -----------------------------------------------------------------
st.subheader("Question set", anchor=False)
qset = st.session_state.get(QSET)
if st.button("Save query and marks", key=RETRIEVAL("save"), icon=":material/bookmark_add:", disabled=not marks):
    try:
        qset = st.session_state[QSET] = save_question(qset, doc, query, marks)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        st.toast(f"Saved: {len(qset)} question(s) in the set", icon=":material/check:")
if qset is not None and len(qset):
    st.dataframe(questions_frame(qset), key=RETRIEVAL("qset_table"), hide_index=True)
    shown_set = question_set_view(qset, doc)
    saved = shown_set.saved
    with st.container(horizontal=True, gap="small", vertical_alignment="bottom"):
        if saved:
            st.selectbox(
                "Saved question", range(len(saved)), key=RETRIEVAL("saved_pick"),
                format_func=lambda i: saved[i].question[:80],
            )
            st.button("Load", key=RETRIEVAL("load"), on_click=_load_question, args=(saved,), icon=":material/upload:")
        st.download_button(
            "CSV", shown_set.csv, file_name="questions.csv", mime="text/csv", key=RETRIEVAL("dl_csv"),
            icon=":material/download:", on_click="ignore", help="The Chroma format's questions.csv",
        )
        st.download_button(
            "CSV + corpora (zip)", shown_set.zip, file_name="question_set.zip",
            mime="application/zip", key=RETRIEVAL("dl_zip"), icon=":material/download:", on_click="ignore",
            help="questions.csv and corpora/<corpus_id>.md: import it here or run `python -m backend eval`",
        )
        st.button("Clear the set", key=RETRIEVAL("qset_clear"), type="tertiary", icon=":material/delete:",
                  on_click=lambda: st.session_state.update({QSET: None}))
else:
    st.caption("Saved queries (with their marks) collect here; the Benchmark page runs them.")

with st.expander("Questions on this document", expanded=panel_expanded(doc, RETRIEVAL)):
    question_generation_panel(doc, RETRIEVAL)

with st.expander("Import a question set (Chroma format)"):
    imported = question_set_upload(RETRIEVAL, "Import")
    if imported is not None:
        try:
            st.session_state[QSET] = merge_questions(qset, imported)
        except ChunkLabError as e:
            st.error(one_line(str(e)), icon=":material/error:")
        else:
            st.rerun()
