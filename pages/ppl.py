"""Meta-Chunking page: the per-sentence perplexity curve, θ by slider, the chunks it gives, margin sampling.

The model scores the document once (a background job, or the output cache); every control
below re-chunks from those values with no model call, through one call to
:func:`backend.lab.ppl.ppl_view`: the registered chunker the settings choose cuts the held
scores itself, so the chunks shown are the ones ``python -m backend chunk FILE --chunker NAME``
prints for the same parameters and model, and the chart draws the very cuts it made. θ and
every other control are the session's settings (``ppl.threshold``…): leaving the page and
coming back, or saving the session from any page, keeps them.
"""


import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.ppl import chunk_curve, drops_histogram, margin_chart, values_chart
from backend.figures.text import STYLE
from backend.lab.ppl import (
    PPLSettings,
    held_margin,
    held_scores,
    margin_plan,
    margin_view,
    ppl_view,
    scoring_label,
    scoring_plan,
)
from components.config_form import TOKENIZER_HELP
from components.edit import edit_copy_button
from components.keys import PPL
from components.layout import ensure_routed
from components.lm_runs import model_job_panel, session_models
from components.ppl import (
    PAPER_ADVICE,
    PAPER_RULE,
    REFERENCE_RULE,
    chunk_stats,
    document_view,
    export_buttons,
    partial_curve,
    theta_controls,
)
from components.settings import get, prepare, put, section_values, spec
from components.state import add_configuration, require_document
from components.views import export_stem

ensure_routed()

_SCORES = PPL("scores")  # PPLScores of the current document and model
_JOB = PPL("score_job")
_MARGIN = PPL("margin")  # MarginResult
_MARGIN_JOB = PPL("margin_job")
_COUNTER = PPL("counter")  # the SpanCounter of the last view (its document and tokenizer), reused by the next
_SHOWN = PPL("shown")  # the PPLView last drawn, for the aim button and the curve's clicks
_NOTE = PPL("note")
_SLIDER = PPL("threshold_slider")
_CURVE = PPL("curve")
VALUE_LABELS = {"nll": "NLL", "ppl": "PPL"}
UNIT_LABELS = {"chunk": "the chunk so far", "sentence": "the previous sentence"}


def _settings() -> PPLSettings:
    """The chunking settings as the session holds them (θ None until the page first shows one)."""
    return PPLSettings.of(section_values("ppl"))


def _on_curve_click() -> None:
    """Use the θ of the clicked point of the θ curve."""
    points = st.session_state[_CURVE].selection.points
    if points:
        put("ppl", "threshold", float(points[0]["x"]))


def _on_aim() -> None:
    """Set θ to the curve's point whose mean chunk length is closest to the aim."""
    view = st.session_state.get(_SHOWN)
    aim = get("ppl", "aim")
    if view is None or not len(view.curve.thresholds):
        return
    theta, mean = view.aim(aim)
    put("ppl", "threshold", theta)
    st.session_state[_NOTE] = f"θ = {theta:.4g}: about {mean:,.0f} tokens per chunk (aimed at {aim:,})."


def _add(config) -> None:
    """Add a configuration to Compare and say so."""
    entry = add_configuration(config)
    st.session_state[_NOTE] = f"Added {entry.tag} to Compare: {entry.config.label}"


st.html(STYLE)
st.title("Meta-Chunking")
st.caption(
    "Perplexity chunking (Zhao et al., 2024): each sentence's mean token NLL given all the text before it; "
    "a sentence at a local minimum whose drop reaches θ ends a chunk. The model scores the document once; "
    "every control below re-chunks from those values instantly, with no model call."
)
if st.session_state.get(_NOTE):
    st.toast(st.session_state.pop(_NOTE), icon=":material/check:")

doc = require_document()
if not doc.sentences:
    st.info("This document has no sentences to score.", icon=":material/info:")
    st.stop()

lm = session_models()
with st.container(horizontal=True, vertical_alignment="center", gap="small"):
    st.caption("Language model:")
    st.text(lm.label)  # a model name is user or server input: plain text
    st.page_link("pages/models.py", label="Choose another" if not lm.default else "Choose one", icon=":material/memory:")
if lm.error:
    st.error(lm.error, icon=":material/error:")
    st.stop()

