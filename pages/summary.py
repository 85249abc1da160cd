"""Summary page: the document, every configuration, the numbers already computed anywhere in the session, the verdict.

One row per configuration: chunks, tokens and time (the Compare page's statistics), BC, CS and DS
(the Quality page's, under its settings), recall, precision, IoU and precision-Ω (the last
benchmark's). Each column's best is marked and explained on hover; what is not computed yet
has a button that starts the same job the Quality or Benchmark page would.
"""

import streamlit as st

from backend.chunkers.run import chunk_all, needs_model
from backend.figures.charts import config_color
from backend.report.summary import summarize, verdict
from components.cached import chunk_document
from components.keys import SUMMARY, SUMMARY_SHOWN
from components.layout import ensure_routed
from components.lm_runs import model_chunking, pending_runs_panel, session_models
from components.quality import page_settings
from components.retrieval import md_text
from components.state import require_configurations, require_document
from components.summary import (
    quality_job_panel,
    report_button,
    retrieval_job_panel,
    session_benchmark,
    session_quality,
    small_multiples,
    styled_summary,
    summary_column_config,
    verdict_markdown,
)

ensure_routed()

st.title("Summary")
doc = require_document()
entries = require_configurations()

# --- the chunkings: as on Compare (model-backed ones from the cache, else a background job) --------------
lm = session_models()
outcomes = chunk_all(
    doc, [e.config for e in entries], lambda d, c: chunk_document(d, d.id, c),
    with_model=lambda d, c: model_chunking(d, c, lm, SUMMARY),
)
ok = [(e, o.chunking) for e, o in zip(entries, outcomes) if o.state == "done"]
pending = [e for e, o in zip(entries, outcomes) if o.state == "pending"]
for e, o in zip(entries, outcomes):
    if o.state == "failed":
        st.error(f"{e.tag}: {o.error}", icon=":material/error:")
if pending and not lm.error:
    pending_runs_panel(doc, lm, [e.config for e in pending], SUMMARY)

# --- the numbers: read where the Compare, Quality and Benchmark pages keep them ----------------------------
settings = page_settings()
tagged = [(e.tag, ch) for e, ch in ok]
quality, quality_data = session_quality(doc, tagged, lm, settings)
benchmark, bm_meta = session_benchmark()
by_tag = dict(tagged)
summary = summarize(
    doc, [(e.tag, by_tag.get(e.tag, e.config)) for e in entries], quality=quality, benchmark=benchmark,
    settings={
        **settings.to_json(),
        "retrieve": benchmark.retrieve if benchmark is not None else None,
        "embedder": benchmark.embedder if benchmark is not None else None,
        "lm": lm.name,
        "question_set": bm_meta.get("qset_name"),
        "question_set_size": benchmark.questions if benchmark is not None else None,
    },
)
st.session_state[SUMMARY_SHOWN] = summary

head, download = st.columns([4, 1], vertical_alignment="bottom")
with head:
    st.text(doc.source)  # a file name is user input: plain text
    st.caption(f"{len(doc.text):,} characters · {len(entries)} configuration(s) · language model {lm.label}")
with download:
    # The one-file report of exactly what this page shows (backend/report/html.py).
    report_button(summary, doc, by_tag, benchmark=benchmark, quality=quality_data, questions=bm_meta.get("qset"))

st.subheader("Verdict", anchor=False)
st.markdown(verdict_markdown(verdict(summary)))

st.subheader("Numbers", anchor=False)
st.dataframe(styled_summary(summary), key=SUMMARY("table"), column_config=summary_column_config())
notes = [
    f"best of each column in green; BC, CS (complete graph) and DS under the Quality page's settings: K = "
    f"{settings.K:.2f}, CS rule {settings.cs_rule}, BC mode {settings.bc_mode}, δ = {settings.delta}"
    + (f", pair window w = {settings.window}" if settings.window else "")
]
if benchmark is not None:
    name = bm_meta.get("qset_name") or "a question set"
    notes.append(
        f"retrieval on {md_text(str(name))} ({benchmark.questions} questions, {md_text(benchmark.embedder)}, "
        + ("as many chunks as hold excerpts" if benchmark.retrieve == -1 else f"{benchmark.retrieve} chunks")
        + " per question)"
    )
if any(needs_model(e.config) for e in pending):
    notes.append(f"{', '.join(e.tag for e in pending)} wait for their model run")
st.caption("Best " + " · ".join(notes)[len("best ") :])

# --- what is not computed yet: the Quality and Benchmark pages' jobs, started from here -----------------------
missing = summary.missing()
to_score = [(t, by_tag[t]) for t in missing.get("quality", ()) if t in by_tag]
if to_score:
    st.markdown("**Quality metrics not computed yet** for " + ", ".join(t for t, _ in to_score))
    quality_job_panel(doc, to_score, lm, settings)
if missing.get("retrieval"):
    st.markdown("**Retrieval metrics not computed yet** for " + ", ".join(missing["retrieval"]))
    retrieval_job_panel(doc, entries, missing["retrieval"])

# --- small multiples ----------------------------------------------------------------------------------
if ok:
    st.subheader("Boundaries and chunk sizes", anchor=False)
    if st.toggle("Show the charts", value=True, key=SUMMARY("show_charts"), persist_state="session"):
        small_multiples(doc, tagged, [config_color(e.uid) for e, _ in ok])
