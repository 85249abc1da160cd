"""Quality page: MoC's chunk-quality metrics (Boundary Clarity, Chunk Stickiness, dissimilarity) per configuration.

The language model scores each configuration's chunk pairs once (a background job, or the
output cache); the embedder embeds its chunks for DS. Every control below — K, the CS
rule, the BC mode, δ, the graph — recomputes from those scores in session state, with no
model call.
"""

import streamlit as st

from backend.chunkers.run import chunk_all, needs_model
from backend.errors import NotCached
from backend.lab.jobs import JobPlan
from backend.metrics.cost import (
    CONFIRM_SECONDS,
    DEFAULT_METRICS,
    DEFAULT_PAIR_WINDOW,
    Throughput,
    cost_estimate,
    cost_label,
    format_seconds,
    needs_confirmation,
)
from backend.metrics.quality import BC_MODES, CS_RULES, DEFAULT_K
from backend.metrics.report import QualityData, QualitySettings, model_needs, table_csv, table_rows
from backend.metrics.scores import cached_pair_table, cached_vectors, score_chunkings, table_key, vectors_key
from backend.models.cache import default_cache
from components.cached import chunk_document
from backend.figures.charts import config_color
from backend.figures.export import figure_html, png_export_available
from backend.figures.quality import bc_figure, cs_k_figure, stickiness_figure
from components.keys import QUALITY, QUALITY_STORE, QUALITY_THROUGHPUT
from components.layout import ensure_routed
from components.lm_runs import (
    model_chunking,
    model_job_panel,
    pending_runs_panel,
    session_models,
)
from components.match import match_lengths_panel
from components.quality import (
    column_config,
    csv_file_name,
    embedder_identity,
    embedder_loader,
    quality_frame,
    styled_table,
)
from components.state import require_configurations, require_document
from components.views import grid

ensure_routed()

_STORE = QUALITY_STORE  # {table_key or vectors_key: PairTable or vectors} of the current document
_TPS = QUALITY_THROUGHPUT  # the Throughput measured on this session's last scoring job
_JOB = QUALITY("job")
METRIC_LABELS = {"bc": "BC — boundary clarity", "cs": "CS — chunk stickiness", "ds": "DS — dissimilarity"}
K_GRID = [round(0.05 * i, 2) for i in range(31)]  # 0 … 1.5, the K slider's range
GRAPHS_PER_ROW = 3



st.title("Quality")
st.caption(
    "MoC's chunk-quality metrics (Zhao et al., 2025) for every configuration of the Compare page. "
    "**BC** (boundary clarity, higher = clearer): how little chunk i helps the model predict chunk i+1. "
    "**CS** (chunk stickiness, lower = better): the structural entropy of the graph linking chunks that predict "
    "each other, on the complete graph and on the sequence-aware incomplete one. **DS** (dissimilarity): "
    "1 − cosine of adjacent chunks' embeddings. Compare configurations at equal mean chunk length (below)."
)
doc = require_document()
entries = require_configurations()

with st.expander("Match lengths", icon=":material/straighten:"):
    st.caption(
        "Both papers compare chunkers only at the same mean chunk length: tune each configuration's size or "
        "threshold until its mean length is within ±5 % of a target."
    )
    match_lengths_panel(doc, entries, QUALITY)

# --- what to compute -----------------------------------------------------------------------------------
cols = st.columns([3, 1.2], vertical_alignment="bottom")
metrics = cols[0].multiselect(
    "Metrics", list(METRIC_LABELS), default=list(DEFAULT_METRICS), format_func=METRIC_LABELS.get,
    key=QUALITY("metrics"), persist_state="session",
    help="BC needs the adjacent pairs only; CS needs every ordered pair (n² model passes: hours on a CPU without "
    "a pair window); DS needs the embedder. BC and DS by default: minutes on a CPU.",
)
w = int(
    cols[1].number_input(
        "Pair window w (0 = all pairs)", min_value=0, max_value=10_000, value=DEFAULT_PAIR_WINDOW, step=1,
        key=QUALITY("window"),
        persist_state="session", disabled="cs" not in metrics,
        help="An approximation for the CPU: score only the pairs with |i − j| ≤ w; pairs further apart count as "
        f"not sticky (no edge). 0 scores every pair, as the paper does (n² passes). {DEFAULT_PAIR_WINDOW} by default.",
    )
)
if not metrics:
    st.info("Pick at least one metric.", icon=":material/info:")
    st.stop()