# --- the per-sentence scores: session state, else the output cache, else a background job ---------
scores = held_scores(st.session_state.get(_SCORES), doc, lm)
if scores is None:
    job = model_job_panel(
        _JOB,
        scoring_plan(doc, lm),
        run_label=scoring_label(doc, lm),
        run_key=PPL("score"),
        cancel_key=PPL("score_cancel"),
        what="Scoring",
        preview=lambda job: partial_curve(
            doc, job, lm.identity, lm.name, key=PPL("partial_chart"), settings=_settings()
        ),
        resume=lm.scoring_resume_note(doc.text),
    )
    if job is None:
        st.stop()
    scores = job.result
st.session_state[_SCORES] = scores
n = len(scores.sentences)
if n < 3:
    st.info(
        f"This document has {n} sentence{'s' if n != 1 else ''}: a boundary needs a sentence with a neighbour "
        "on each side, so it stays one chunk.",
        icon=":material/info:",
    )

# --- controls ----------------------------------------------------------------------------------------
cols = st.columns([1.1, 1.3, 1.6, 1.1, 1], vertical_alignment="bottom")
cols[0].segmented_control(
    "Value", spec("ppl", "value").choices, required=True, key=prepare("ppl", "value"), persist_state="session",
    format_func=VALUE_LABELS.get, help=spec("ppl", "value").help,
)
cols[1].segmented_control(
    "Rule", spec("ppl", "rule").choices, required=True, key=prepare("ppl", "rule"), persist_state="session",
    help=f"{spec('ppl', 'rule').help} Both are explained under the chart.",
)
cols[2].selectbox(
    "Tokenizer", spec("ppl", "tokenizer").choices, key=prepare("ppl", "tokenizer"), persist_state="session",
    format_func=lambda t: f"{t} — {TOKENIZER_HELP.get(t, t)}", help=spec("ppl", "tokenizer").help,
)
target_spec = spec("ppl", "target_length")
cols[3].number_input(
    "Target length", min_value=target_spec.low, max_value=target_spec.high, step=target_spec.step,
    key=prepare("ppl", "target_length"), persist_state="session", help=target_spec.help,
)
cols[4].toggle(
    "Overlap", key=prepare("ppl", "overlap"), persist_state="session", disabled=get("ppl", "target_length") > 0,
    help=spec("ppl", "overlap").help,
)

# The settings are read back through components.settings, never from a widget's return value: a widget
# that comes back without a value (a new widget id) counts as its setting's default.
# Which registered chunker the controls describe, its cut of the held scores, θ's range and curve: one call.
try:
    view = ppl_view(doc, scores, _settings(), st.session_state.get(_COUNTER))
except ChunkLabError as e:
    st.error(one_line(str(e)), icon=":material/error:")
    st.stop()
st.session_state[_COUNTER] = view.counter
st.session_state[_SHOWN] = view
theta = theta_controls(_SLIDER, view.slider, view.threshold)

# --- the curve -----------------------------------------------------------------------------------------
cuts = view.boundaries
n_cut = len(cuts.kept)
st.markdown(
    f"{chunk_stats(view.stats)} · {n_cut:,} boundar{'y' if n_cut == 1 else 'ies'} of {cuts.minima:,} minima · "
    f"re-chunked in {view.stats.elapsed_ms:,.1f} ms, no model call"
)
st.plotly_chart(
    values_chart(scores, view.cut.values, cuts, view.value_name, revision=f"{doc.id}:{view.settings.value}"),
    key=PPL("chart"),
    config={"displaylogo": False},
)
with st.expander("The two boundary rules", icon=":material/rule:"):
    st.caption(
        "Sentence i (neither the first nor the last) with value v[i] is the last sentence of its chunk when:"
    )
    left, right = st.columns(2, gap="large")
    with left:
        st.markdown("**reference** (default; the authors' code, `find_minima`)")
        st.markdown(REFERENCE_RULE)
        st.caption("Its drop is the larger of the two: a minimum is kept when one neighbour rises θ above it.")
    with right:
        st.markdown("**paper** (eq. 3 as printed)")
        st.markdown(PAPER_RULE)
        st.caption("Its drop is the smaller of the two: both neighbours must pass θ, so it cuts less at the same θ.")
    st.caption(
        "A sentence with no scored token has no value (a gap in the line): it is never a minimum and never makes "
        "a neighbour one."
    )

