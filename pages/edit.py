"""Edit page: fix a chunking by hand — click to cut, undo and redo, the perplexity curve beside the text.

An edited copy is a configuration of its own (the ``manual`` chunker: a base configuration and
an edit list), made by "Edit a copy" on a Compare card or on the Meta-Chunking page. The page
shows one window of the text at a time (about 6k characters, never the whole document) with the
cuts drawn between sentences: a click between two sentences (or on a sentence) cuts before it,
a click on a cut removes it, the selected cut moves with ◀ ▶. Every action is one call into
:mod:`backend.lab.edit_view`; the editor is a fragment, so a click reruns only the editor and the
metrics below it.
"""

from functools import partial

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.text import STYLE
from backend.lab.edit_view import edit_base, edit_chunking, edited_copies, editor_view, open_copy, page_of, sentence_start
from components.cached import chunk_document
from components.edit import MESSAGE, NOTE, apply_edit, edit_copy_button, edit_text
from components.edit_metrics import edit_metrics_panel
from components.keys import EDIT, EDIT_OPEN, EDIT_STATES
from components.layout import ensure_routed
from components.lm_runs import model_chunking, pending_runs_panel, session_models
from components.quality import quality_store
from components.settings import get
from components.state import configurations, require_document, update_configuration
from components.views import download_buttons

ensure_routed()

_PICK = EDIT("pick")  # the edited copy shown (a selectbox; EDIT_OPEN follows it)
_FROM = EDIT("from")  # the quick form's configuration to copy
_PAGE = EDIT("page")  # the text window's page (1-based); the pagination widget follows it
_PAGER = EDIT("pager")  # the pagination widget's generation (a move from code starts a new widget there)
_TEXT = EDIT("text")  # the clickable text component
_CURVE = EDIT("curve")
_MINIMA = EDIT("minima")
_SENTENCE = EDIT("sentence")
_CUT = EDIT("cut")  # the selected cut (selectbox), per edited copy: _CUT + uid
_VALUE = "nll"


def _cut_key(uid: int) -> str:
    return f"{_CUT}_{uid}"


def _set_page(page: int) -> None:
    """Move the window to ``page`` from code (a cut made or selected on another page of the text)."""
    if st.session_state.get(_PAGE) != page:
        st.session_state[_PAGE] = page
        st.session_state[_PAGER] = st.session_state.get(_PAGER, 0) + 1


def _on_page(key: str) -> None:
    st.session_state[_PAGE] = st.session_state[key]


def _on_pick() -> None:
    st.session_state[EDIT_OPEN] = st.session_state[_PICK]
    _set_page(1)


def _follow(doc, uid: int) -> None:
    """Show the window of the selected cut (after an edit made from the widgets or the curve)."""
    cut = st.session_state.get(_cut_key(uid))
    if isinstance(cut, int):
        _set_page(page_of(doc, int(cut)))


def _on_pick_cut(doc, uid: int, picker: str) -> None:
    """A cut picked in the selectbox: select it (its move buttons) and show its window."""
    st.session_state[_cut_key(uid)] = st.session_state[picker]
    _follow(doc, uid)


def _act(uid: int, doc, spans: tuple, action: str, offset: int | None, step: int = 0, follow=False) -> None:
    """A widget's action on the edited copy ``uid`` (one call: :func:`components.edit.apply_edit`)."""
    if offset is None:
        return
    apply_edit(uid, doc, spans, action, int(offset), step, select_key=_cut_key(uid))
    if follow:
        _follow(doc, uid)


def _on_text_click(uid: int, doc, spans: tuple) -> None:
    """A click in the text: ``{action, offset, step}`` from the component."""
    click = st.session_state[_TEXT]["click"]
    if isinstance(click, dict) and click.get("offset") is not None:
        apply_edit(uid, doc, spans, str(click.get("action", "toggle")), int(click["offset"]),
                   int(click.get("step") or 0), select_key=_cut_key(uid))


def _on_curve_click(uid: int, doc, spans: tuple) -> None:
    """A click on a point of the curve: a cut before that sentence (or none, when it is one)."""
    points = st.session_state[_CURVE].selection.points
    if points and points[0].get("customdata"):
        apply_edit(uid, doc, spans, "toggle", int(points[0]["customdata"][0]), select_key=_cut_key(uid))


