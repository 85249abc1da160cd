"""Saved sessions in the app: the sidebar's Save / Open panel, ``?session=`` and the ``?configs=`` link.

The file format, its validation and the URL form live in :mod:`backend.report.session`; this
module only reads the session's state into a :class:`~backend.report.session.Session` and
writes one back. Opening is all or nothing: the file, its configurations and its document are
checked first, and a refused session (newer format, damaged file, hash mismatch) leaves the
current one exactly as it was, with one line saying why.

A session also keeps the pages' state (:mod:`backend.lab.session`): the last benchmark
(:data:`components.keys.BENCHMARK_JOB`: results, letters, question set), put back as a finished
job, so the Benchmark page, the Summary's recall and IoU and its verdict come back with it; and
the Retrieval page's query, marks and picked configurations (:mod:`components.retrieval`), whose
search runs again on the page's next visit; and the last tuning result
(:data:`components.keys.TUNE_RESULT`), shown again by the Tune page and the Summary. The quality
numbers are not in the file: the Summary and the Quality page read them back from the output
cache, as always.

``?session=NAME`` (or an opened file) on an uploaded document waits for that document:
:func:`document_prompt`, at the top of the main pane, asks for it, and the page is not drawn
until it comes or the user keeps the current document.

Settings are saved under their names in :mod:`backend.lab.settings` (``quality.K``,
``ppl.threshold``…): :func:`components.settings.capture` reads them from the session and
:func:`backend.lab.session.settings_to_save` writes them; opening goes back through
:func:`backend.lab.session.opened_settings` (each value checked by its setting, so a hand-edited
file can give a widget no value it would reject) and :func:`components.settings.restore`.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import streamlit as st

from backend.errors import ChunkLabError, one_line
from backend.figures.charts import config_color
from backend.figures.markdown import md_text
from backend.jobs import Job
from backend.lab.session import (
    OpenedState,
    SavedBenchmark,
    benchmark_run,
    opened_settings,
    opened_state,
    settings_to_save,
    state_to_save,
)
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
from components.demo import end_demo_runs
from components.documents import current_sample, load_bundled_sample
from components.keys import (
    BENCHMARK_JOB,
    CHAT_CHOICE,
    EMB_CHOICE,
    EMB_INFO,
    LM_CHOICE,
    LM_INFO,
    QSET,
    REMOTE_SCORER,
    SESSION,
    TUNE_JOB,
    TUNE_OPENED,
    TUNE_RESULT,
)
from components.lm_runs import session_models
from components.models import load_embedding_model, load_language_model
from components.retrieval import restore_retrieval, retrieval_state
from components.settings import capture, restore
from components.state import configurations, current_document, replace_configurations, set_document

__all__ = [
    "capture_session",
    "open_session",
    "open_from_query",
    "sync_query_params",
    "sidebar_session",
    "document_prompt",
    "session_link",
]

_log = logging.getLogger(__name__)

_MESSAGE = SESSION("message")  # ("error" | "info" | "saved", one line) shown under the panel until the next open/save
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


def _saved_benchmark() -> SavedBenchmark | None:
    """The session's last finished benchmark, as a session saves it (None: none finished)."""
    job = st.session_state.get(BENCHMARK_JOB)
    if job is None or job.state != "done" or job.result is None or job.meta.get("qset") is None:
        return None
    meta = job.meta
    return SavedBenchmark(job.result.benchmark, tuple(meta["tags"]), str(meta.get("qset_name") or ""), meta["qset"])


def _capture() -> tuple[Session | None, tuple[str, ...]]:
    """The current session and one line for each part of it left out of the file."""
    doc = current_document()
    if doc is None:
        return None, ()
    sample = current_sample()
    entries = configurations()
    tagged = [(e.tag, e.config) for e in entries]
    state, notes = state_to_save(_saved_benchmark(), retrieval_state(doc, entries),
                                 tuning=st.session_state.get(TUNE_RESULT))
    return Session.make(DocRef.of(doc, sample.name if sample else None), tagged, _models(), _settings(), state), notes


def capture_session() -> Session | None:
    """The current session as a :class:`Session` (None without a document)."""
    return _capture()[0]


# --- Session → state -----------------------------------------------------------------------------------


def _apply(session: Session, doc: Document, source: str) -> list[str]:
    """Make ``session`` (already validated, with its document) the app's; returns notes on what was not restored."""
    opened = opened_settings(session.settings, source)  # raises before anything changes
    state = opened_state(session.state, len(doc.text), source)  # so does this
    notes = list(opened.notes)
    current = current_document()
    if current is None or current.id != doc.id or current.source != doc.source:
        set_document(doc)
    replace_configurations(session.configs)
    restore(opened.values)
    if opened.questions is not None:
        st.session_state[QSET] = opened.questions
    notes.extend(_apply_models(session.models))
    _apply_state(state, doc)
    return notes