# --- choosing θ -------------------------------------------------------------------------------------
if st.toggle("Help me choose θ", key=prepare("ppl", "guide"), persist_state="session", help=spec("ppl", "guide").help):
    st.caption(PAPER_ADVICE)
    left, right = st.columns(2, gap="medium")
    with left:
        st.plotly_chart(drops_histogram(view.cut.candidates, cuts), key=PPL("drops"), config={"displaylogo": False})
    with right:
        st.plotly_chart(
            chunk_curve(view.curve, theta, f"{view.settings.tokenizer} tokens"), key=_CURVE,
            on_select=_on_curve_click, selection_mode="points",
            config={"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]},
        )
    st.caption(
        f"The curve is plain PPL chunking (no overlap, no combination). Mean length ≈ the document's "
        f"{view.total_tokens:,} {view.settings.tokenizer} tokens ÷ chunks. Click a point to use its θ, "
        "or aim at a length:"
    )
    aim_spec = spec("ppl", "aim")
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        st.number_input(
            "Mean chunk length to aim at", min_value=aim_spec.low, max_value=aim_spec.high, step=aim_spec.step,
            key=prepare("ppl", "aim"), persist_state="session", width=220, help=aim_spec.help,
        )
        st.button("Set θ", key=PPL("aim_apply"), icon=":material/target:", on_click=_on_aim)

# --- the chunks --------------------------------------------------------------------------------------
st.subheader("Chunks", anchor=False)
with st.container(horizontal=True, vertical_alignment="center", gap="small"):
    st.button(
        f"Add {view.chunker} to Compare", key=PPL("add"), icon=":material/add:", type="primary", on_click=_add,
        args=(view.config,), help=view.config.label,
    )
    edit_copy_button(view.config, doc, view.config.label, PPL("edit_copy"))
    st.page_link("pages/compare.py", label="Open Compare", icon=":material/compare:")
    export_buttons(export_stem(doc.source, "ppl", view.chunking), view.values_csv, view.chunking, prefix=PPL.prefix)
document_view(doc, view.chunking, PPL("view_page"), PPL("view"))

# --- margin sampling ------------------------------------------------------------------------------------
st.subheader("Margin sampling", anchor=False)
st.caption(
    "The model answers, sentence by sentence, whether to split (the paper's Table 5 prompt through its chat "
    'template): margin = P("1": split) − P("2": keep). A sentence starts a chunk when its margin reaches the '
    "threshold, which starts at 0 and follows the mean of the last five margins. One model call per sentence."
)
st.segmented_control(
    "Compare each sentence with", spec("ppl", "margin_unit").choices, required=True,
    key=prepare("ppl", "margin_unit"), persist_state="session", format_func=UNIT_LABELS.get,
    help=spec("ppl", "margin_unit").help,
)
unit = get("ppl", "margin_unit")
result = held_margin(st.session_state.get(_MARGIN), doc, lm, unit)
if result is None and n > 1:
    job = model_job_panel(
        _MARGIN_JOB, margin_plan(doc, lm, unit),
        run_label=f"Run margin sampling ({n - 1:,} model calls)", run_key=PPL("margin_run"),
        cancel_key=PPL("margin_cancel"), auto=False, what="Margin sampling",
    )
    if job is not None:
        result = st.session_state[_MARGIN] = job.result
if result is not None:
    try:
        margin = margin_view(doc, result, view.settings, view.counter)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        merged = margin.stats.target_length
        st.markdown(
            chunk_stats(margin.stats)
            + (f" · merged up to {merged:,} tokens (the target length above)" if merged else "")
        )
        st.plotly_chart(margin_chart(doc, result.steps), key=PPL("margin_chart"), config={"displaylogo": False})
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.button(
                "Add margin_sampling to Compare", key=PPL("margin_add"), icon=":material/add:", on_click=_add,
                args=(margin.config,), help=margin.config.label,
            )
            stem = export_stem(doc.source, "margin", margin.chunking)
            export_buttons(stem, None, margin.chunking, prefix=PPL("margin"))
        document_view(doc, margin.chunking, PPL("margin_page"), PPL("margin_view"), height=420)
elif n <= 1:
    st.caption("One sentence: nothing to decide.")
