"""Session state shared by every page: the current document and the chunker configurations.

Their session-state keys (``DOC``, ``CONFIGS``…) have no page prefix; they are defined, like
every key more than one module uses, in :mod:`components.keys`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import streamlit as st

from backend.chunkers import make_chunker
from backend.chunking import ChunkerConfig, ConfigEntry, first_free_tag
from backend.text.document import Document
from components.keys import CONFIGS, DOC, DOC_VERSION, NEXT_UID

__all__ = [
    "DEFAULT_CONFIGS",
    "init_session_state",
    "current_document",
    "require_document",
    "require_configurations",
    "set_document",
    "configurations",
    "normalized_config",
    "add_configuration",
    "remove_configuration",
    "update_configuration",
    "last_removed",
    "undo_remove",
    "replace_configurations",
]

# Removed configurations, most recent last, as (position, entry): what Undo restores. Only this module
# reads or writes it; adding a configuration clears it (its letter may have been reused).
_REMOVED = "configs_removed"

# The two configurations the Compare page opens with: the Chroma report's recursive
# baseline and a half-overlapping fixed-token window.
DEFAULT_CONFIGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("recursive", {"chunk_size": 200, "chunk_overlap": 0}),
    ("fixed_token", {"chunk_size": 250, "chunk_overlap": 125}),
)


def normalized_config(name: str, params: Mapping[str, Any], tokenizer: str = "cl100k") -> ChunkerConfig:
    """The full configuration (defaults filled in, values coerced) for ``name`` and ``params``.

    Raises:
        ParameterError: unknown chunker or tokenizer, or a bad parameter value.
    """
    return make_chunker(name, params, tokenizer).config


def init_session_state() -> None:
    """Create the shared keys once per session (later runs leave them alone)."""
    st.session_state.setdefault(DOC, None)
    st.session_state.setdefault(DOC_VERSION, 0)
    st.session_state.setdefault(NEXT_UID, 0)
    if CONFIGS not in st.session_state:
        st.session_state[CONFIGS] = []
        for name, params in DEFAULT_CONFIGS:
            add_configuration(normalized_config(name, params))


def current_document() -> Document | None:
    """The document every page works on (``None`` until one is loaded)."""
    return st.session_state.get(DOC)


def require_document() -> Document:
    """The current document; without one, a line and a link to the Document page, and the page stops here."""
    doc = current_document()
    if doc is None:
        st.info("Load a document first.", icon=":material/info:")
        st.page_link("pages/document.py", label="Go to the Document page", icon=":material/description:")
        st.stop()
    return doc


def require_configurations() -> list[ConfigEntry]:
    """The configurations; without any, a line and a link to the Compare page, and the page stops here."""
    entries = configurations()
    if not entries:
        st.info("No configurations yet: add some on the Compare page.", icon=":material/info:")
        st.page_link("pages/compare.py", label="Go to the Compare page", icon=":material/compare:")
        st.stop()
    return entries


def set_document(doc: Document) -> None:
    """Make ``doc`` the current document."""
    st.session_state[DOC] = doc
    st.session_state[DOC_VERSION] = st.session_state.get(DOC_VERSION, 0) + 1


def configurations() -> list[ConfigEntry]:
    """The configurations to compare, in order."""
    return st.session_state.setdefault(CONFIGS, [])


def add_configuration(config: ChunkerConfig) -> ConfigEntry:
    """Append ``config`` under the first free letter (the same config twice is allowed: each entry gets its own uid).

    Uids are never reused (widget keys are built from them); letters are.
    """
    uid = st.session_state.get(NEXT_UID, 0)
    st.session_state[NEXT_UID] = uid + 1
    entries = configurations()
    entry = ConfigEntry(uid, first_free_tag(e.tag for e in entries), config)
    entries.append(entry)
    st.session_state.pop(_REMOVED, None)  # an older removal's letter may now be taken: no undo past this
    return entry


def remove_configuration(uid: int) -> None:
    """Drop the configuration with ``uid`` (a widget callback); :func:`undo_remove` puts it back."""
    entries = configurations()
    for position, entry in enumerate(entries):
        if entry.uid == uid:
            st.session_state.setdefault(_REMOVED, []).append((position, entry))
            st.session_state[CONFIGS] = entries[:position] + entries[position + 1 :]
            return


def update_configuration(uid: int, config: ChunkerConfig) -> ConfigEntry | None:
    """Replace the configuration of the entry with ``uid``, keeping its uid, letter and place (None: no such entry)."""
    entries = configurations()
    for position, entry in enumerate(entries):
        if entry.uid == uid:
            new = ConfigEntry(uid, entry.tag, config)
            st.session_state[CONFIGS] = entries[:position] + [new] + entries[position + 1 :]
            return new
    return None


def last_removed() -> ConfigEntry | None:
    """The configuration the next :func:`undo_remove` restores (``None``: nothing to undo)."""
    removed = st.session_state.get(_REMOVED)
    return removed[-1][1] if removed else None


def undo_remove() -> None:
    """Put the last removed configuration back, with its uid, letter and position (a widget callback)."""
    removed = st.session_state.get(_REMOVED)
    if not removed:
        return
    position, entry = removed.pop()
    entries = configurations()
    st.session_state[CONFIGS] = entries[:position] + [entry] + entries[position:]


def replace_configurations(tagged: Sequence[tuple[str, ChunkerConfig]]) -> None:
    """Make ``tagged`` (``(letter, config)`` in order) the configurations, each with a fresh uid; no undo past this."""
    entries = []
    for tag, config in tagged:
        uid = st.session_state.get(NEXT_UID, 0)
        st.session_state[NEXT_UID] = uid + 1
        entries.append(ConfigEntry(uid, tag, config))
    st.session_state[CONFIGS] = entries
    st.session_state.pop(_REMOVED, None)