window = w or None
needs = model_needs(metrics)
complete, needs_scorer, needs_embedder = needs.complete, needs.scorer, needs.embedder

# Model-backed chunkers (language model, embedder or chat model) never run inline, as on Compare.
lm = session_models() if needs_scorer or any(needs_model(e.config) for e in entries) else None
if lm is not None:
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.caption("Language model:")
        st.text(lm.label)  # a model name is user or server input: plain text
        st.page_link(
            "pages/models.py", label="Choose another" if not lm.default else "Choose one", icon=":material/memory:"
        )
    if lm.error:
        st.error(lm.error, icon=":material/error:")
        st.stop()

# --- the chunkings (model-backed ones from the cache, else a background job) ---------------------------
outcomes = chunk_all(
    doc, [e.config for e in entries], lambda d, c: chunk_document(d, d.id, c),
    with_model=lambda d, c: model_chunking(d, c, lm, QUALITY),
)
ok, pending = [], []
for e, outcome in zip(entries, outcomes):
    if outcome.state == "done":
        ok.append((e, outcome.chunking))
    elif outcome.state == "pending":
        pending.append(e)
    else:
        st.error(f"{e.tag}: {outcome.error}", icon=":material/error:")
if pending:
    pending_runs_panel(doc, lm, [e.config for e in pending], QUALITY)
if not ok:
    st.stop()

# --- the scores: session state, else the output cache alone, else a background job ----------------------
store = st.session_state.get(_STORE)
if store is None or store.get("doc") != doc.id:
    store = st.session_state[_STORE] = {"doc": doc.id}
cache = default_cache()
emb_fp, emb_name = embedder_identity() if needs_embedder else (None, "")
_lookup = lm.cache_only() if needs_scorer else None
refusing = _lookup.scorer if _lookup is not None else None  # a stand-in that raises NotCached on any model call


def _table_key(chunking):
    """The store's key of ``chunking``'s pair table under this run's model, graph and window."""
    return table_key(chunking, lm.identity if lm else None, complete=complete, window=window)


def _vectors_key(chunking):
    """The store's key of ``chunking``'s embeddings by this run's embedder."""
    return vectors_key(chunking, emb_fp)


missing = []  # (entry, chunking) whose scores or vectors are not known yet
for e, ch in ok:
    texts = [c.text for c in ch.chunks]
    if needs_scorer and _table_key(ch) not in store:
        if refusing is not None:
            try:
                store[_table_key(ch)] = cached_pair_table(
                    texts, refusing, complete=complete, window=window, cache=cache
                )
            except NotCached:
                pass
    if needs_embedder and emb_fp is not None and _vectors_key(ch) not in store:
        hit = cached_vectors(cache, emb_fp, texts)
        if hit is not None:
            store[_vectors_key(ch)] = hit
    if (needs_scorer and _table_key(ch) not in store) or (needs_embedder and _vectors_key(ch) not in store):
        missing.append((e, ch))

