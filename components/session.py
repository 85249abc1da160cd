"""Saved sessions in the app: the sidebar's Save / Open panel, ``?session=`` and the ``?configs=`` link.

The file format, its validation and the URL form live in :mod:`backend.report.session`; this
module only reads the session's state into a :class:`~backend.report.session.Session` and
writes one back. Opening is all or nothing: the file, its configurations and its document are
checked first, and a refused session (newer format, damaged file, hash mismatch) leaves the
current one exactly as it was, with one line saying why.

Settings are saved under their names in :mod:`backend.lab.settings` (``quality.K``,
``ppl.threshold``…): :func:`components.settings.capture` reads them from the session and
:func:`backend.lab.session.settings_to_save` writes them; opening goes back through
:func:`backend.lab.session.opened_settings` (each value checked by its setting, so a hand-edited
file can give a widget no value it would reject) and :func:`components.settings.restore`.
"""

from __future__ import annotations

import logging
from typing import Any

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.lab.session import opened_settings, settings_to_save
from backend.loaders import load_bytes
from backend.report.session import (
    DocRef,
    Session,
    configs_from_query,
    configs_to_query,
    load_session,
    parse_session,
    resolve_document,
    save_session,
    session_path,
    session_to_json,
)
from backend.text.document import Document
from components.documents import current_sample, load_bundled_sample
from components.keys import (
    CHAT_CHOICE,
    EMB_CHOICE,
    EMB_INFO,
    LM_CHOICE,
    LM_INFO,
    QSET,
    REMOTE_SCORER,
    SESSION,
)
from components.models import load_embedding_model, load_language_model
from components.settings import capture, restore
from components.state import configurations, current_document, replace_configurations, set_document

__all__ = ["capture_session", "open_session", "open_from_query", "sync_query_params", "sidebar_session"]

_log = logging.getLogger(__name__)

_MESSAGE = SESSION("message")  # ("error" | "info", one line) shown under the panel until the next open
_PENDING = SESSION("pending")  # a parsed Session waiting for its document
_GEN = SESSION("gen")  # bumped to empty the uploaders once a file is handled
_URL_DONE = SESSION("url_done")  # ?session= / ?configs= are read on a session's first run only


# --- state → Session ---------------------------------------------------------------------------------


def _models() -> dict[str, Any]:
    """The session's chosen models by spec or name (None: the default); never a key."""
    models: dict[str, Any] = {}
    lm = st.session_state.get(LM_CHOICE)
    if lm is not None:
        kind, spec = lm
        info = st.session_state.get(LM_INFO)
        models["lm"] = {"kind": kind, "spec": spec} if kind == "local" else {"kind": kind, "name": getattr(info, "name", None)}
    else:
        models["lm"] = None
    models["embedder"] = {"spec": st.session_state.get(EMB_CHOICE)} if EMB_INFO in st.session_state else None
    chat = st.session_state.get(CHAT_CHOICE)
    if chat is None:
        models["chat"] = None
    elif chat[0] == "local":
        models["chat"] = {"kind": "local"}
    else:
        base_url, model = chat[1]
        models["chat"] = {"kind": "remote", "base_url": base_url, "model": model}
    return models


def _settings() -> dict[str, Any]:
    """The page settings the session holds, and its question set."""
    return settings_to_save(capture(), st.session_state.get(QSET))


def capture_session() -> Session | None:
    """The current session as a :class:`Session` (None without a document)."""
    doc = current_document()
    if doc is None:
        return None
    sample = current_sample()
    tagged = [(e.tag, e.config) for e in configurations()]
    return Session.make(DocRef.of(doc, sample.name if sample else None), tagged, _models(), _settings())


# --- Session → state -----------------------------------------------------------------------------------


def _apply(session: Session, doc: Document) -> list[str]:
    """Make ``session`` (already validated, with its document) the app's; returns notes on what was not restored."""
    opened = opened_settings(session.settings)  # raises before anything changes
    notes = list(opened.notes)
    current = current_document()
    if current is None or current.id != doc.id or current.source != doc.source:
        set_document(doc)
    replace_configurations(session.configs)
    restore(opened.values)
    if opened.questions is not None:
        st.session_state[QSET] = opened.questions
    notes.extend(_apply_models(session.models))
    return notes


