"""Quality page: MoC's chunk-quality metrics (Boundary Clarity, Chunk Stickiness, dissimilarity) per configuration.

The language model scores each configuration's chunk pairs once (a background job, or the
output cache); the embedder embeds its chunks for DS. Every control below — K, the CS
rule, the BC mode, δ, the graph — recomputes from those scores in session state, with no
model call. What is known, missing and its cost is :func:`backend.lab.quality.plan_quality`.
"""

import streamlit as st

from backend.figures.export import figure_html, png_export_available
from backend.figures.quality import bc_figure, cs_k_figure, stickiness_figure
from backend.lab.quality import needs_models, plan_quality, quality_settings, quality_view
from backend.lab.settings import K_GRID
from components.keys import QUALITY
from components.layout import ensure_routed
from components.lm_runs import page_chunkings, session_models
from components.match import match_lengths_panel
from components.quality import (
    METRIC_LABELS,
    PLACEHOLDER,
    column_config,
    estimates_preview,
    estimates_table,
    quality_frame,
    quality_store,
    scoring_job_panel,
    session_throughput,
    styled_table,
)
from components.settings import prepare, section_values, spec
from components.state import require_configurations, require_document
from components.views import grid

ensure_routed()

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
s_metrics = spec("quality", "metrics")
metrics = cols[0].multiselect(
    "Metrics", list(s_metrics.choices), format_func=METRIC_LABELS.get, key=prepare("quality", "metrics"),
    persist_state="session", help=s_metrics.help,
)
s_window = spec("quality", "window")
window = cols[1].number_input(
    "Pair window w (0 = all pairs)", min_value=s_window.low, max_value=s_window.high, step=s_window.step,
    key=prepare("quality", "window"), persist_state="session", disabled="cs" not in metrics, help=s_window.help,
)
if not metrics:
    st.info("Pick at least one metric.", icon=":material/info:")
    st.stop()

# Model-backed chunkers (language model, embedder or chat model) never run inline, as on Compare.
lm = session_models()
if needs_models(metrics, [e.config for e in entries]):
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
chunked, pending = page_chunkings(doc, entries, lm, QUALITY)
if not chunked:
    st.stop()

# --- the scores: session state, else the output cache alone, else a background job ----------------------
store = quality_store(doc)
plan = plan_quality(
    doc, chunked, lm, metrics=metrics, window=window, store=store, throughput=session_throughput(),
    settings=quality_settings(section_values("quality")),
)
store.update(plan.found)
scoring = False
if plan.missing:
    st.info(plan.cost_note, icon=":material/schedule:")
    # While the job runs, its estimates so far (± their 95% intervals) are the table, under its bar, every second.
    scoring = scoring_job_panel(
        plan, store, job_key=QUALITY("job"), run_key=QUALITY("run"), cancel_key=QUALITY("cancel"),
        confirm_key=QUALITY("confirm"), run_label=plan.run_label,
        preview=estimates_preview(plan, quality_settings(section_values("quality")), doc.source, QUALITY("estimates")),
    )
if not plan.ready and not scoring and not any(c.estimated for c in plan.configs):
    st.stop()  # nothing known yet (a stopped run's sample would give estimates)

# --- controls: recompute from the scores, no model call ----------------------------------------------
cols = st.columns([2.2, 1.2, 1.2, 1], vertical_alignment="bottom")
s_K, s_rule, s_mode, s_delta = (spec("quality", n) for n in ("K", "cs_rule", "bc_mode", "delta"))
cols[0].slider(
    "K", min_value=s_K.low, max_value=s_K.high, step=s_K.step, key=prepare("quality", "K"), persist_state="session",
    disabled="cs" not in metrics, help=s_K.help,
)
cols[1].segmented_control(
    "CS rule", list(s_rule.choices), required=True, key=prepare("quality", "cs_rule"), persist_state="session",
    disabled="cs" not in metrics, help=s_rule.help,
)
cols[2].segmented_control(
    "BC mode", list(s_mode.choices), required=True, key=prepare("quality", "bc_mode"), persist_state="session",
    disabled="bc" not in metrics, help=s_mode.help,
)
cols[3].number_input(
    "δ", min_value=s_delta.low, max_value=s_delta.high, step=s_delta.step, key=prepare("quality", "delta"),
    persist_state="session", disabled="cs" not in metrics, help=s_delta.help,
)

