"""Meta-Chunking page: the per-sentence perplexity curve, θ by slider, the chunks it gives, margin sampling.

The model scores the document once (a background job, or the output cache); every control
below re-chunks from those values in session state, with no model call, through the
registered chunker's own ``chunk_from_means`` / ``chunk_from_steps``: the chunks shown are the
ones ``python -m backend chunk FILE --chunker NAME`` prints for the same parameters and model.
"""


import streamlit as st

from backend.chunkers import ModelContext, make_chunker
from backend.chunkers.meta.algorithms import (
    RULES,
    VALUES,
    ThetaCurve,
    boundaries_at,
    boundary_candidates,
    sentence_values,
    suggest_thresholds,
    theta_curve,
)
from backend.chunkers.meta.results import MarginResult, PPLScores, values_csv
from backend.errors import ChunkLabError, NotCached, one_line
from backend.lab.jobs import JobPlan
from backend.tokenizers import TOKENIZER_NAMES, SpanCounter, get_tokenizer
from components.config_form import TOKENIZER_HELP
from backend.figures.ppl import chunk_curve, drops_histogram, margin_chart, values_chart
from components.keys import PPL
from components.layout import ensure_routed
from components.lm_runs import (
    model_job_panel,
    session_models,
)
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
from backend.figures.text import STYLE
from components.state import add_configuration, require_document
from components.views import export_stem

ensure_routed()

_SCORES = PPL("scores")  # PPLScores of the current document and model
_JOB = PPL("score_job")
_MARGIN = PPL("margin")  # MarginResult
_MARGIN_JOB = PPL("margin_job")
_COUNTER = PPL("counter")  # (doc id, tokenizer, SpanCounter): token counts of any span, one tokenization
_CURVE_DATA = PPL("curve_data")  # the ThetaCurve last drawn, for the aim button
_NOTE = PPL("note")
_THETA, _SLIDER = PPL("theta"), PPL("theta_slider")
_CURVE, _AIM = PPL("curve"), PPL("aim")
DEFAULT_THETA = 0.5  # the ppl chunker's default
VALUE_LABELS = {"nll": "mean NLL", "ppl": "perplexity"}


def _counter(doc, tokenizer: str) -> SpanCounter:
    """One SpanCounter per document and tokenizer, kept across reruns (each θ move re-counts spans)."""
    held = st.session_state.get(_COUNTER)
    if held is None or held[0] != doc.id or held[1] != tokenizer:
        held = st.session_state[_COUNTER] = (doc.id, tokenizer, SpanCounter(get_tokenizer(tokenizer), doc.text))
    return held[2]


def _set_theta(theta: float) -> None:
    """Set θ exactly (the θ controls move the slider onto it)."""
    st.session_state[_THETA] = float(theta)


def _on_curve_click() -> None:
    """Use the θ of the clicked point of the θ curve."""
    points = st.session_state[_CURVE].selection.points
    if points:
        _set_theta(float(points[0]["x"]))


def _on_aim() -> None:
    """Set θ to the curve's point whose mean chunk length is closest to the aim."""
    curve: ThetaCurve | None = st.session_state.get(_CURVE_DATA)
    aim = st.session_state.get(_AIM)
    if curve is None or not len(curve.thresholds) or not aim:
        return
    theta, mean = curve.theta_for_length(aim)
    _set_theta(theta)
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

def _partial_curve(doc, job, model: str, model_name: str) -> None:
    """While the first scoring pass runs: the curve of the sentences scored so far, with the page's value and rule."""
    value = st.session_state.get(PPL("value"))
    value = value if value in VALUES else "nll"
    rule = st.session_state.get(PPL("rule"))
    rule = rule if rule in RULES else "reference"
    theta = st.session_state.get(_THETA)
    theta = float(theta) if isinstance(theta, (int, float)) else DEFAULT_THETA
    partial_curve(
        doc, job, model, model_name, key=PPL("partial_chart"), value=value, rule=rule, theta=theta,
        value_name=VALUE_LABELS[value],
    )


# --- the per-sentence scores: session state, else the output cache, else a background job ---------
scores: PPLScores | None = st.session_state.get(_SCORES)
if scores is None or scores.doc_id != doc.id or scores.model != lm.identity:
    scores = None
    cached = lm.cached_document_scores(doc.text)
    if cached is not None:
        scores = st.session_state[_SCORES] = PPLScores.build(doc, cached, lm.identity, lm.name)
    else:

        def _score(scorer, progress, d=doc, model=lm.identity):
            # The chunkers' own scoring pass (ModelContext.token_scores): output cache included.
            ts = ModelContext(scorer=scorer, progress=progress).token_scores(d.text)
            return PPLScores.build(d, ts, model, scorer.info.name)

        job = model_job_panel(
            _JOB,
            JobPlan(f"Scoring {doc.source} with {lm.name}", (doc.id, lm.identity), _score, models=lm),
            run_label=f"Score with {lm.name}",
            run_key=PPL("score"),
            cancel_key=PPL("score_cancel"),
            what="Scoring",
            preview=lambda job, d=doc, m=lm.identity, name=lm.name: _partial_curve(d, job, m, name),
            resume=lm.scoring_resume_note(doc.text),
        )
        if job is None:
            st.stop()
        scores = st.session_state[_SCORES] = job.result