def _apply_models(models: Any) -> list[str]:
    """Load the session's chosen models (the defaults need nothing); notes on those that could not be."""
    notes: list[str] = []
    lm, emb, chat = models.get("lm"), models.get("embedder"), models.get("chat")
    if isinstance(lm, dict) and lm.get("kind") == "local":
        spec = lm.get("spec") if isinstance(lm.get("spec"), str) else None
        if st.session_state.get(LM_CHOICE) != ("local", spec):
            error = load_language_model(spec)
            if error:
                notes.append(f"the session's language model was not loaded: {error}")
    elif isinstance(lm, dict) and lm.get("kind") == "remote":
        notes.append(f"the session used a remote language model ({lm.get('name')}): connect it on the Models page")
    elif lm is None:  # the session ran the default model: so does this one from now on
        for key in (LM_CHOICE, LM_INFO, REMOTE_SCORER):
            st.session_state.pop(key, None)
    if emb is None:
        st.session_state.pop(EMB_CHOICE, None)
        st.session_state.pop(EMB_INFO, None)
    elif isinstance(emb, dict):
        spec = emb.get("spec") if isinstance(emb.get("spec"), str) else None
        if EMB_INFO not in st.session_state or st.session_state.get(EMB_CHOICE) != spec:
            error = load_embedding_model(spec)
            if error:
                notes.append(f"the session's embedder was not loaded: {error}")
    if chat is None:
        st.session_state.pop(CHAT_CHOICE, None)
    elif isinstance(chat, dict) and chat.get("kind") == "local":
        st.session_state[CHAT_CHOICE] = ("local", None)
    elif isinstance(chat, dict) and chat.get("kind") == "remote" and isinstance(chat.get("model"), str):
        base_url = chat.get("base_url") if isinstance(chat.get("base_url"), str) else ""
        st.session_state[CHAT_CHOICE] = ("remote", (base_url, chat["model"]))
        notes.append("the session's chat model is an API: enter its key on the Models page if it needs one")
    return notes


def _finish(session: Session, doc: Document, source: str) -> None:
    """Apply ``session`` and say so (or why not) in the panel's message."""
    try:
        notes = _apply(session, doc)
    except ChunkLabError as e:
        st.session_state[_MESSAGE] = ("error", one_line(str(e)))
        return
    st.session_state.pop(_PENDING, None)
    text = f"Opened {source}: {len(session.configs)} configuration(s) on {doc.source}"
    st.session_state[_MESSAGE] = ("info", one_line("; ".join([text, *notes])))


def open_session(data: bytes | str, source: str, document: Document | None = None) -> bool:
    """Open a session file's content; False (with the reason in the panel) when it is refused.

    A session on a bundled sample opens at once; one on an uploaded file waits for that file
    (:func:`sidebar_session` asks for it), unless ``document`` is given and matches.
    """
    try:
        session = parse_session(data, source=source)
    except ChunkLabError as e:
        st.session_state[_MESSAGE] = ("error", one_line(str(e)))
        return False
    return _open(session, source, document)


def _open(session: Session, source: str, document: Document | None) -> bool:
    try:
        if session.doc.sample is None and document is None:
            st.session_state[_PENDING] = (session, source)
            st.session_state[_MESSAGE] = (
                "info", one_line(f"{source} needs its document: upload {session.doc.name} (hash {session.doc.sha})"),
            )
            return False
        doc = resolve_document(session.doc, document)
    except ChunkLabError as e:
        st.session_state[_MESSAGE] = ("error", one_line(str(e)))
        return False
    _finish(session, doc, source)
    return True


def _on_open_upload(key: str) -> None:
    upload = st.session_state.get(key)
    st.session_state[_GEN] = st.session_state.get(_GEN, 0) + 1
    if upload is not None:
        st.session_state.pop(_PENDING, None)
        open_session(upload.getvalue(), upload.name)


def _on_document_upload(key: str) -> None:
    upload = st.session_state.get(key)
    st.session_state[_GEN] = st.session_state.get(_GEN, 0) + 1
    pending = st.session_state.get(_PENDING)
    if upload is None or pending is None:
        return
    session, source = pending
    try:
        doc = resolve_document(session.doc, load_bytes(upload.getvalue(), upload.name))
    except ChunkLabError as e:
        st.session_state[_MESSAGE] = ("error", one_line(str(e)))
        return
    except Exception as e:  # a loader bug must not take the page down
        _log.exception("loading %r failed", upload.name)
        st.session_state[_MESSAGE] = ("error", one_line(f"{upload.name}: could not be read ({type(e).__name__}: {e})"))
        return
    _finish(session, doc, source)


