"""Tune page: search the chunkers' parameter ranges for the best chunking of this document and its questions.

Pick the question set, the families, the objective (and a second one), constraints, a budget and a seed;
Start plans the run with :func:`backend.lab.tune_form.tune_request` and starts
:func:`backend.lab.tune.plan_tune`'s job (the same run as ``python -m backend tune``). While it runs, its
bar, the budget, the Pareto front, the θ curves and the trial table refresh from its output folder; at the
end the page shows the pick with its held-out interval, the comparisons, the tied set, the warnings and
what was left out, and "Use this" adds the pick to Compare. The output folder defaults to one per document
and settings, so Start with the same settings resumes a cancelled or interrupted run.
"""

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.markdown import md_text
from backend.figures.tune import objective_label
from backend.lab.tune import GENERATED_PER_DOCUMENT, MAX_QUESTIONS_PER_DOCUMENT, plan_tune
from backend.lab.tune_form import form_options, tune_request
from backend.lab.tune_view import check_tune_folder, finished_trials, left_out_sentences, result_view, tune_view
from components.cached import sample_question_sets
from components.documents import current_sample
from components.folders import open_folder_expander
from components.keys import QSET, TUNE, TUNE_JOB, TUNE_OPENED, TUNE_RESULT
from components.layout import ensure_routed
from components.lm_runs import session_models, start_plan
from components.models import job_progress
from components.state import require_document
from components.tune import live_panel, result_panel, trials_panel

ensure_routed()

_RESUMED = TUNE("resumed")  # trials the job's folder held when it started
_SOURCES = {"generate": "Generated (no model)", "session": "Session set", "sample": "Bundled sample set"}
_NO_SECOND = "none"

st.title("Tune")
st.caption("Search the chunkers' parameter ranges for the best chunking of this document and its questions, "
           "and say how sure the answer is: the pick is checked on held-out questions against the runner-up and "
           "a baseline. The same run as `python -m backend tune`.")

doc = require_document()
sample = current_sample()
models = session_models()
options = form_options(models)
st.markdown(f"**Document:** {md_text(doc.source)} · {len(doc.text):,} characters")

q1, q2 = st.columns([3, 2], vertical_alignment="bottom")
qsource = q1.segmented_control("Questions", list(_SOURCES), default="generate", required=True, key=TUNE("qsource"),
                               format_func=_SOURCES.get,
                               help="Generated: exact excerpts of the document made into questions, no model. "
                                    "The questions are split (seeded) into a tuning part and a held-out part.")
sample_set = None
per_document = GENERATED_PER_DOCUMENT
if qsource == "generate":
    per_document = q2.number_input("Questions per document", min_value=1, max_value=MAX_QUESTIONS_PER_DOCUMENT,
                                   value=GENERATED_PER_DOCUMENT, step=5, key=TUNE("per_document"),
                                   help="How many questions are generated on the document; more questions give "
                                        "narrower intervals (another count: another output folder)")
elif qsource == "sample":
    sets = {s.name: s for s in sample_question_sets()}
    sample_set = q2.selectbox("Sample", list(sets), key=TUNE("sample"), format_func=lambda n: sets[n].title)
elif qsource == "session" and st.session_state.get(QSET) is None:
    q2.caption("The session's set is empty: save questions on the Retrieval or Benchmark page.")

families = st.multiselect("Families", list(options.families), default=list(options.defaults), key=TUNE("families"),
                          help="The chunkers searched, each over its declared parameter ranges. "
                               + "; ".join(options.family_help(f) for f in options.families))
if options.left_out:
    st.caption(md_text(" ".join(left_out_sentences(options.left_out, ahead=True))))

o1, o2, o3, o4 = st.columns(4)
objective = o1.selectbox("Objective", list(options.objectives), key=TUNE("objective"), format_func=objective_label,
                         help="Maximised, as a mean over the tuning questions")
second = o2.selectbox("Second objective", [_NO_SECOND, *options.secondary], key=TUNE("secondary"),
                      format_func=lambda s: "none" if s == _NO_SECOND else f"{s} (minimised)",
                      help="A second objective makes it a two-objective search (NSGA-II) along a Pareto front")
budget = o3.text_input("Budget", value="2m", key=TUNE("budget"),
                       help=f"Wall-clock time, e.g. {', '.join(options.budgets)} or 90s")
cap = o4.number_input("Trial cap", min_value=0, max_value=10_000, value=0, step=5, key=TUNE("trials"),
                      help="At most this many trials (0: until the budget is spent)")
c1, c2, c3 = st.columns([2, 1, 2])
constraints = c1.text_area("Constraints, one per line", key=TUNE("constraints"), height=80,
                           placeholder="mean_tokens<=400\nchunks>=5",
                           help="A configuration violating one is not scored")
seed = c2.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key=TUNE("seed"),
                       help="Seeds the sampler and the tuning/held-out split")
out_raw = c3.text_input("Output folder", key=TUNE("out"), placeholder="default: one per document and settings",
                        help="Where the run writes its journal, plan, trials and result; the same settings resume")

job = st.session_state.get(TUNE_JOB)
running = job is not None and job.running
if st.button("Start", key=TUNE("start"), type="primary", icon=":material/play_arrow:", disabled=running):
    try:
        request = tune_request(
            doc, sample=sample.name if sample else None, question_source=qsource,
            session_questions=st.session_state.get(QSET), sample_set=sample_set, families=families,
            objective=objective, secondary=None if second == _NO_SECOND else second, constraints=constraints,
            budget=budget, seed=int(seed), trials=int(cap) or None, out=out_raw,
            questions_per_document=int(per_document),
        )
        resumed = finished_trials(request.out)
        plan = plan_tune(request, models)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        job = st.session_state[TUNE_JOB] = start_plan(plan)
        st.session_state[_RESUMED] = resumed
        st.session_state[TUNE_OPENED] = None

open_folder_expander(key=TUNE, opened_key=TUNE_OPENED, check=check_tune_folder, command="tune")

opened = st.session_state.get(TUNE_OPENED)
if opened is not None and not running:
    st.subheader("Result", anchor=False)
    try:
        result_panel(tune_view(opened))
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    st.stop()

if job is None:
    saved = st.session_state.get(TUNE_RESULT)
    if saved is not None:
        st.subheader("Result", anchor=False)
        st.caption("The session's last tuning result (its trials as the result holds them).")
        result_panel(result_view(saved))
    else:
        st.caption("Pick the questions and families, then Start.")
    st.stop()
if st.session_state.get(_RESUMED):
    st.info(f"Resumed: {st.session_state[_RESUMED]:,} trials from an earlier run in {md_text(job.meta['out'])} are "
            "not run again.", icon=":material/history:")
if job.running:
    job_progress(TUNE_JOB, TUNE("cancel"))
    live_panel(TUNE_JOB)
    st.stop()
if job.state == "failed":
    st.error(job.error or "The tuning run failed.", icon=":material/error:")
elif job.state == "cancelled":
    st.warning("The tuning run was cancelled: its trials are kept, and Start with the same settings resumes.",
               icon=":material/stop_circle:")

st.subheader("Result", anchor=False)
try:
    view = tune_view(job.meta["out"])
except ChunkLabError as e:
    st.error(one_line(str(e)), icon=":material/error:")
else:
    if view.result is None:
        trials_panel(view, "done")
    else:
        result_panel(view)
