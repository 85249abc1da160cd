"""The Edit page's parts: "Edit a copy", the clickable text (a components v2 component), the edit widgets.

The clickable text is a Streamlit components v2 component: its JavaScript sets the window's
HTML (:func:`backend.figures.edit.edit_text_html`, escaped in Python) as the inner HTML of its
own element and sends each click back as a trigger ``{action, offset, step}``; the page's
callback applies it with one call (:func:`backend.lab.edit_view.edit_action`). The HTML reaches
the component only through its ``data``, never through ``html=``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from backend.chunking import ChunkerConfig, ConfigEntry
from backend.errors import ChunkLabError, one_line
from backend.figures.edit import EDIT_CSS
from backend.lab.edit import EditState, edit_copy
from backend.lab.edit_view import EditAction, EditView, edit_action
from backend.text.document import Document
from components.keys import EDIT, EDIT_OPEN, EDIT_STATES
from components.state import add_configuration, update_configuration

__all__ = [
    "EDIT_PAGE",
    "NOTE",
    "MESSAGE",
    "make_edited_copy",
    "edit_copy_button",
    "apply_edit",
    "edit_text",
]

EDIT_PAGE = "pages/edit.py"
NOTE = EDIT("note")  # a toast the Edit page shows once (set by "Edit a copy" before the switch)
MESSAGE = EDIT("message")  # {uid: the last edit's one line} (EditOutcome.message)
_GOTO = EDIT("goto")  # set by an "Edit a copy" callback: the next script run switches to the Edit page

_JS = """
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let host = parentElement.querySelector(".ed-host");
  if (!host) {
    host = document.createElement("div");
    host.className = "ed-host";
    parentElement.appendChild(host);
  }
  if (host.dataset.key !== data.key) {
    const old = host.querySelector(".ed-root");
    const top = old && host.dataset.page === String(data.page) ? old.scrollTop : 0;
    host.innerHTML = data.html;  /* escaped in Python: backend.figures.edit.edit_text_html */
    host.dataset.key = data.key;
    host.dataset.page = String(data.page);
    const root = host.querySelector(".ed-root");
    if (root) root.scrollTop = top;
  }
  host.onclick = (event) => {
    const el = event.target.closest("[data-o]");
    if (!el || !host.contains(el)) return;
    event.stopPropagation();
    setTriggerValue("click", {
      action: el.dataset.act || "toggle",
      offset: Number(el.dataset.o),
      step: Number(el.dataset.step || 0),
    });
  };
}
"""

_EDIT_TEXT = st.components.v2.component("chunklab_edit_text", css=EDIT_CSS, js=_JS)


def make_edited_copy(config: ChunkerConfig, doc: Document, origin: str) -> ConfigEntry:
    """Add an edited copy of ``config`` on ``doc`` (a new letter), hold its edit state and open it on the Edit page.

    Args:
        config: The configuration to edit (an edited copy's copy keeps its base and edits).
        doc: The document the edits are made on.
        origin: What the toast names the base by: its letter, else its label.

    Raises:
        ParameterError: ``config`` cannot be a base.
    """
    entry = add_configuration(edit_copy(config, doc))
    st.session_state.setdefault(EDIT_STATES, {})[entry.uid] = EditState.of(entry.config)
    st.session_state[EDIT_OPEN] = entry.uid
    st.session_state[NOTE] = f"{entry.tag} = {origin}, edited copy added"
    return entry


def _on_edit_copy(config: ChunkerConfig, doc: Document, origin: str, error_key: str) -> None:
    try:
        make_edited_copy(config, doc, origin)
    except ChunkLabError as e:
        st.session_state[error_key] = one_line(str(e))
    else:
        st.session_state[_GOTO] = True


def edit_copy_button(config: ChunkerConfig, doc: Document, origin: str, key: str, **kwargs: Any) -> None:
    """An "Edit a copy" button: a new edited copy of ``config`` (see :func:`make_edited_copy`), then the Edit page.

    A page switch cannot happen inside a button callback, so the callback makes the copy and the
    next script run (this function, drawn again) switches.
    """
    if st.session_state.pop(_GOTO, False):
        st.switch_page(EDIT_PAGE)
    error_key = f"{key}_error"
    st.button(
        "Edit a copy", key=key, icon=":material/content_cut:", on_click=_on_edit_copy,
        args=(config, doc, origin, error_key),
        help="A new configuration with these chunks that you edit by hand on the Edit page", **kwargs,
    )
    if st.session_state.get(error_key):
        st.error(st.session_state.pop(error_key), icon=":material/error:")


def apply_edit(
    uid: int, doc: Document, base_spans: Sequence[tuple[int, int]], action: str, offset: int, step: int = 0,
    select_key: str | None = None,
) -> EditAction | None:
    """Apply one action to the edited copy ``uid`` (a widget callback): its new state, configuration and message.

    ``select_key`` (the cut selectbox's key) follows the cut the action made or moved.
    """
    states = st.session_state.setdefault(EDIT_STATES, {})
    state = states.get(uid)
    if state is None:
        return None
    try:
        done = edit_action(state, doc, base_spans, action, offset, step)
    except ChunkLabError as e:
        st.session_state.setdefault(MESSAGE, {})[uid] = one_line(str(e))
        return None
    outcome = done.outcome
    st.session_state.setdefault(MESSAGE, {})[uid] = outcome.message
    if outcome.changed:
        states[uid] = outcome.state
        update_configuration(uid, outcome.state.config)
        if select_key is not None:
            if done.cut is not None:
                st.session_state[select_key] = done.cut
            else:
                st.session_state.pop(select_key, None)
    return done


def edit_text(view: EditView, key: str, on_click: Callable[[], None]) -> None:
    """The window's clickable text (the component); ``on_click`` runs on each click (read ``st.session_state[key]``)."""
    stamp = f"{view.doc_id}:{view.window.page}:{view.cuts}:{view.result.removed}:{view.selected}:{view.minima}"
    _EDIT_TEXT(
        key=key,
        data={"html": view.html, "key": str(hash(stamp)), "page": view.window.page},
        on_click_change=on_click,
    )