n = len(scores.sentences)
if n < 3:
    st.info(
        f"This document has {n} sentence{'s' if n != 1 else ''}: a boundary needs a sentence with a neighbour "
        "on each side, so it stays one chunk.",
        icon=":material/info:",
    )

# --- controls ----------------------------------------------------------------------------------------
cols = st.columns([1.1, 1.3, 1.6, 1.1, 1], vertical_alignment="bottom")
value = cols[0].segmented_control(
    "Value", list(VALUES), default="nll", required=True, key=PPL("value"), persist_state="session",
    format_func=lambda v: {"nll": "NLL", "ppl": "PPL"}[v],
    help="NLL: each sentence's mean token NLL (the authors' code). PPL: its exponential (the paper's notation). "
    "The minima are the same; the drops, and so θ, are on another scale.",
)
rule = cols[1].segmented_control(
    "Rule", list(RULES), default="reference", required=True, key=PPL("rule"), persist_state="session",
    help="reference: the authors' code — the larger drop reaches θ. paper: eq. 3 — the smaller drop passes θ "
    "(fewer cuts at the same θ). Both are explained under the chart.",
)
tokenizer = cols[2].selectbox(
    "Tokenizer", list(TOKENIZER_NAMES), key=PPL("tokenizer"), persist_state="session",
    format_func=lambda t: f"{t} — {TOKENIZER_HELP.get(t, t)}",
    help="Counts chunk sizes and the target length (the model's own tokens only score).",
)
target = int(
    cols[3].number_input(
        "Target length", min_value=0, max_value=100_000, value=0, step=10, key=PPL("target"),
        persist_state="session",
        help="0: plain meta-chunks (ppl). Above 0: dynamic combination (ppl_combined) — adjacent meta-chunks "
        "merged while a chunk stays within this many tokens; a longer meta-chunk stands alone.",
    )
)
overlap = cols[4].toggle(
    "Overlap", key=PPL("overlap"), persist_state="session", disabled=target > 0,
    help="ppl_overlap: the sentence at a boundary ends one chunk and also opens the next (section 4.2.1). "
    "Not combined with a target length.",
)

values = sentence_values(scores.nll, value)
candidates = boundary_candidates(values, rule)
bounds = suggest_thresholds(candidates)
theta = theta_controls(_THETA, _SLIDER, bounds, DEFAULT_THETA)

# Which registered chunker the controls describe; it chunks the held scores itself.
name = "ppl_combined" if target > 0 else ("ppl_overlap" if overlap else "ppl")
params = {"threshold": theta, "rule": rule, "value": value}
if target > 0:
    params["target_length"] = target
try:
    chunker = make_chunker(name, params, tokenizer)
    config = chunker.config
    counter = _counter(doc, tokenizer)
    chunking = chunker.chunk_from_means(doc, scores.nll, counter)
except ChunkLabError as e:
    st.error(one_line(str(e)), icon=":material/error:")
    st.stop()
cuts = boundaries_at(candidates, theta, rule)