def _on_cancel_pending() -> None:
    st.session_state.pop(_PENDING, None)
    st.session_state.pop(_MESSAGE, None)


def _on_save_named() -> None:
    session = capture_session()
    name = (st.session_state.get(SESSION("name")) or "").strip()
    if session is None:
        return
    try:
        path = session_path(name)
        save_session(session, path)
    except ChunkLabError as e:
        st.session_state[_MESSAGE] = ("error", one_line(str(e)))
        return
    except OSError as e:
        st.session_state[_MESSAGE] = ("error", one_line(f"the session could not be saved: {e.strerror or e}"))
        return
    st.session_state[_MESSAGE] = ("info", f"Saved on the server: open it with ?session={path.stem}")


# --- the URL ------------------------------------------------------------------------------------------------


def open_from_query() -> None:
    """On a session's first run: open ``?session=NAME``, then ``?sample=`` and ``?configs=`` (they win: a
    link's configurations are the ones last shown). A bad value leaves the defaults, with one line."""
    if st.session_state.get(_URL_DONE):
        return
    st.session_state[_URL_DONE] = True
    params = st.query_params
    name = params.get("session")
    if name:
        try:
            session = load_session(session_path(name))
        except ChunkLabError as e:
            st.session_state[_MESSAGE] = ("error", one_line(str(e)))
        else:
            _open(session, f"session {name}", None)
    sample = params.get("sample")
    if sample:
        error = load_bundled_sample(sample)
        if error:
            st.session_state[_MESSAGE] = ("error", error)
    raw = params.get("configs")
    if raw:
        try:
            replace_configurations(configs_from_query(raw))
        except ChunkLabError as e:
            st.session_state[_MESSAGE] = ("error", one_line(str(e)))


def sync_query_params() -> None:
    """Keep ``?configs=`` (and ``?sample=`` while the document is a bundled sample) equal to the session's."""
    if not st.session_state.get(_URL_DONE):
        return  # the link has not been read yet: do not overwrite it
    value = configs_to_query([(e.tag, e.config) for e in configurations()])
    if value and st.query_params.get("configs") != value:
        st.query_params["configs"] = value
    elif not value and "configs" in st.query_params:
        del st.query_params["configs"]
    sample = current_sample() if current_document() is not None else None
    if sample is not None and st.query_params.get("sample") != sample.name:
        st.query_params["sample"] = sample.name
    elif sample is None and "sample" in st.query_params:
        del st.query_params["sample"]


# --- the sidebar panel ------------------------------------------------------------------------------------------


def sidebar_session() -> None:
    """Save session (a download, or a file on the server for ``?session=``) and Open session (an upload)."""
    gen = st.session_state.get(_GEN, 0)
    with st.expander("Session", icon=":material/bookmark:"):
        session = capture_session()
        if session is not None:
            stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in session.doc.name.rsplit(".", 1)[0])
            st.download_button(
                "Save session", session_to_json(session), file_name=f"{stem}.chunklab-session.json",
                mime="application/json", key=SESSION("download"), icon=":material/download:", on_click="ignore",
                help="A small JSON file: the document's name and hash, the configurations with their letters, "
                "the models, thresholds and view settings. Never an API key.",
            )
            left, right = st.columns([3, 2], vertical_alignment="bottom")
            left.text_input("Name on the server", key=SESSION("name"), placeholder="my-comparison")
            right.button(
                "Save", key=SESSION("save"), on_click=_on_save_named, disabled=not st.session_state.get(SESSION("name")),
                help="Save under the data directory's sessions/ folder, to open with ?session=NAME",
            )
        key = SESSION(f"open_{gen}")
        st.file_uploader(
            "Open session", type=["json"], key=key, on_change=_on_open_upload, args=(key,),
            help="A file saved by Save session. The current session is kept if it cannot be opened.",
        )
        pending = st.session_state.get(_PENDING)
        if pending is not None:
            doc_key = SESSION(f"doc_{gen}")
            st.file_uploader(
                f"The session's document: {pending[0].doc.name}", key=doc_key, on_change=_on_document_upload,
                args=(doc_key,), help="Checked against the hash the session saved before anything changes.",
            )
            st.button("Cancel", key=SESSION("cancel"), on_click=_on_cancel_pending, type="tertiary")
    message = st.session_state.get(_MESSAGE)
    if message is not None:
        (st.error if message[0] == "error" else st.caption)(message[1])
