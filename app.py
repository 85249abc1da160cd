"""Chunk Lab: compare document chunkers side by side.

The router: page config, shared session state, navigation and the sidebar's document
line, then the selected page. Run with ``streamlit run app.py``.

The same file is the server's ASGI app: ``streamlit run`` first imports it as a module (not
as ``__main__``) and finds ``app``, an ``st.App`` that runs this file as ``__main__`` for every
session, with one route per page so that a deep link (``/compare?configs=…``) makes no 404
(see :mod:`components.deep_links`). The router's imports live in its branch: the server's
import must not build the pages' cached functions before Streamlit's runtime exists.
"""

import streamlit as st

from components.deep_links import deep_link_routes

if __name__ != "__main__":  # imported by `streamlit run` for its ASGI app: the server, no session
    app = st.App(__file__, routes=deep_link_routes())
else:
    from components.keys import ROUTED
    from components.layout import cache_notice, demo_chrome, page_config, page_list, shared_setup, sidebar_document
    from components.session import document_prompt, sync_query_params

    page_config()
    shared_setup()
    page = st.navigation(page_list())
    sidebar_document()
    demo_chrome(page)
    cache_notice()

    st.session_state[ROUTED] = True
    try:
        if not document_prompt():  # a session being opened waits for its document: asked at the top, page not drawn
            page.run()
    finally:
        st.session_state[ROUTED] = False
        sync_query_params()  # a configuration the page just added is in the link at once
