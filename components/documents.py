"""Loading documents into the session: uploads and bundled samples.

Errors a user can cause (a corrupt PDF, an empty file…) come back as one-line messages;
the previous document stays loaded.
"""

from __future__ import annotations

import logging

import streamlit as st

from backend.config import max_file_bytes
from backend.errors import ChunkLabError, InputError, one_line
from backend.loaders import SUPPORTED_EXTENSIONS, load_bytes
from backend.samples import Sample
from components.cached import sample_document, samples
from components.state import current_document, set_document

__all__ = [
    "upload_types",
    "upload_limit_mb",
    "load_upload",
    "load_bundled_sample",
    "load_default_sample",
    "current_sample",
]

_log = logging.getLogger(__name__)


def upload_types() -> list[str]:
    """The file extensions the uploader accepts (without dots)."""
    return sorted({ext.lower().lstrip(".") for ext in SUPPORTED_EXTENSIONS})


def upload_limit_mb() -> int:
    """The upload limit in whole megabytes: the backend's (``CHUNKLAB_MAX_FILE_MB``), capped by the
    server's ``server.maxUploadSize``, which rejects larger requests whatever the widget says."""
    backend_mb = max(1, -(-max_file_bytes() // (1024 * 1024)))
    return min(backend_mb, int(st.get_option("server.maxUploadSize")))


def load_upload(data: bytes, name: str) -> str | None:
    """Read an uploaded file and make it the current document.

    Returns:
        ``None`` on success, else the one-line error message (the current document is kept).
    """
    try:
        doc = load_bytes(data, name)
    except InputError as e:
        return one_line(str(e))
    except Exception as e:  # a loader bug must not take the page down: report it on one line
        _log.exception("loading %r failed", name)
        return one_line(f"{name}: could not be read ({type(e).__name__}: {e})")
    set_document(doc)
    return None


def load_bundled_sample(name: str) -> str | None:
    """Make the bundled sample ``name`` the current document; the error message on failure."""
    try:
        doc = sample_document(name)
    except ChunkLabError as e:  # an unknown name (ParameterError) or an unreadable file
        return one_line(str(e))
    set_document(doc)
    return None


def load_default_sample() -> None:
    """On a session's first run, open the first bundled sample so no page starts empty."""
    if current_document() is not None or st.session_state.get("default_sample_tried"):
        return
    st.session_state["default_sample_tried"] = True
    found = samples()
    if found:
        load_bundled_sample(found[0].name)


def current_sample() -> Sample | None:
    """The bundled sample the current document is, else ``None`` (an upload, even one named like a sample).

    Decided from the document itself (same file name, same text as the sample), so whatever
    made it current — the picker, the first run, an upload — the answer stays true.
    """
    doc = current_document()
    if doc is None:
        return None
    for sample in samples():
        if sample.path.name == doc.source:
            return sample if sample_document(sample.name).id == doc.id else None
    return None