if missing:
    speed = st.session_state.get(_TPS, Throughput())
    to_score = [ch for _e, ch in missing if needs_scorer and _table_key(ch) not in store]
    cost = cost_estimate(
        [ch.token_counts for ch in to_score], complete=complete, window=window, tokens_per_s=speed.tokens_per_s,
        chunk_texts=[[c.text for c in ch.chunks] for ch in to_score],  # the pairs the job counts
    )
    tags = ", ".join(e.tag for e, _ in missing)
    if to_score:
        measured = "measured on your last run" if speed.measured else "a rough CPU figure"
        st.info(
            f"Scoring {tags} costs **{cost['pairs']:,}** pairs over about **{cost['tokens']:,}** tokens: "
            f"≈ {format_seconds(cost['seconds'])} at {speed.tokens_per_s:,.0f} tokens/s ({measured}). "
            + ("A pair window w cuts the cost of CS. " if complete and not window and cost["seconds"] > 60 else "")
            + ("Embedding the chunks for DS takes seconds." if needs_embedder else ""),
            icon=":material/schedule:",
        )
    else:
        st.info(f"{tags}: the chunks need embedding for DS ({emb_name}); it takes seconds.", icon=":material/schedule:")
    # The job covers every configuration (cached ones are read back at once), so its signature does not
    # change while it runs and fills the cache configuration by configuration.
    signature = (
        "quality", doc.id, lm.identity if lm else None, emb_fp, tuple(e.config for e, _ in ok), complete, window,
        tuple(sorted(metrics)),
    )
    load_embedder = embedder_loader() if needs_embedder else None
    chunkings = [ch for _, ch in ok]
    n_tok = cost["tokens"]

    def run(scorer, progress, c=chunkings, emb=load_embedder, cmp=complete, win=window, oc=cache):
        # Called once the model has loaded: the run's seconds are the scoring's own.
        return score_chunkings(c, scorer=scorer, embedder=emb, complete=cmp, window=win, cache=oc, progress=progress)

    title = f"Scoring {len(chunkings)} configuration{'s' if len(chunkings) != 1 else ''}"
    plan = JobPlan(f"{title} with {lm.name}" if needs_scorer else title, signature, run,
                   models=lm if needs_scorer else None)

    label = f"Score with {lm.name}: {cost_label(cost)}" if to_score else "Embed the chunks"
    long_run = to_score and needs_confirmation(cost["seconds"])
    confirm = (
        f"Yes, run for ≈ {format_seconds(cost['seconds'])} (over {format_seconds(CONFIRM_SECONDS)} at this speed)"
        if long_run else None
    )
    job = model_job_panel(
        _JOB, plan, run_label=label, run_key=QUALITY("run"), cancel_key=QUALITY("cancel"), auto=False,
        what="Scoring", confirm=confirm, confirm_key=QUALITY("confirm"),
    )
    if job is not None:
        scored = job.result
        for (_e, ch), (table, vectors) in zip(ok, scored.results):
            if table is not None:
                store[_table_key(ch)] = table
            if vectors is not None:
                store[_vectors_key(ch)] = vectors
        st.session_state[_TPS] = speed.after_run(n_tok, scored.seconds)
        st.session_state.pop(_JOB, None)
        st.rerun()

waiting = {e.uid for e, _ in missing}
datas = [
    QualityData(
        e.tag, e.config, ch,
        table=store.get(_table_key(ch)) if needs_scorer else None,
        vectors=store.get(_vectors_key(ch)) if needs_embedder else None,
    )
    for e, ch in ok
    if e.uid not in waiting
]
colors = [config_color(e.uid) for e, _ in ok if e.uid not in waiting]
uids = [e.uid for e, _ in ok if e.uid not in waiting]
if not datas:
    st.stop()

# --- controls: recompute from the scores, no model call ----------------------------------------------
cols = st.columns([2.2, 1.2, 1.2, 1], vertical_alignment="bottom")
K = cols[0].slider(
    "K", min_value=0.0, max_value=1.5, value=DEFAULT_K, step=0.01, key="qual_K", persist_state="session",
    disabled="cs" not in metrics,
    help="CS keeps an edge between two chunks when its value is above K. Larger K: fewer edges, lower CS.",
)
cs_rule = cols[1].segmented_control(
    "CS rule", list(CS_RULES), default="paper", required=True, key=QUALITY("cs_rule"), persist_state="session",
    disabled="cs" not in metrics,
    help="paper (eq. 2): edge = (ppl(q) − ppl(q|d)) / ppl(q) > K. reference (the authors' code): "
    "ppl(q|d) / ppl(q) > K.",
)
bc_mode = cols[2].segmented_control(
    "BC mode", list(BC_MODES), default="reference", required=True, key=QUALITY("bc_mode"), persist_state="session",
    disabled="bc" not in metrics,
    help="reference (the authors' code, their published table): mean NLL of q given d ÷ mean NLL of q. "
    "paper (eq. 1): ppl(q|d) ÷ ppl(q).",
)
delta = int(
    cols[3].number_input(
        "δ", min_value=0, max_value=1_000, value=0, step=1, key=QUALITY("delta"), persist_state="session",
        disabled="cs" not in metrics,
        help="The incomplete graph keeps only edges from chunk i to chunk j with j − i > δ.",
    )
)

