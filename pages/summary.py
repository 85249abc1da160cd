"""Summary page: the document, every configuration, the numbers already computed anywhere in the session, the verdict.

One row per configuration: chunks, tokens and time (the Compare page's statistics), BC, CS and DS
(the Quality page's, under its settings), recall, precision, IoU and precision-Ω (the last
benchmark's, over its questions on this document only). Each column's best is marked and
explained on hover; what is not computed yet has a button that starts the same job the Quality
or Benchmark page would. A benchmark on other corpora is shown in its own titled section.
"""

import streamlit as st

from backend.figures.markdown import md_text
from backend.lab.summary import summary_view
from components.corpus import corpus_summary_section
from components.keys import SUMMARY, SUMMARY_SHOWN
from components.layout import ensure_routed
from components.lm_runs import page_chunkings, session_models
from components.quality import quality_store, scoring_job_panel, session_throughput
from components.questions import panel_expanded, question_generation_panel
from components.settings import prepare, section_values, spec
from components.state import require_configurations, require_document
from components.summary import (
    csv_button,
    elsewhere_section,
    estimates_preview,
    quality_table,
    report_button,
    retrieval_job_panel,
    retrieval_table,
    session_benchmark,
    small_multiples,
    summary_notes,
    verdict_markdown,
)
from components.tune import tune_summary_section

ensure_routed()

st.title("Summary")
doc = require_document()
entries = require_configurations()

# --- the chunkings: as on Compare (model-backed ones from the cache, else a background job) --------------
lm = session_models()
chunked, pending = page_chunkings(doc, entries, lm, SUMMARY)

# --- the numbers: read where the Compare, Quality and Benchmark pages keep them ----------------------------
benchmark, bm_meta = session_benchmark()
store = quality_store(doc)
view = summary_view(
    doc, entries, chunked, lm, quality=section_values("quality"), store=store, throughput=session_throughput(),
    benchmark=benchmark, question_set_name=bm_meta.get("qset_name"), pending=pending,
    questions=bm_meta.get("qset"), cross_corpus=bm_meta.get("cross_corpus"),
)
store.update(view.quality.found)
summary = view.summary
st.session_state[SUMMARY_SHOWN] = summary

head, download = st.columns([3, 1.3], vertical_alignment="bottom")
with head:
    st.text(doc.source)  # a file name is user input: plain text
    st.caption(f"{len(doc.text):,} characters · {len(entries)} configuration(s) · language model {lm.label}")
with download:
    # The one-file report of exactly what this page shows (backend/report/html.py).
    with st.container(horizontal=True, gap="small"):
        report_button(
            summary, doc, view.chunkings, benchmark=benchmark, quality=view.quality_data, questions=bm_meta.get("qset")
        )
        csv_button(summary, doc)

st.subheader("Verdict", anchor=False)
st.markdown(verdict_markdown(view.verdict))
if view.questions_warning:
    st.warning(md_text(view.questions_warning), icon=":material/warning:")

st.subheader("Numbers", anchor=False)
quality_table(summary)

# --- what is not computed yet: the Quality and Benchmark pages' jobs, started from here -----------------------
missing = view.missing
if view.to_score:
    st.markdown("**Quality metrics not computed yet** for " + ", ".join(view.to_score))
    if lm.error:
        st.error(lm.error, icon=":material/error:")
    else:
        # While the job runs, the verdict and this table with its estimates so far (± 95% intervals), every second.
        scoring_job_panel(
            view.quality, store, job_key=SUMMARY("quality_job"), run_key=SUMMARY("quality_run"),
            cancel_key=SUMMARY("quality_cancel"), confirm_key=SUMMARY("quality_confirm"),
            run_label=view.quality_run_label, preview=estimates_preview(view, doc.source),
        )

# --- retrieval on this document: its table, or where it would be, why there is none and the benchmark to run ---
retrieval_table(summary, view.no_set_line)
if missing.get("retrieval"):
    if summary.retrieval is not None:  # some configurations have their numbers: name the others
        st.markdown("**Retrieval metrics on this document not computed yet** for " + ", ".join(missing["retrieval"]))
    retrieval_job_panel(doc, entries, missing["retrieval"])

# --- questions on this document: generate a set (a chat model, the bundled one, or model-free) ------------------
with st.expander("Questions on this document", expanded=panel_expanded(doc, SUMMARY)):
    question_generation_panel(doc, SUMMARY)

summary_notes(view.notes)

# --- a benchmark on other corpora: its own titled section, never in this document's rows or verdict -------------
elsewhere_section(view.elsewhere)

# --- the session's last corpus run (the Corpus page's): its verdict and report, about the collection ----------
corpus_summary_section()

# --- the session's last tuning result (the Tune page's, or a saved session's): its answer, what it rests on ------
tune_summary_section()

# --- small multiples ----------------------------------------------------------------------------------
if chunked:
    st.subheader("Boundaries and chunk sizes", anchor=False)
    s_charts = spec("summary", "show_charts")
    if st.toggle("Show the charts", key=prepare("summary", "show_charts"), persist_state="session", help=s_charts.help):
        small_multiples(doc, chunked)