# --- the curve -----------------------------------------------------------------------------------------
value_name = VALUE_LABELS[value]
n_cut = len(cuts.kept)
st.markdown(
    f"{chunk_stats(chunking, target)} · {n_cut:,} boundar{'y' if n_cut == 1 else 'ies'} of {cuts.minima:,} minima · "
    f"re-chunked in {chunking.elapsed_s * 1000:,.1f} ms, no model call"
)
st.plotly_chart(
    values_chart(scores, values, cuts, value_name, revision=f"{doc.id}:{value}"),
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
if st.toggle("Help me choose θ", value=True, key=PPL("guide"), persist_state="session"):
    st.caption(PAPER_ADVICE)
    total = counter.count(doc.sentences[0].start, doc.sentences[-1].end)
    curve = st.session_state[_CURVE_DATA] = theta_curve(candidates, rule, n, total, bounds[0], bounds[1])
    left, right = st.columns(2, gap="medium")
    with left:
        st.plotly_chart(drops_histogram(candidates, cuts), key=PPL("drops"), config={"displaylogo": False})
    with right:
        st.plotly_chart(
            chunk_curve(curve, theta, f"{tokenizer} tokens"), key=_CURVE,
            on_select=_on_curve_click, selection_mode="points",
            config={"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]},
        )
    st.caption(
        f"The curve is plain PPL chunking (no overlap, no combination). Mean length ≈ the document's "
        f"{total:,} {tokenizer} tokens ÷ chunks. Click a point to use its θ, or aim at a length:"
    )
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        st.number_input(
            "Mean chunk length to aim at", min_value=1, max_value=1_000_000, value=200, step=10,
            key=_AIM, persist_state="session", width=220,
        )
        st.button("Set θ", key=PPL("aim_apply"), icon=":material/target:", on_click=_on_aim)

# --- the chunks --------------------------------------------------------------------------------------
st.subheader("Chunks", anchor=False)
with st.container(horizontal=True, vertical_alignment="center", gap="small"):
    st.button(
        f"Add {name} to Compare", key=PPL("add"), icon=":material/add:", type="primary", on_click=_add, args=(config,),
        help=config.label,
    )
    st.page_link("pages/compare.py", label="Open Compare", icon=":material/compare:")
    stem = export_stem(doc.source, "ppl", chunking)
    export_buttons(
        stem, lambda: values_csv(scores, values, candidates, cuts.kept, chunking, value), chunking,
        prefix=PPL.prefix,
    )
document_view(doc, chunking, PPL("view_page"), PPL("view"))

# --- margin sampling ------------------------------------------------------------------------------------
st.subheader("Margin sampling", anchor=False)
st.caption(
    "The model answers, sentence by sentence, whether to split (the paper's Table 5 prompt through its chat "
    'template): margin = P("1": split) − P("2": keep). A sentence starts a chunk when its margin reaches the '
    "threshold, which starts at 0 and follows the mean of the last five margins. One model call per sentence."
)
unit = st.segmented_control(
    "Compare each sentence with", ["chunk", "sentence"], default="chunk", required=True, key=PPL("margin_unit"),
    persist_state="session", format_func=lambda u: {"chunk": "the chunk so far", "sentence": "the previous sentence"}[u],
)
margin_sig = (doc.id, lm.identity, unit)
result: MarginResult | None = st.session_state.get(_MARGIN)
if result is None or (result.doc_id, result.model, result.unit) != margin_sig:
    result = None


# The decisions depend on the unit and language only; target length and tokenizer re-chunk them below.
margin_decider = make_chunker("margin_sampling", {"unit": unit, "language": "auto"})


def _margin_plan() -> JobPlan:
    """The margins: read from the cache when it holds them all (instant), else computed in a job."""
    context = lm.cache_only()

    def cached(d=doc, decider=margin_decider):
        if context is None:
            raise NotCached("the model's fingerprint is unknown")
        return tuple(decider.steps(d, context))

    def run(scorer, progress, d=doc, decider=margin_decider):
        return tuple(decider.steps(d, ModelContext(scorer=scorer, progress=progress)))

    return JobPlan(f"Margin sampling {doc.source} with {lm.name}", margin_sig, run, models=lm, from_cache=cached)


if result is None and n > 1:
    job = model_job_panel(
        _MARGIN_JOB, _margin_plan(),
        run_label=f"Run margin sampling ({n - 1:,} model calls)", run_key=PPL("margin_run"),
        cancel_key=PPL("margin_cancel"), auto=False, what="Margin sampling",
    )
    if job is not None:
        result = st.session_state[_MARGIN] = MarginResult(doc.id, lm.identity, unit, job.result)
if result is not None:
    mparams = {"unit": unit, "language": "auto", "target_length": target}
    try:
        mchunker = make_chunker("margin_sampling", mparams, tokenizer)
        mconfig = mchunker.config
        mchunking = mchunker.chunk_from_steps(doc, result.steps, counter)
    except ChunkLabError as e:
        st.error(one_line(str(e)), icon=":material/error:")
    else:
        st.markdown(
            chunk_stats(mchunking, target)
            + (f" · merged up to {target:,} tokens (the target length above)" if target else "")
        )
        st.plotly_chart(margin_chart(doc, result.steps), key=PPL("margin_chart"), config={"displaylogo": False})
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.button(
                "Add margin_sampling to Compare", key=PPL("margin_add"), icon=":material/add:", on_click=_add,
                args=(mconfig,), help=mconfig.label,
            )
            export_buttons(export_stem(doc.source, "margin", mchunking), None, mchunking, prefix=PPL("margin"))
        document_view(doc, mchunking, PPL("margin_page"), PPL("margin_view"), height=420)
elif n <= 1:
    st.caption("One sentence: nothing to decide.")