def _on_add_sentence(uid: int, doc, spans: tuple) -> None:
    try:
        offset = sentence_start(doc, int(st.session_state[_SENTENCE]))
    except ChunkLabError as e:
        st.session_state.setdefault(MESSAGE, {})[uid] = one_line(str(e))
        return
    _act(uid, doc, spans, "add", offset, follow=True)


def _step(uid: int, forward: bool) -> None:
    """Undo (``forward`` False) or redo one edit."""
    states = st.session_state[EDIT_STATES]
    state = states[uid]
    new = state.redo() if forward else state.undo()
    states[uid] = new
    update_configuration(uid, new.config)
    st.session_state.setdefault(MESSAGE, {})[uid] = "Redone" if forward else "Undone"
    st.session_state.pop(_cut_key(uid), None)


def _chunk(d, config):
    return chunk_document(d, d.id, config)


def _with_model(d, config):
    """A model-backed configuration: this page's model runs or the output cache, never a model call."""
    lm = session_models()
    if lm.error:
        raise ChunkLabError(lm.error)
    return model_chunking(d, config, lm, EDIT)


st.html(STYLE)
st.title("Edit")
st.caption(
    "Fix a chunking by hand: click between two sentences to cut there, click a cut to remove it, "
    "move the selected one with ◀ ▶. The edited copy is a configuration like any other: Compare, "
    "Quality, Retrieval, the report and saved sessions use it."
)
if st.session_state.get(NOTE):
    st.toast(st.session_state.pop(NOTE), icon=":material/content_cut:")

doc = require_document()
entries = configurations()
copies = edited_copies(entries)
if not copies.entries:
    st.info(
        'No edited copy yet: press **Edit a copy** on a configuration\'s card on the Compare page '
        "(or on the Meta-Chunking page), or make one here.",
        icon=":material/info:",
    )
    st.page_link("pages/compare.py", label="Go to the Compare page", icon=":material/compare:")
    if entries:
        with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
            titles = {e.uid: e.title for e in entries}
            pick = st.selectbox("Configuration to copy", list(titles), key=_FROM, format_func=titles.get, width=420)
            chosen = next(e for e in entries if e.uid == pick)
            edit_copy_button(chosen.config, doc, chosen.tag, EDIT("make"), type="primary")
    st.stop()

uids = copies.uids
# "C = A, edited": what the copy is (the count line under it follows each edit; the editor reruns alone).
if st.session_state.get(EDIT_OPEN) in uids and st.session_state.get(_PICK) != st.session_state[EDIT_OPEN]:
    st.session_state[_PICK] = st.session_state[EDIT_OPEN]
    _set_page(1)
if st.session_state.get(_PICK) not in uids:
    st.session_state[_PICK] = uids[-1]
uid = st.selectbox("Edited copy", uids, key=_PICK, format_func=copies.titles.get, on_change=_on_pick)

states = st.session_state.setdefault(EDIT_STATES, {})
opened = open_copy(doc, entries, uid, states.get(uid))
if opened.problem:
    st.error(one_line(opened.problem), icon=":material/error:")
    st.stop()
state = states[uid] = opened.state
if opened.other_document:
    st.warning(opened.other_document, icon=":material/warning:")
    edit_copy_button(state.base, doc, state.base.label, EDIT("remake"))
    st.stop()

lm = session_models()
base = edit_base(doc, state, _chunk, _with_model, lm)
if base.column.pending:
    pending_runs_panel(doc, lm, [state.base], EDIT)
    st.stop()
if base.error:
    st.error(base.error, icon=":material/error:")
    st.stop()