def _apply_state(state: OpenedState, doc: Document) -> None:
    """Put the saved benchmark (as a finished job) and the Retrieval page's state back; clear what the file lacks."""
    entries = configurations()
    previous = st.session_state.pop(BENCHMARK_JOB, None)
    if previous is not None and previous.running:
        previous.cancel()
    saved = state.benchmark
    if saved is not None:
        uids = {e.tag: e.uid for e in entries}
        meta = {
            "tags": list(saved.tags), "colors": [config_color(uids.get(t, i)) for i, t in enumerate(saved.tags)],
            "qset": saved.qset, "qset_name": saved.qset_name, "signature": None, "from_session": True,
        }
        run = benchmark_run(saved, session_models().cache_only())
        st.session_state[BENCHMARK_JOB] = Job(
            f"Benchmarking {len(saved.tags)} configuration(s)", meta, state="done", fraction=1.0,
            label="from the session file", result=run, seconds=saved.benchmark.seconds,
        )
    restore_retrieval(state.retrieval, doc, entries)
    tuning = st.session_state.pop(TUNE_JOB, None)  # the Tune page shows the session's result, not an older run's
    if tuning is not None and tuning.running:
        tuning.cancel()
    st.session_state[TUNE_OPENED] = None
    st.session_state[TUNE_RESULT] = state.tuning  # the Tune page and the Summary show it; none in the file: none
    end_demo_runs()  # the demo's first-visit search would replace the session's query


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
        notes = _apply(session, doc, source)
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
            st.session_state[_PENDING] = (session, source)  # document_prompt asks for it, at the top of the page
            st.session_state.pop(_MESSAGE, None)
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


def session_link(name: str) -> str:
    """The link that opens the saved session ``name``: this page's full URL with ``?session=NAME`` when the app
    knows it (the browser's address), else the relative ``?session=NAME``."""
    query = "session=" + quote(name, safe="._-")
    url = getattr(st.context, "url", None)
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        return f"?{query}"
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))


def _on_save_named() -> None:
    session, left_out = _capture()
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
    text = f"Saved on the server as {path.stem}" + (f" (not in it: {'; '.join(left_out)})" if left_out else "")
    st.session_state[_MESSAGE] = ("saved", one_line(text), session_link(path.stem))


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


def _download_stem(doc: Document) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in doc.source.rsplit(".", 1)[0])


def _session_file() -> str:
    """The session as a file's text (read when the download is clicked)."""
    session = capture_session()
    return session_to_json(session) if session is not None else ""


def _show_message() -> None:
    message = st.session_state.get(_MESSAGE)
    if message is None:
        return
    if message[0] == "error":
        st.error(message[1])
    elif message[0] == "saved":
        st.success(f"{md_text(message[1])}. Open it with this link:", icon=":material/check_circle:")
        st.code(message[2], language=None, wrap_lines=True)
    else:
        st.caption(md_text(message[1]))


def sidebar_session() -> None:
    """Save session (a download, or a file on the server for ``?session=``) and Open session (an upload)."""
    gen = st.session_state.get(_GEN, 0)
    with st.expander("Session", icon=":material/bookmark:"):
        doc = current_document()
        if doc is not None:
            st.download_button(
                "Save session", _session_file, file_name=f"{_download_stem(doc)}.chunklab-session.json",
                mime="application/json", key=SESSION("download"), icon=":material/download:", on_click="ignore",
                help="A small JSON file: the document's name and hash, the configurations with their letters, "
                "the models, thresholds and view settings, the last benchmark's results and the Retrieval "
                "page's query, marks and picks. Never an API key, never the document's text.",
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
    if st.session_state.get(_PENDING) is None:  # else the message is in the document prompt
        _show_message()


def document_prompt() -> bool:
    """At the top of the main pane: the document a session being opened waits for, with its upload box.

    Returns:
        True while the session waits (the page is not drawn, so the sample open now never passes
        for the session's document); False when no session waits.
    """
    pending = st.session_state.get(_PENDING)
    if pending is None:
        return False
    session, source = pending
    ref = session.doc
    gen = st.session_state.get(_GEN, 0)
    saved = f", saved {session.created[:16].replace('T', ' ')} UTC" if session.created else ""
    with st.container(border=True, key=SESSION("ask")):
        st.warning(
            f"This session was saved on **{md_text(ref.name)}** ({md_text(source)}: {len(session.configs)} "
            f"configuration(s){saved}, document hash {ref.sha}): upload it to reopen.",
            icon=":material/upload_file:",
        )
        doc_key = SESSION(f"doc_{gen}")
        st.file_uploader(
            f"The session's document: {ref.name}", key=doc_key, on_change=_on_document_upload, args=(doc_key,),
            help="Checked against the hash the session saved before anything changes.",
        )
        st.button(
            "Keep the current document instead", key=SESSION("cancel"), on_click=_on_cancel_pending, type="tertiary",
            icon=":material/close:",
        )
        _show_message()
    return True
