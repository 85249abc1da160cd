"""Compare page: several chunker configurations on the current document, side by side."""

import pandas as pd
import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.charts import config_color
from backend.figures.text import STYLE
from backend.lab.compare import chunk_entries, compare_view, focus_on, needs_models
from backend.lab.retrieval import units_caption
from components.cached import chunk_document, specs, stats_rows
from components.config_form import add_config_form
from components.curves import curves_section, partial_curve_preview
from components.keys import COMPARE
from components.layout import ensure_routed
from components.lm_runs import model_chunking, pending_runs_panel, session_models, waiting_note
from components.match import match_lengths_panel
from components.settings import prepare, spec
from components.state import add_configuration, configurations, normalized_config, require_document
from components.views import chunk_inspector, config_card, config_title, grid, undo_remove_bar

ensure_routed()

MAX_PER_ROW = 4
_PAGE = COMPARE("page")  # the side-by-side window's page (1-based); the pagination widget follows it
_PAGER = COMPARE("pager")  # the pagination widget's key is _PAGER + its generation, see _set_page
_WINDOW = prepare("compare", "window_chars")
_WINDOW_START = COMPARE("window_start")
_FOCUS = COMPARE("pending_focus")
_STRIP = COMPARE("strip")


def _sel_key(uid: int) -> str:
    return COMPARE(f"sel_{uid}")



def _set_page(page: int) -> None:
    """Move the window to ``page`` from code (strip click, window size, a new document).

    A pagination widget has a default, so writing its value through Session State makes Streamlit
    log a warning; instead the page is this session key and the move starts a new widget there.
    """
    if st.session_state.get(_PAGE) != page:  # else the widget already shows it
        st.session_state[_PAGE] = page
        st.session_state[_PAGER] = st.session_state.get(_PAGER, 0) + 1


def _on_page(key: str) -> None:
    """The user paged: keep the page."""
    st.session_state[_PAGE] = st.session_state[key]