if scoring:
    st.stop()  # the table is the job's estimates above; the figures need every pair, so they wait for its end

# --- the table (MoC Table 3): the rows the CLI's `metrics` prints -----------------------------------------
st.subheader("Metrics", anchor=False)
view = quality_view(plan, quality_settings(section_values("quality")), doc.source)
settings = view.settings
if view.estimated:  # what a stopped run scored: estimates with their intervals, the best marked only when apart
    estimates_table(view, QUALITY("table"), running=False)
else:
    table = quality_frame(view.rows)
    st.dataframe(styled_table(table), key=QUALITY("table"), column_config=column_config(table), placeholder=PLACEHOLDER)
    st.caption(view.notes)
st.download_button(
    "CSV", view.csv, file_name=view.csv_name, mime="text/csv", key=QUALITY("csv"), icon=":material/download:",
    on_click="ignore",
)

# --- BC along the document ---------------------------------------------------------------------------------
if not view.data:
    st.stop()  # the figures need every pair of a configuration
if "bc" in metrics:
    st.subheader("Boundary clarity along the document", anchor=False)
    st.caption("One point per boundary, at the character where the next chunk starts; hover for the two chunks' edges.")
    st.plotly_chart(
        bc_figure(view.data, view.colors, bc_mode=settings.bc_mode), key=QUALITY("bc_chart"),
        config={"displaylogo": False},
    )

# --- CS against K and the stickiness graphs -------------------------------------------------------------------
if "cs" in metrics:
    st.subheader("Chunk stickiness against K", anchor=False)
    st.caption("MoC's Table 4, live: complete graph solid, incomplete graph dashed; the dotted line is the current K.")
    st.plotly_chart(
        cs_k_figure(view.data, view.colors, K_GRID, settings.K, rule=settings.cs_rule, delta=settings.delta),
        key=QUALITY("cs_k"), config={"displaylogo": False},
    )
    head, graph_col = st.columns([3, 1.2], vertical_alignment="bottom")
    head.subheader("Stickiness graphs", anchor=False)
    s_graph, s_show = spec("quality", "graph"), spec("quality", "show_graphs")
    graph = graph_col.segmented_control(
        "Graph", list(s_graph.choices), required=True, key=prepare("quality", "graph"), persist_state="session",
        help=s_graph.help,
    )
    if st.toggle("Show the graphs", key=prepare("quality", "show_graphs"), persist_state="session", help=s_show.help):
        png = png_export_available()
        st.caption(
            "Chunks in document order, sized by degree; an arc above the line links chunk i to a later chunk it "
            "makes easier to predict, one below to an earlier one. Hover a chunk for its text. "
            + ("" if png else "PNG export needs the kaleido package (not installed): HTML only.")
        )
        for col, (e, d, color) in grid(list(zip(view.entries, view.data, view.colors)), GRAPHS_PER_ROW):
            with col:
                fig = stickiness_figure(d, settings.K, color, rule=settings.cs_rule, graph=graph, delta=settings.delta)
                st.plotly_chart(fig, key=QUALITY(f"graph_{e.uid}"), config={"displaylogo": False})
                with st.container(horizontal=True, gap="small"):
                    st.download_button(
                        "HTML", lambda f=fig: figure_html(f), file_name=f"stickiness-{d.tag}-{graph}.html",
                        mime="text/html", key=QUALITY(f"graph_html_{e.uid}"), icon=":material/download:", on_click="ignore",
                    )
                    if png:
                        st.download_button(
                            "PNG", lambda f=fig: f.to_image(format="png"), file_name=f"stickiness-{d.tag}-{graph}.png",
                            mime="image/png", key=QUALITY(f"graph_png_{e.uid}"), icon=":material/download:",
                            on_click="ignore",
                        )