# --- the table (MoC Table 3): the rows the CLI's `metrics` prints -----------------------------------------
st.subheader("Metrics", anchor=False)
settings = QualitySettings(K=K, bc_mode=bc_mode, cs_rule=cs_rule, delta=delta, window=window)
rows = table_rows(datas, metrics=metrics, settings=settings)
table = quality_frame(rows)
st.dataframe(styled_table(table), key=QUALITY("table"), column_config=column_config())
notes = [f"best value per column in green; K = {K:.2f}, CS rule {cs_rule}, BC mode {bc_mode}, δ = {delta}"]
if window and complete:
    notes.append(f"pair window w = {window}: pairs further apart are not scored and count as no edge")
if needs_embedder:
    notes.append(f"DS with {emb_name}; the paper finds DS does not follow QA quality — it is shown for context")
means = table["mean_tokens"]
if len(means) > 1 and means.max() > 1.1 * means.min():
    notes.append("mean lengths differ by more than 10 %: match lengths (above) for a fair comparison")
st.caption("Best " + " · ".join(notes)[len("best ") :])
st.download_button(
    "CSV", lambda: table_csv(rows, settings),
    file_name=csv_file_name(doc.source, settings), mime="text/csv", key=QUALITY("csv"), icon=":material/download:",
    on_click="ignore",
)

# --- BC along the document ---------------------------------------------------------------------------------
if "bc" in metrics:
    st.subheader("Boundary clarity along the document", anchor=False)
    st.caption("One point per boundary, at the character where the next chunk starts; hover for the two chunks' edges.")
    st.plotly_chart(bc_figure(datas, colors, bc_mode=bc_mode), key=QUALITY("bc_chart"), config={"displaylogo": False})

# --- CS against K and the stickiness graphs -------------------------------------------------------------------
if "cs" in metrics:
    st.subheader("Chunk stickiness against K", anchor=False)
    st.caption("MoC's Table 4, live: complete graph solid, incomplete graph dashed; the dotted line is the current K.")
    st.plotly_chart(
        cs_k_figure(datas, colors, K_GRID, K, rule=cs_rule, delta=delta), key=QUALITY("cs_k"), config={"displaylogo": False}
    )
    head, graph_col = st.columns([3, 1.2], vertical_alignment="bottom")
    head.subheader("Stickiness graphs", anchor=False)
    graph = graph_col.segmented_control(
        "Graph", ["complete", "incomplete"], default="complete", required=True, key=QUALITY("graph"),
        persist_state="session",
    )
    if st.toggle("Show the graphs", value=True, key=QUALITY("show_graphs"), persist_state="session"):
        png = png_export_available()
        st.caption(
            "Chunks in document order, sized by degree; an arc above the line links chunk i to a later chunk it "
            "makes easier to predict, one below to an earlier one. Hover a chunk for its text. "
            + ("" if png else "PNG export needs the kaleido package (not installed): HTML only.")
        )
        for col, (d, color, uid) in grid(list(zip(datas, colors, uids)), GRAPHS_PER_ROW):
            with col:
                fig = stickiness_figure(d, K, color, rule=cs_rule, graph=graph, delta=delta)
                st.plotly_chart(fig, key=QUALITY(f"graph_{uid}"), config={"displaylogo": False})
                with st.container(horizontal=True, gap="small"):
                    st.download_button(
                        "HTML", lambda f=fig: figure_html(f), file_name=f"stickiness-{d.tag}-{graph}.html",
                        mime="text/html", key=QUALITY(f"graph_html_{uid}"), icon=":material/download:", on_click="ignore",
                    )
                    if png:
                        st.download_button(
                            "PNG", lambda f=fig: f.to_image(format="png"), file_name=f"stickiness-{d.tag}-{graph}.png",
                            mime="image/png", key=QUALITY(f"graph_png_{uid}"), icon=":material/download:",
                            on_click="ignore",
                        )
