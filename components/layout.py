"""What every page shares: page config, session setup, the page list and the sidebar's document and model lines.

``app.py`` (the router) runs these around ``st.navigation``. Each page also starts with
:func:`ensure_routed`, because with a ``pages/`` folder Streamlit begins every server
process in its legacy multipage mode: until some run has called ``st.navigation``, a
request for ``/compare`` (a bookmark, a browser reconnecting after a restart) runs the
page file alone, without the router. ``AppTest`` does so on every run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import streamlit as st

from backend.models.cache import default_cache
from components.demo import demo_sidebar, init_demo, tour_caption
from components.documents import load_default_sample
from components.keys import CACHE_PROBLEM_SHOWN, LEGACY_RERUN, ROUTED
from components.models import sidebar_models
from components.session import document_prompt, open_from_query, sidebar_session, sync_query_params
from components.state import current_document, init_session_state

__all__ = [
    "PURPOSE",
    "page_config",
    "shared_setup",
    "page_list",
    "landing_intro",
    "sidebar_document",
    "demo_chrome",
    "ensure_routed",
    "cache_notice",
]

PURPOSE = (
    "Compare how document chunkers split the same text — side by side, with quality and retrieval "
    "metrics — before you pick one for your RAG pipeline."
)

# Shipped with the app: a ``:material/…:`` page icon makes the browser fetch the favicon from
# fonts.gstatic.com (icons elsewhere come from the font Streamlit serves itself). An SVG file
# goes to the page inline, as a data: URL.
PAGE_ICON = Path(__file__).resolve().parent.parent / "assets" / "icon.svg"


def page_config() -> None:
    """Title, icon and wide layout."""
    st.set_page_config(page_title="Chunk Lab", page_icon=str(PAGE_ICON), layout="wide")


def shared_setup() -> None:
    """Session keys every page relies on, and the default sample (or the demo) on a session's first run."""
    init_session_state()
    open_from_query()  # ?session=, ?sample=, ?configs= on a session's first run: before the default sample
    with st.spinner("Opening the sample document…"):
        load_default_sample()
        init_demo()


def cache_notice() -> None:
    """Once per session (per distinct problem): a toast saying the output cache cannot store results.

    The app keeps working without it; the Models page's cache panel says the same while it lasts.
    """
    cache = default_cache()
    shown = st.session_state.get(CACHE_PROBLEM_SHOWN)
    problem = cache.probe() if shown is None else cache.problem  # a session's first run tries a write
    st.session_state.setdefault(CACHE_PROBLEM_SHOWN, "")
    if problem is not None and shown != problem:
        st.session_state[CACHE_PROBLEM_SHOWN] = problem
        st.toast(problem, icon=":material/warning:")


def page_list() -> list:
    """The app's pages, in navigation order: Summary first once a document is loaded; Document is the default."""
    summary = [st.Page("pages/summary.py", title="Summary", icon=":material/summarize:")]
    return [
        *(summary if current_document() is not None else []),
        st.Page("pages/document.py", title="Document", icon=":material/description:", default=True),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
        st.Page("pages/ppl.py", title="Meta-Chunking", icon=":material/show_chart:"),
        st.Page("pages/edit.py", title="Edit", icon=":material/content_cut:"),
        st.Page("pages/quality.py", title="Quality", icon=":material/hub:"),
        st.Page("pages/retrieval.py", title="Retrieval", icon=":material/search:"),
        st.Page("pages/benchmark.py", title="Benchmark", icon=":material/leaderboard:"),
        st.Page("pages/corpus.py", title="Corpus", icon=":material/library_books:"),
        st.Page("pages/tune.py", title="Tune", icon=":material/tune:"),
        st.Page("pages/models.py", title="Models", icon=":material/memory:"),
        *(summary if current_document() is None else []),
    ]


def landing_intro() -> None:
    """The landing page's head: the app's title, what it is for in one line, and Compare as the next step."""
    st.title("Chunk Lab")
    with st.container(horizontal=True, vertical_alignment="center", gap="medium"):
        st.markdown(PURPOSE, width="stretch")
        st.page_link(
            "pages/compare.py", label="Next: compare chunkers", icon=":material/arrow_forward:",
            help="Chunk the current document with several configurations, side by side.",
        )


def sidebar_document() -> None:
    """The current document's name and size, and the session's models, under the navigation."""
    with st.sidebar:
        doc = current_document()
        if doc is None:
            st.caption("No document loaded")
        else:
            st.markdown("**Document**")
            st.text(doc.source)  # a file name is user input: plain text, never Markdown
            st.caption(f"{doc.kind.upper()} · {len(doc.text):,} characters · {len(doc.pages):,} page(s)")
        sidebar_models()
        sidebar_session()
    sync_query_params()


def demo_chrome(page: Any) -> None:
    """The sidebar's "Demo mode" switch and, in demo mode, the tour's caption for ``page`` (from ``st.navigation``)."""
    demo_sidebar()
    tour_caption(page.title)


def ensure_routed() -> None:
    """Do the router's work when this page runs without ``app.py`` (see the module docstring).

    Registering the real page list here also ends Streamlit's legacy mode for the process,
    so later runs go through ``app.py`` again. The session then reruns once, through the
    router: widget ids include the page's script hash, which differs between the legacy
    run and a routed one, so without that rerun the user's first click on the page would
    arrive under ids no widget has and be dropped (seen in Chromium on a fresh server).
    """
    if st.session_state.get(ROUTED):
        return
    page_config()
    shared_setup()
    page = st.navigation(page_list())
    # Not under AppTest: it starts every run after the first in legacy mode by design, and a
    # rerun requested there goes through app.py, which would flip the ids the other way.
    if not st.session_state.get(LEGACY_RERUN) and "streamlit.testing.v1.app_test" not in sys.modules:
        st.session_state[LEGACY_RERUN] = True
        st.rerun()
    sidebar_document()
    demo_chrome(page)
    if document_prompt():  # as app.py: a session being opened waits for its document, the page is not drawn
        st.stop()