@st.fragment
def editor(uid: int, doc, base, spans: tuple, scores, base_entry) -> None:
    """The text window, the widgets, the curve, the downloads and the metrics: a click reruns only this."""
    state = st.session_state[EDIT_STATES][uid]
    cut_key = _cut_key(uid)
    column = edit_chunking(doc, state.config, _chunk, _with_model)
    edited = column.chunking
    # The BC of each cut from what is known (the Quality store, else the output cache): no model call.
    view = editor_view(
        doc, state, spans, edited, session_models(), quality_store(doc), bc_mode=get("quality", "bc_mode"),
        bc_window=get("quality", "window"), page=st.session_state.get(_PAGE, 1), scores=scores, value=_VALUE,
        show_minima=bool(st.session_state.get(_MINIMA)), selected=st.session_state.get(cut_key),
    )
    if st.session_state.get(cut_key) not in view.cuts:
        st.session_state.pop(cut_key, None)
    args = (uid, doc, spans)

    st.markdown(f"**{view.counts}** · base {state.base.label} · snapped to the nearest {state.snap} start",
                help="The base's cuts are dark, the ones you added green, the base's you removed dashed red.")
    message = st.session_state.get(MESSAGE, {}).get(uid)
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.button("Undo", key=EDIT("undo"), icon=":material/undo:", disabled=not state.can_undo,
                  on_click=_step, args=(uid, False), help="Undo the last edit")
        st.button("Redo", key=EDIT("redo"), icon=":material/redo:", disabled=not state.can_redo,
                  on_click=_step, args=(uid, True), help="Redo the edit undone")
        if message:
            st.caption(message)

    text_col, side = st.columns([3, 2], gap="medium")
    with text_col:
        pager = f"{_PAGER}_{st.session_state.get(_PAGER, 0)}"
        st.pagination(view.window.pages, default=view.window.page, key=pager, on_change=_on_page, args=(pager,),
                      max_visible_pages=9)
        st.caption(view.window.caption(len(doc.text)))
        edit_text(view, _TEXT, partial(_on_text_click, *args))
    with side:
        if scores is None:
            st.info("Score the document on the Meta-Chunking page to see where the model would cut.",
                    icon=":material/show_chart:")
            st.page_link("pages/ppl.py", label="Go to the Meta-Chunking page", icon=":material/show_chart:")
        else:
            st.toggle("Show perplexity minima", key=_MINIMA,
                      help="Mark the local minima of the perplexity: where the PPL chunker could cut "
                           "(dotted in the text, circles on the curve).")
            if view.curve is not None:
                st.plotly_chart(view.curve, key=_CURVE, on_select=partial(_on_curve_click, *args),
                                selection_mode="points",
                                config={"displaylogo": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]})
                st.caption(f"Per-sentence mean NLL under {scores.model_name}, sentences of this window. "
                           "Click a point to cut before its sentence.")
        n = view.window.sentences
        with st.container(border=True):
            if n > 1:
                with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
                    st.number_input("Cut before sentence #", min_value=2, max_value=n, step=1, key=_SENTENCE,
                                    help=f"2 to {n:,}: a cut before that sentence")
                    st.button("Add cut", key=EDIT("add"), icon=":material/add:", on_click=_on_add_sentence, args=args)
            if view.cuts:
                chosen = view.selected
                # A new widget whenever the cuts change: a selectbox whose options change under it keeps
                # showing (and sends back) a label that is no longer an option.
                picker = f"{cut_key}_pick_{view.cuts_version}"
                st.selectbox("Cut", view.cuts, key=picker, format_func=view.cut_label,
                             index=view.cuts.index(chosen) if chosen is not None else None,
                             placeholder="Pick a cut", on_change=_on_pick_cut, args=(doc, uid, picker))
                with st.container(horizontal=True, gap="small"):
                    st.button("Remove", key=EDIT("remove"), icon=":material/close:", disabled=chosen is None,
                              on_click=_act, args=(*args, "remove", chosen))
                    st.button("◀ Move", key=EDIT("left"), disabled=chosen is None,
                              on_click=_act, args=(*args, "move", chosen, -1, True), help="One sentence back")
                    st.button("Move ▶", key=EDIT("right"), disabled=chosen is None,
                              on_click=_act, args=(*args, "move", chosen, 1, True), help="One sentence forward")
            else:
                st.caption("No cuts: the chunking is a single chunk.")

    edited_entry = next((e for e in configurations() if e.uid == uid), None)
    if edited_entry is None:
        return
    if edited is None:
        st.error(f"The edited copy could not be chunked: {column.error or 'its base is not cached'}",
                 icon=":material/error:")
        return
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.caption(f"Download {edited_entry.tag} ({len(edited.chunks):,} chunks):")
        download_buttons(edited_entry, edited, doc.source, EDIT("dl_{}"))
    edit_metrics_panel(doc, base_entry, base, edited_entry, edited)


editor(uid, doc, base.column.chunking, base.spans, base.scores, opened.base_entry)
