"""Chunk Lab: compare document chunkers side by side.

The router: page config, shared session state, navigation and the sidebar's document
line, then the selected page. Run with ``streamlit run app.py``.
"""

import streamlit as st

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