def _on_window_change() -> None:
    """Keep the first visible character in view when the window size changes."""
    start = st.session_state.get(_WINDOW_START, 0)
    _set_page(start // st.session_state[_WINDOW] + 1)


def _on_strip_select() -> None:
    """A click on the boundary strip: remember which chunk, applied once chunkings are known."""
    points = st.session_state[_STRIP].selection.points
    if points and points[0].get("customdata"):
        tag, index = points[0]["customdata"][0], int(points[0]["customdata"][1])
        st.session_state[_FOCUS] = (tag, index)


def _apply_focus(columns: list, window: int) -> None:
    """Select the clicked chunk, the chunks at the same offset in the other rows, and its window."""
    tag, index = st.session_state.pop(_FOCUS)
    focus = focus_on(columns, tag, index, window)
    if focus is None:
        return
    for uid, chunk in focus.selected.items():
        st.session_state[_sel_key(uid)] = chunk
    _set_page(focus.page)


def _sidebar() -> None:
    """The configuration list and the generated "Add configuration" form."""
    with st.sidebar:
        st.subheader("Add a configuration", anchor=False)
        submitted = add_config_form(specs(), prefix=COMPARE("new"))
        if submitted is not None:
            name, params, tokenizer = submitted
            try:
                with st.spinner("Checking the parameters…"):
                    entry = add_configuration(normalized_config(name, params, tokenizer))
            except ChunkLabError as e:
                st.error(one_line(str(e)), icon=":material/error:")
            else:
                st.toast(f"Added {entry.tag}: {entry.config.label}", icon=":material/check:")


st.html(STYLE)
_sidebar()
entries = configurations()

st.title("Compare chunkers")
doc = require_document()

st.caption(
    f"{len(doc.text):,} characters · {len(entries)} configuration(s). "
    "Add configurations in the sidebar; the same chunker can appear several times with different parameters."
)
undo_remove_bar()
if not entries:
    st.info("No configurations yet: add one with the form in the sidebar.", icon=":material/info:")
    st.stop()

# A new document starts at its first window, with no chunk selected.
if st.session_state.get(COMPARE("doc_id")) != doc.id:
    st.session_state[COMPARE("doc_id")] = doc.id
    _set_page(1)  # back to the first window
    for e in entries:
        st.session_state.pop(_sel_key(e.uid), None)

# Model-backed configurations never run inline: from the cache, else in a background job (below).
lm = session_models() if needs_models(entries) else None


def _chunk(d, config):
    """A configuration that needs no model: chunked here, cached per document and configuration."""
    with st.spinner(f"Chunking with {config.label}…", show_time=True):
        return chunk_document(d, d.id, config)


def _with_model(d, config):
    """A model-backed configuration: this page's model runs or the output cache, never a model call."""
    if lm.error:
        raise ChunkLabError(lm.error)
    return model_chunking(d, config, lm, COMPARE)


columns = chunk_entries(doc, entries, _chunk, _with_model)
window = st.session_state[_WINDOW]
if _FOCUS in st.session_state:
    _apply_focus(columns, window)
view = compare_view(doc, columns, window, st.session_state.get(_PAGE, 1))
if st.session_state.get(_PAGE, 1) != view.window.page:
    _set_page(view.window.page)  # the text got shorter (another document, a larger window)
selected = view.clip({e.uid: st.session_state.get(_sel_key(e.uid), 0) for e in entries})
for uid, index in selected.items():
    if st.session_state.get(_sel_key(uid), 0) != index:  # a chunking got shorter: back inside it
        st.session_state[_sel_key(uid)] = index
chunked = view.ready  # (entry, chunking) of the configurations that have chunks

# --- configuration cards: what each column is, with downloads and remove ----------------------
waiting = view.pending
if waiting:
    configs = [e.config for e in waiting]
    pending_runs_panel(doc, lm, configs, COMPARE, partial_curve_preview(doc, lm, configs, COMPARE))
for col, column in grid(columns, MAX_PER_ROW):
    e = column.entry
    with col:
        note, retry = waiting_note(doc, lm, e.config, COMPARE) if column.pending else (None, None)
        config_card(
            e, column.chunking, column.error, doc.source, config_color(e.uid), note=note, on_retry=retry, doc=doc
        )
        units = units_caption(e.config)  # a retriever: the chunks shown are its finest units
        if units:
            st.caption(units)

# --- match lengths: tune every configuration to one mean chunk length (components/match.py) --------
with st.expander("Match lengths", icon=":material/straighten:"):
    st.caption("Compare chunkers at the same mean chunk length: tune each one's size or threshold to a target.")
    match_lengths_panel(doc, entries, COMPARE)

if not chunked:
    st.stop()

# --- summary statistics ----------------------------------------------------------------------
st.subheader("Summary", anchor=False)
rows = stats_rows(doc, tuple(ch for _, ch in chunked), tuple((doc.id, e.config) for e, _ in chunked))
st.dataframe(
    pd.DataFrame(rows, index=[e.tag for e, _ in chunked]),
    key=COMPARE("stats"),
    column_config={
        "_index": st.column_config.TextColumn("", width=40),
        "chunker": st.column_config.TextColumn("Chunker", help="Full parameters on the cards above"),
        "chunks": st.column_config.NumberColumn("Chunks", format="%d"),
        "mean_tokens": st.column_config.NumberColumn("Mean tokens", format="%.1f"),
        "median_tokens": st.column_config.NumberColumn("Median", format="%.1f"),
        "min_tokens": st.column_config.NumberColumn("Min", format="%d"),
        "max_tokens": st.column_config.NumberColumn("Max", format="%d"),
        "std_tokens": st.column_config.NumberColumn("Std", format="%.1f"),
        "mean_chars": st.column_config.NumberColumn("Mean chars", format="%.0f"),
        "overlap_pct": st.column_config.NumberColumn(
            "Overlap %", format="%.1f", help="Share of the document's characters inside two or more chunks"
        ),
        "time": st.column_config.TextColumn(
            "Time", help="Model work (scoring, embedding; from the output cache or computed now) plus cutting"
        ),
        "time_ms": None,  # in "time", with which part is the model's
        "cut_ms": None,
        "model_s": None,
        "report": st.column_config.TextColumn("Run report", help="What the chunker reported, e.g. content loss"),
    },
)

# --- boundary strip --------------------------------------------------------------------------
shown = view.window
st.session_state[_WINDOW_START] = shown.start

head, switch = st.columns([5, 1], vertical_alignment="bottom")
head.subheader("Chunk boundaries", anchor=False)
show_strip = switch.toggle(
    "Show strip",
    key=prepare("compare", "show_strip"),
    persist_state="session",
    help=f"{view.total_chunks:,} chunks in all; with tens of thousands the browser needs a few seconds to draw them.",
)
if show_strip:
    st.caption(
        "Each bar is a chunk (even chunks above the line, odd ones below, so overlaps show). "
        "Hover for details, drag to zoom, double-click to reset, click a chunk to open it below. "
        "The dotted band is the part of the text shown side by side."
    )
    st.plotly_chart(
        view.strip(selected),
        key=_STRIP,
        on_select=_on_strip_select,
        selection_mode="points",
        config={"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]},
    )

# --- side-by-side text -----------------------------------------------------------------------
st.subheader("Side by side", anchor=False)
nav, size = st.columns([5, 1], vertical_alignment="center")
with nav:
    pager = COMPARE(f"pager_{st.session_state.get(_PAGER, 0)}")
    st.pagination(shown.pages, default=shown.page, key=pager, on_change=_on_page, args=(pager,), max_visible_pages=11)
with size:
    st.selectbox(
        "Characters per page",
        spec("compare", "window_chars").choices,
        format_func=lambda n: f"{n // 1000}k characters",
        key=_WINDOW,
        on_change=_on_window_change,
        persist_state="session",
        label_visibility="collapsed",
    )
st.caption(shown.caption(len(doc.text)))
st.html(view.legend())

for col, (e, ch) in grid(chunked, MAX_PER_ROW):
    with col:
        config_title(e, config_color(e.uid))
        with st.container(height=600, border=True, key=COMPARE(f"view_{e.uid}")):
            st.html(view.text_html(ch, selected.get(e.uid)))

# --- chunk inspector ---------------------------------------------------------------------------
st.subheader("Chunk inspector", anchor=False)
st.caption("Pick a chunk per configuration (or click one on the strip) to read it with its neighbours.")
for col, (e, ch) in grid(chunked, MAX_PER_ROW):
    with col:
        chunk_inspector(e, ch, doc.text, _sel_key(e.uid))

# --- chunk-size distribution -------------------------------------------------------------------
st.subheader("Chunk sizes", anchor=False)
unit = st.segmented_control(
    "Measure sizes in", spec("compare", "hist_unit").choices, required=True,
    key=prepare("compare", "hist_unit"), persist_state="session",
)
st.plotly_chart(
    view.histogram(unit),
    key=COMPARE("hist"),
    config={"displaylogo": False},
)

# --- curves: what each chunker with a curve (registry: has_curve) cut on; components/curves.py ----------
curves_section(doc, columns, lm, config_color, COMPARE)
